//! `merge_run`: a run's worktree changes brought into the branch it started from, by git's own merge.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{json_result, CorralTools};
use crate::run::scope::{run_for, Access};

#[tool_router(router = merge_run_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Bring an ended run's worktree changes into the branch it started from, as one commit (keep_commits: a merge of its commits). With a conflict, or uncommitted changes in the files it touches, nothing is changed and the error says why.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn merge_run(&self, Parameters(args): Parameters<MergeArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Act)?;
            let merged = crate::verbs::review::merge(store, &run.id, args.keep_commits.unwrap_or(false))?;
            Ok(json_result(&merged))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MergeArgs {
    /// The run whose changes to merge.
    pub run_id: String,
    /// Keep the agent's commits (a merge commit) instead of one squashed commit.
    #[serde(default)]
    pub keep_commits: Option<bool>,
}
