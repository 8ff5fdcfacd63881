//! `launch_agent`: a run started from a preset with a task, here or on a host, as a child of the caller's run.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

use super::server::{json_result, CorralTools, RunView};
use crate::run::caller::caller_run;
use crate::verbs::launch::{launch, LaunchRequest};

#[tool_router(router = launch_agent_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Start a background agent from a preset with a task, and return at once with its run_id. The run is recorded as a child of your own run: launch several to work in parallel, then call wait_agents to get their results. If your turn ends before they finish, Corral waits for them and hands you their results in a follow-up turn.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn launch_agent(&self, Parameters(args): Parameters<LaunchArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            if let Some(name) = &args.host {
                let home = store.home().clone();
                let config = crate::home::config::Config::load(&home)?;
                let host = config.host(name)?;
                let options = crate::remote::RemoteLaunch {
                    cwd: args.cwd.clone(),
                    model: args.model.clone(),
                    worktree: args.worktree,
                    base: args.base.clone(),
                    budget: budget_of(args.budget.as_deref())?,
                    fire: None,
                };
                let caller = caller_run(store)?;
                let run = crate::remote::launch_for(
                    &home,
                    store,
                    host,
                    (&args.preset, &args.task),
                    &options,
                    caller.as_deref(),
                )?;
                return Ok(json_result(&RunView::from(&run)));
            }
            let cwd = match args.cwd {
                Some(dir) => PathBuf::from(dir),
                None => crate::verbs::launch::working_folder()?,
            };
            let request = LaunchRequest {
                preset: args.preset,
                task: args.task,
                cwd,
                model: args.model,
                parent: None,
                env: None,
                worktree: args.worktree,
                base: args.base,
                budget: budget_of(args.budget.as_deref())?,
                fire: None,
                request: None,
                scope_own: false,
            };
            let run = launch(store, &request, shepherd)?;
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LaunchArgs {
    /// Name of the preset to run (see list_presets).
    pub preset: String,
    /// The complete task for the background agent, as you would tell a colleague: it sees nothing else of your conversation.
    pub task: String,
    /// Model to use instead of the preset's.
    #[serde(default)]
    pub model: Option<String>,
    /// Working folder for the run (default: the server's working folder).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run in a git worktree of its own, on a new branch, so it edits no file another agent edits (default: the preset's choice). The folder must be in a git repository.
    #[serde(default)]
    pub worktree: Option<bool>,
    /// With a worktree: the commit or branch it starts from (default: HEAD).
    #[serde(default)]
    pub base: Option<String>,
    /// Run it on this host of the user's config.toml (`[hosts.NAME]`), over SSH; cwd is then a folder there (default: its user's home). Your run waits for it as for a local one; read its result with wait_agents (it is not handed back in a follow-up turn).
    #[serde(default)]
    pub host: Option<String>,
    /// What the run, with the runs it launches, may spend before it is paused and its launcher asked: `$2`, `500k tokens`, `usd=2,tokens=2M` (default: the preset's, else the user's config). A run paused for its budget waits for resume_agent with a budget raise, or abort_agent.
    #[serde(default)]
    pub budget: Option<String>,
}

/// The budget an MCP caller wrote, read as `--budget` is.
pub(super) fn budget_of(
    text: Option<&str>,
) -> Result<Option<crate::cost::budget::Budget>, crate::cost::budget::BadBudget> {
    text.map(crate::cost::budget::Budget::parse).transpose()
}
