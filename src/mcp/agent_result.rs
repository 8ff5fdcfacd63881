//! `agent_result`: one run's outcome and final text, without waiting; collected by the caller.

use super::server::{json_result, CorralTools, RunArgs, RunView};
use crate::run::caller::caller_run;
use crate::run::scope::{run_for, Access};
use crate::verbs::wait::collected_by;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

#[tool_router(router = agent_result_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "The outcome and final text of one run, without waiting. If it has not ended yet it says so: use wait_agents to block until it does.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn agent_result(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = match super::server::on_host(store, &args.run_id, Access::Read, &[])? {
                Some(there) => there,
                None => run_for(store, &args.run_id, Access::Read)?,
            };
            let caller = caller_run(store)?;
            collected_by(store, caller.as_deref(), std::slice::from_ref(&run))?;
            if run.status.is_active() {
                return Ok(json_result(&serde_json::json!({
                    "note": format!("run {} has not ended yet ({}): call wait_agents to block until it does", run.id, run.status),
                    "run": RunView::from(&run),
                })));
            }
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }
}
