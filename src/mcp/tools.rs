//! The MCP tools: their argument schemas, descriptions written for the
//! model that calls them, and their results (JSON text).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::scope::{remote_run_for, run_for, Access};
use crate::abort::{abort, Aborted};
use crate::caller::caller_run;
use crate::config::Config;
use crate::launch::{launch, LaunchRequest};
use crate::preset::{self, Roots};
use crate::queue::ShepherdCommand;
use crate::review::ReviewError;
use crate::store::{RunFilter, Store};
use crate::wait::{collected_by, wait_for, Cancel};
use crate::{Home, Run};

/// Why a tool call failed; its text goes back to the model.
#[derive(Debug, thiserror::Error)]
enum ToolFailure {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Heal(#[from] crate::heal::HealError),
    #[error(transparent)]
    Review(#[from] ReviewError),
    #[error(transparent)]
    Reply(#[from] crate::reply::ReplyError),
    #[error(transparent)]
    Wait(#[from] crate::wait::WaitError),
    #[error(transparent)]
    Pause(#[from] crate::pause::PauseError),
    #[error(transparent)]
    Refused(#[from] super::scope::Refused),
    /// A host could not be reached, or refused.
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// No such host in config.toml.
    #[error(transparent)]
    UnknownHost(#[from] crate::config::UnknownHost),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Cancels its wait when dropped: how a blocking task learns, at once,
/// that the call it serves was cancelled.
struct CancelOnDrop(Arc<Cancel>);

impl CancelOnDrop {
    fn new() -> std::io::Result<CancelOnDrop> {
        Ok(CancelOnDrop(Arc::new(Cancel::new()?)))
    }

    fn cancel(&self) -> Arc<Cancel> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Ends a task when dropped (the listener for a call's cancellation).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Default and longest blocking time of `wait_agents`, in seconds: by
/// default it returns before the 60 s most MCP clients give a tool call,
/// saying what still runs, so the model calls it again rather than being
/// cut off.
const DEFAULT_WAIT_S: f64 = 50.0;
const MAX_WAIT_S: f64 = 3600.0;

/// Corral's tools, served over MCP.
#[derive(Clone)]
pub struct CorralTools {
    home: Home,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListPresetsArgs {
    /// Folder whose project presets to include (default: the server's working folder).
    #[serde(default)]
    pub cwd: Option<String>,
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
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatusArgs {
    /// The run to check. Omit to list your own background runs (or, outside a run, the latest runs).
    #[serde(default)]
    pub run_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitArgs {
    /// The runs to wait for (ids returned by launch_agent).
    pub run_ids: Vec<String>,
    /// Longest time to block, in seconds (default 50, at most 3600). On timeout the runs still active are reported as such: call again.
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MergeArgs {
    /// The run whose changes to merge.
    pub run_id: String,
    /// Keep the agent's commits (a merge commit) instead of one squashed commit.
    #[serde(default)]
    pub keep_commits: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplyArgs {
    /// The run to reply to.
    pub run_id: String,
    /// What to tell its agent next. May be empty with allow_denied.
    #[serde(default)]
    pub text: String,
    /// Allow exactly the tool calls the agent was refused, for the new turn.
    #[serde(default)]
    pub allow_denied: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunArgs {
    /// The run's id.
    pub run_id: String,
}

/// What a model sees of a run.
#[derive(Debug, Serialize)]
struct RunView<'a> {
    run_id: &'a str,
    preset: &'a str,
    task: &'a str,
    status: &'a str,
    stop_reason: Option<&'a str>,
    final_text: Option<&'a str>,
    error: Option<&'a str>,
    parent_id: Option<&'a str>,
    children: &'a [String],
    cost_usd: Option<f64>,
    /// The cost is an estimate from the tokens (the agent reported none).
    cost_estimated: bool,
    total_tokens: u64,
    created_at: &'a str,
    completed_at: Option<&'a str>,
    worktree: Option<&'a crate::worktree::Worktree>,
    /// The host it runs on; absent for this machine's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    /// Its host cannot be reached: the status is as last seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    unreachable_since: Option<&'a str>,
    /// Why its host cannot be followed, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    host_trouble: Option<&'a str>,
}

impl<'a> From<&'a Run> for RunView<'a> {
    fn from(run: &'a Run) -> Self {
        RunView {
            run_id: &run.id,
            preset: &run.preset,
            task: &run.task,
            status: run.status.as_str(),
            stop_reason: run.stop_reason.map(|r| r.as_str()),
            final_text: run.final_text.as_deref(),
            error: run.error.as_deref(),
            parent_id: run.parent_id.as_deref(),
            children: &run.children,
            cost_usd: run.cost_usd,
            cost_estimated: run.cost_estimated,
            total_tokens: run.usage.total(),
            created_at: &run.created_at,
            completed_at: run.completed_at.as_deref(),
            worktree: run.worktree.as_ref(),
            host: run.host.as_deref(),
            unreachable_since: run.unreachable_since.as_deref(),
            host_trouble: run.host_trouble.as_deref(),
        }
    }
}

/// `wait_agents` on runs of one other host: waited for there, until the
/// deadline; the runs as they ended (or stand), and whether it timed out.
fn wait_on_host(store: &Store, runs: &[Run], deadline: Instant) -> Result<(Vec<Run>, bool), ToolFailure> {
    let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64();
    let mut args: Vec<std::ffi::OsString> = vec!["wait".into()];
    args.extend(runs.iter().map(|r| r.id.clone().into()));
    args.extend(["--timeout".into(), format!("{left:.3}").into(), "--json".into()]);
    let home = store.home().clone();
    let (code, printed) = crate::remote::act_with_code(&home, &runs[0], &args)?;
    let mut ended: Vec<Run> = serde_json::from_slice(&printed).map_err(|e| garbled(&runs[0], "corral wait", e))?;
    for run in &mut ended {
        run.host = runs[0].host.clone();
    }
    Ok((ended, code == 124))
}

/// What a host printed that this Corral cannot read.
fn garbled(run: &Run, what: &'static str, e: serde_json::Error) -> crate::remote::RemoteError {
    crate::remote::RemoteError::Garbled { host: run.host.clone().unwrap_or_default(), what, detail: e.to_string() }
}

fn json_result(value: &impl Serialize) -> CallToolResult {
    // Compact: every byte is read by a model.
    let text = serde_json::to_string(value).unwrap_or_else(|e| format!("cannot serialize the result: {e}"));
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(for_tools(&message.to_string()))])
}

/// The shell commands core messages suggest, and the tools that do the same
/// for a model that has no shell for Corral.
const COMMANDS_AS_TOOLS: &[(&str, &str)] = &[
    ("see 'corral ls --all'", "call agent_status without run_id to list runs"),
    ("see 'corral presets'", "call list_presets"),
    ("e.g. corral reply RUN \"now add tests\"", "e.g. reply_agent with text \"now add tests\""),
    ("e.g. corral launch scout \"find the config loader\"", "e.g. launch_agent with task \"find the config loader\""),
];

/// `message` with its shell commands turned into the tools that do the same.
fn for_tools(message: &str) -> String {
    let mut text =
        COMMANDS_AS_TOOLS.iter().fold(message.to_string(), |text, (command, tool)| text.replace(command, tool));
    // "abort it first (corral abort ID)": the tool is abort_agent.
    while let Some(start) = text.find("(corral abort ") {
        let Some(len) = text[start..].find(')') else { break };
        text.replace_range(start..start + len + 1, "(abort_agent)");
    }
    text
}

#[tool_router]
impl CorralTools {
    /// Tools over the installation at `home`.
    pub fn new(home: Home) -> CorralTools {
        CorralTools { home, tool_router: Self::tool_router() }
    }

    /// Runs `f` with a freshly healed store on a blocking thread; any error
    /// becomes a tool error.
    async fn pause_or_resume(&self, run_id: String, paused: bool) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let run = run_for(store, &run_id, Access::Act)?;
            let run = crate::pause::pause(store, &run.id, paused, crate::pause::PATIENCE, shepherd)?;
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }

    async fn with_store<F>(&self, f: F) -> CallToolResult
    where
        F: FnOnce(&mut Store, &ShepherdCommand) -> Result<CallToolResult, ToolFailure> + Send + 'static,
    {
        let home = self.home.clone();
        let work = tokio::task::spawn_blocking(move || -> Result<CallToolResult, ToolFailure> {
            let shepherd = ShepherdCommand::current_exe()?;
            let mut store = crate::heal::open_healed(&home, &shepherd)?;
            f(&mut store, &shepherd)
        });
        match work.await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => tool_error(e),
            Err(e) => tool_error(format!("the call failed inside Corral: {e}")),
        }
    }

    #[tool(
        description = "List the presets you can launch as background agents: name, agent, model and what each is for, and whether its agent is installed here (available: false says why; launching it fails). Call this before launch_agent to pick a preset.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_presets(&self, Parameters(args): Parameters<ListPresetsArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let cwd = match args.cwd {
                Some(dir) => PathBuf::from(dir),
                None => crate::launch::working_folder()?,
            };
            let set = preset::discover(&Roots::new(store.home(), Some(&cwd)));
            let path = std::env::var_os("PATH");
            let presets: Vec<serde_json::Value> = set
                .presets
                .iter()
                .map(|e| {
                    let mut entry = serde_json::json!({
                        "name": e.preset.name,
                        "description": e.preset.description,
                        "agent": e.preset.agent,
                        "model": e.preset.model,
                        "available": true,
                    });
                    // A preset that can never start is said so, never offered as if it could.
                    if let Some(why) = preset::available::unavailable(&e.preset, path.as_deref(), &cwd) {
                        entry["available"] = false.into();
                        entry["unavailable"] = why.into();
                    } else if let Err(why) = crate::trust::check(store, &e.preset) {
                        entry["available"] = false.into();
                        entry["unavailable"] = why.to_string().into();
                    }
                    entry
                })
                .collect();
            Ok(json_result(&presets))
        })
        .await
    }

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
                let config = crate::config::Config::load(&home)?;
                let host = config.host(name)?;
                let options = crate::remote::RemoteLaunch {
                    cwd: args.cwd.clone(),
                    model: args.model.clone(),
                    worktree: args.worktree,
                    base: args.base.clone(),
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
                None => crate::launch::working_folder()?,
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
            };
            let run = launch(store, &request, shepherd)?;
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }

    #[tool(
        description = "Check runs without waiting: status (queued, starting, running, waiting, completed, failed, aborted, lost), final text and error. With run_id: that run. Without: your own background runs (or the latest runs outside a run). To block until runs end, use wait_agents instead of calling this repeatedly.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn agent_status(&self, Parameters(args): Parameters<StatusArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let runs = match args.run_id {
                Some(id) => match remote_run_for(store, &id, Access::Read)? {
                    Some(run) if store.find_run(&id).is_err() => {
                        let home = store.home().clone();
                        let shown =
                            crate::remote::act(&home, &run, &["show".into(), run.id.clone().into(), "--json".into()])?;
                        let mut fresh: Run =
                            serde_json::from_slice(&shown).map_err(|e| garbled(&run, "corral show", e))?;
                        fresh.host = run.host;
                        vec![fresh]
                    }
                    _ => vec![run_for(store, &id, Access::Read)?],
                },
                None => {
                    let caller = caller_run(store)?;
                    let filter = RunFilter { parent_id: caller.clone(), limit: Some(50), ..RunFilter::default() };
                    let mut runs = store.runs(&filter)?;
                    // And those on other hosts: the ones it launched, or all.
                    runs.extend(match &caller {
                        Some(id) => store.remote_children(id)?,
                        None => store.remote_runs(None)?,
                    });
                    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
                    runs.truncate(50);
                    runs
                }
            };
            let views: Vec<RunView<'_>> = runs.iter().map(RunView::from).collect();
            Ok(json_result(&views))
        })
        .await
    }

    #[tool(
        description = "Block until every given run has ended (a run that launched runs of its own ends only after them), or until timeout_s passes (default 50 s, under the 60 s most clients allow a tool call), and return each run's outcome, final text and error. If timed_out is true, the runs marked active still work: call wait_agents again with them. This is how to collect background results: call it with all the run_ids instead of polling agent_status.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn wait_agents(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<WaitArgs>,
    ) -> CallToolResult {
        if args.run_ids.is_empty() {
            return tool_error("run_ids is empty: pass the ids returned by launch_agent");
        }
        let secs = args.timeout_s.unwrap_or(DEFAULT_WAIT_S);
        if !(secs.is_finite() && secs >= 0.0) {
            return tool_error(format!("timeout_s {secs} is not a number of seconds ≥ 0"));
        }
        let deadline = Instant::now() + Duration::from_secs_f64(secs.min(MAX_WAIT_S));
        // A cancelled call drops this future, not the blocking wait: the
        // guard tells the wait to stop, so its run does not stay registered
        // as blocked (holding no slot) while its agent works again.
        let cancel = match CancelOnDrop::new() {
            Ok(cancel) => cancel,
            Err(e) => return tool_error(format!("cannot wait: {e}")),
        };
        let cancelled = cancel.cancel();
        // A client's `notifications/cancelled` cancels the request's token,
        // not this future: the wait must hear of it from the token too.
        let on_cancel = cancel.cancel();
        let token = context.ct.clone();
        let listener = tokio::spawn(async move {
            token.cancelled().await;
            on_cancel.cancel();
        });
        let _stop_listening = AbortOnDrop(listener);
        self.with_store(move |store, shepherd| {
            // This machine's runs, and each host's (waited for there).
            let mut local = Vec::new();
            let mut hosts: Vec<Vec<Run>> = Vec::new();
            for id in &args.run_ids {
                match remote_run_for(store, id, Access::Read)? {
                    Some(run) if store.find_run(id).is_err() => {
                        match hosts.iter_mut().find(|group| group[0].host == run.host) {
                            Some(group) => group.push(run),
                            None => hosts.push(vec![run]),
                        }
                    }
                    // What a wait returns (task, final text, error) is read access.
                    _ => local.push(run_for(store, id, Access::Read)?.id),
                }
            }
            let mut ended = Vec::new();
            let mut timed_out = false;
            if !local.is_empty() {
                let caller = caller_run(store)?;
                let result = wait_for(
                    store,
                    &local,
                    Some(deadline),
                    caller.as_deref(),
                    shepherd,
                    Some(&cancelled),
                    crate::blocking::Waiter::ToolCall,
                )?;
                collected_by(store, caller.as_deref(), &result.runs)?;
                timed_out |= result.timed_out;
                ended.extend(result.runs);
            }
            for group in &hosts {
                let (runs, late) = wait_on_host(store, group, deadline)?;
                timed_out |= late;
                ended.extend(runs);
            }
            // In the order asked.
            let rank = |run: &Run| args.run_ids.iter().position(|id| run.id.starts_with(id.as_str()));
            ended.sort_by_key(|run| rank(run));
            let views: Vec<RunView<'_>> = ended.iter().map(RunView::from).collect();
            Ok(json_result(&serde_json::json!({
                "timed_out": timed_out,
                "all_completed": ended.iter().all(|r| r.status == crate::RunStatus::Completed),
                "runs": views,
            })))
        })
        .await
    }

