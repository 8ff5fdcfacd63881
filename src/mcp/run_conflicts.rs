//! `run_conflicts`: which runs' unmerged work changes the same lines, pair
//! by pair, before any of it is merged.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{json_result, CorralTools};
use crate::run::scope::{run_for, Access};

/// The arguments of `run_conflicts`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ConflictsArgs {
    /// The runs to judge together (ids); empty: every run of yours with a
    /// worktree of this folder's repository.
    #[serde(default)]
    pub run_ids: Vec<String>,
}

#[tool_router(router = run_conflicts_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Which runs launched with worktrees change the same lines, pair by pair (git's own merge-tree of each pair's unmerged work, committed or not), before any is merged: each conflicting pair with its files. Merge one of a pair, then reply to the other to redo its change on top.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_conflicts(&self, Parameters(args): Parameters<ConflictsArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let cwd = std::env::current_dir()?;
            // None named: every run of the repository this agent may see.
            let ids: Vec<String> = args
                .run_ids
                .iter()
                .map(|id| run_for(store, id, Access::Read).map(|r| r.id))
                .collect::<Result<_, _>>()?;
            let (runs, found) = crate::verbs::review::conflicts(store, &ids, &cwd)?;
            let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
            Ok(json_result(&serde_json::json!({ "runs": ids, "conflicts": found })))
        })
        .await
    }
}
