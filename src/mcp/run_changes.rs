//! `run_changes`: what a run's worktree changed, files and the unified diff.

use super::server::{json_result, CorralTools, RunArgs};
use crate::run::scope::{run_for, Access};
use crate::verbs::review::ReviewError;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

#[tool_router(router = run_changes_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "What a run launched with a worktree changed against the commit it started from (its commits, uncommitted and untracked files alike): files with added and removed lines, and the unified diff.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_changes(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Read)?;
            let (run, changes) = crate::verbs::review::changes(store, &run.id)?;
            let patch = crate::worktree::patch(crate::verbs::review::worktree_of(&run).map_err(ReviewError::from)?)
                .map_err(ReviewError::from)?;
            let mut value = serde_json::to_value(&changes).unwrap_or_default();
            value["diff"] = patch.into();
            Ok(json_result(&value))
        })
        .await
    }
}