    #[tool(
        description = "The outcome and final text of one run, without waiting. If it has not ended yet it says so: use wait_agents to block until it does.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn agent_result(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Read)?;
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

    #[tool(
        description = "Pause a running run: every process it started is frozen, its time limits stop, and it holds no slot, until resume_agent. Use it to hold work you may want later without losing it.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn pause_agent(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.pause_or_resume(args.run_id, true).await
    }

    #[tool(
        description = "Resume a paused run: it takes a slot back before any queued run and goes on where it stopped.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn resume_agent(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.pause_or_resume(args.run_id, false).await
    }

    #[tool(
        description = "Stop a run and every process it started, including its own background runs. Use it when a result is no longer needed. Aborting a run that already ended changes nothing.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn abort_agent(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
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

    #[tool(
        description = "What a run launched with a worktree changed against the commit it started from (its commits, uncommitted and untracked files alike): files with added and removed lines, and the unified diff.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_changes(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Read)?;
            let (run, changes) = crate::review::changes(store, &run.id)?;
            let patch = crate::worktree::patch(crate::review::worktree_of(&run).map_err(ReviewError::from)?)
                .map_err(ReviewError::from)?;
            let mut value = serde_json::to_value(&changes).unwrap_or_default();
            value["diff"] = patch.into();
            Ok(json_result(&value))
        })
        .await
    }

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
            let merged = crate::review::merge(store, &run.id, args.keep_commits.unwrap_or(false))?;
            Ok(json_result(&merged))
        })
        .await
    }

    #[tool(
        description = "Tell a run's agent one more thing, in a new turn of its own session (same folder or worktree): a follow-up to a run that ended (it runs again), or to an active one (its agent gets it when its current turn ends). Then call wait_agents with its run_id for the new result.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn reply_agent(&self, Parameters(args): Parameters<ReplyArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let allow = args.allow_denied.unwrap_or(false);
            let run = run_for(store, &args.run_id, Access::Act)?;
            let replied = crate::reply::reply(store, &run.id, &args.text, allow, shepherd)?;
            let note = match replied.placed {
                crate::store::ReplyPlaced::Kept => "kept: its agent gets it when its current turn ends",
                crate::store::ReplyPlaced::Reopened => "a new turn of its session starts",
            };
            Ok(json_result(&serde_json::json!({ "result": note, "run": RunView::from(&replied.run) })))
        })
        .await
    }

    #[tool(
        description = "Remove an ended run's worktree and its branch, dropping its changes.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn discard_run(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let run = run_for(store, &args.run_id, Access::Act)?;
            let run = crate::review::discard(store, &run.id)?;
            Ok(json_result(&serde_json::json!({ "result": "discarded", "run": RunView::from(&run) })))
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CorralTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("corral", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Corral runs coding agents in the background. To delegate work: list_presets, then launch_agent \
                 once per independent task (they run in parallel), then wait_agents with all the run ids to collect \
                 their final texts. Never poll agent_status in a loop. reply_agent continues a run's conversation; \
                 abort_agent stops a run you no longer need.",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_tools_not_shell_commands() {
        let unknown = crate::store::StoreError::UnknownRun("x1".into()).to_string();
        assert_eq!(for_tools(&unknown), "no run 'x1': call agent_status without run_id to list runs");
        let active = "run ab12 is running: abort it first (corral abort ab12), or wait for it";
        assert_eq!(for_tools(active), "run ab12 is running: abort it first (abort_agent), or wait for it");
        let empty = crate::launch::LaunchError::EmptyTask.to_string();
        assert!(!for_tools(&empty).contains("corral "), "{empty}");
    }
}
