//! `discard_run`: an ended run's worktree and branch removed.

use super::server::{json_result, CorralTools, RunArgs, RunView};
use crate::run::scope::{run_for, Access};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

#[tool_router(router = discard_run_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Remove an ended run's worktree and its branch, dropping its changes.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn discard_run(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Act)?;
            let run = crate::verbs::review::discard(store, &run.id)?;
            Ok(json_result(&serde_json::json!({ "result": "discarded", "run": RunView::from(&run) })))
        })
        .await
    }
}
