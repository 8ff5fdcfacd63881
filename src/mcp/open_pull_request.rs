//! `open_pull_request`: a run's work as a pull request (or merge request),
//! or pushed to the one it has; with `together`, several runs' work as one
//! — where the calling agent's preset says `pr: allow` (pushing is
//! publishing: a person decides).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{json_result, CorralTools};
use crate::run::scope::{run_for, Access};

#[tool_router(router = open_pull_request_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Open a pull request (GitHub) or merge request (GitLab) for an ended run's worktree: its work committed on its branch, the branch pushed; called again, it pushes to the same one. `together`: more runs whose work goes in the same pull request, merged after run_id's in that order. Allowed only where your preset says `pr: allow`; otherwise the error says so.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn open_pull_request(&self, Parameters(args): Parameters<PullRequestArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let mut ids = vec![run_for(store, &args.run_id, Access::Act)?.id];
            for id in args.together.iter().flatten() {
                ids.push(run_for(store, id, Access::Act)?.id);
            }
            let options = crate::forge::Options {
                draft: args.draft.unwrap_or(false),
                base: args.base,
                title: args.title,
                body: args.body,
                remote: None,
                caller: crate::run::caller::caller_run(store)?,
            };
            Ok(json_result(&crate::forge::open_together(store, &ids, &options)?))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PullRequestArgs {
    /// The run whose work to open a pull request for.
    pub run_id: String,
    /// Open it as a draft.
    #[serde(default)]
    pub draft: Option<bool>,
    /// The branch to merge into (default: the one the run started from).
    #[serde(default)]
    pub base: Option<String>,
    /// Its title (default: the task's first line).
    #[serde(default)]
    pub title: Option<String>,
    /// Its description (default: the task, what the agent said, the files changed).
    #[serde(default)]
    pub body: Option<String>,
    /// More runs whose work goes in the same pull request, merged after
    /// run_id's, in this order.
    #[serde(default)]
    pub together: Option<Vec<String>>,
}
