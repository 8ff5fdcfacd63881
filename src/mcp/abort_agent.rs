//! `abort_agent`: a run stopped with every process it started.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use std::time::Duration;

use super::server::{json_result, CorralTools, RunArgs, RunView};
use crate::home::config::Config;
use crate::run::scope::{run_for, Access};
use crate::verbs::abort::{abort, Aborted};

#[tool_router(router = abort_agent_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Stop a run and every process it started, including its own background runs. Use it when a result is no longer needed. Aborting a run that already ended changes nothing.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn abort_agent(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            if let Some(there) = super::server::on_host(store, &args.run_id, Access::Act, &["abort", "{id}"])? {
                return Ok(json_result(
                    &serde_json::json!({ "result": "aborted there", "run": RunView::from(&there) }),
                ));
            }
            let run = run_for(store, &args.run_id, Access::Act)?;
            let config = Config::load(store.home())?;
            let result = abort(store, &run.id, config.stop_grace + Duration::from_secs(2), shepherd)?;
            let note = match &result {
                Aborted::Stopped(_) => "aborted",
                Aborted::AlreadyOver(_) => "already ended; nothing changed",
                Aborted::Pending(_) => "abort requested; the run is still stopping",
            };
            Ok(json_result(&serde_json::json!({ "result": note, "run": RunView::from(result.run()) })))
        })
        .await
    }
}
