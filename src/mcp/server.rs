//! What every MCP tool shares: the server (`CorralTools`, its router made
//! of one router per tool file), a run as a model sees it, the store each
//! call opens on a blocking thread, and failures as text a model can act
//! on. The tools themselves are one file each, beside this one.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool_handler, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::store::Store;
use crate::upkeep::queue::ShepherdCommand;
use crate::verbs::review::ReviewError;
use crate::{Home, Run};

/// Why a tool call failed; its text goes back to the model.
#[derive(Debug, thiserror::Error)]
pub(super) enum ToolFailure {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Launch(#[from] crate::verbs::launch::LaunchError),
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    #[error(transparent)]
    Heal(#[from] crate::upkeep::heal::HealError),
    #[error(transparent)]
    Review(#[from] ReviewError),
    #[error(transparent)]
    Forge(#[from] crate::forge::ForgeError),
    #[error(transparent)]
    Reply(#[from] crate::verbs::reply::ReplyError),
    #[error(transparent)]
    Wait(#[from] crate::verbs::wait::WaitError),
    #[error(transparent)]
    Pause(#[from] crate::verbs::pause::PauseError),
    #[error(transparent)]
    Refused(#[from] crate::run::scope::Refused),
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    #[error(transparent)]
    When(#[from] crate::schedule::WhenError),
    #[error(transparent)]
    Budget(#[from] crate::cost::budget::BadBudget),
    /// A host could not be reached, or refused.
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// No such host in config.toml.
    #[error(transparent)]
    UnknownHost(#[from] crate::home::config::UnknownHost),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Corral's tools, served over MCP.
#[derive(Clone)]
pub struct CorralTools {
    home: Home,
    tool_router: ToolRouter<Self>,
}

/// The arguments of a tool that takes one run.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunArgs {
    /// The run's id.
    pub run_id: String,
}

/// What a model sees of a run.
#[derive(Debug, Serialize)]
pub(super) struct RunView<'a> {
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
    /// Why it is paused when Corral paused it (`budget`: it waits for
    /// resume_agent with more budget, or abort_agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pause_reason: Option<&'a str>,
    /// What it, with the runs it launched, may spend.
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<&'a crate::cost::budget::Budget>,
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
            pause_reason: run.pause_reason.map(|r| r.as_str()),
            budget: run.budget.as_ref(),
            host: run.host.as_deref(),
            unreachable_since: run.unreachable_since.as_deref(),
            host_trouble: run.host_trouble.as_deref(),
        }
    }
}

/// Carries out `corral VERB…` (`verb`) there when `id` names a run of
/// another host the caller may have `access` to (one it launched there),
/// as the CLI does: that run as its host then shows it. `None` for a run
/// of this machine (or none), which the tool acts on here. Every verb
/// reaches a run on a host as it reaches a local one, under the same
/// scope.
pub(super) fn on_host(
    store: &Store,
    id: &str,
    access: crate::run::scope::Access,
    verb: &[&str],
) -> Result<Option<Run>, ToolFailure> {
    if store.find_run(id).is_ok() {
        return Ok(None);
    }
    let Some(run) = crate::run::scope::remote_run_for(store, id, access)? else { return Ok(None) };
    let home = store.home().clone();
    if !verb.is_empty() {
        let args: Vec<std::ffi::OsString> = verb.iter().map(|a| a.replace("{id}", &run.id).into()).collect();
        crate::remote::act(&home, &run, &args)?;
    }
    let shown = crate::remote::act(&home, &run, &["show".into(), run.id.clone().into(), "--json".into()])?;
    let mut fresh: Run = serde_json::from_slice(&shown).map_err(|e| garbled(&run, "corral show", e))?;
    fresh.host = run.host;
    Ok(Some(fresh))
}

/// What a host printed that this Corral cannot read.
pub(super) fn garbled(run: &Run, what: &'static str, e: serde_json::Error) -> crate::remote::RemoteError {
    crate::remote::RemoteError::Garbled { host: run.host.clone().unwrap_or_default(), what, detail: e.to_string() }
}

pub(super) fn json_result(value: &impl Serialize) -> CallToolResult {
    // Compact: every byte is read by a model.
    let text = serde_json::to_string(value).unwrap_or_else(|e| format!("cannot serialize the result: {e}"));
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub(super) fn tool_error(message: impl std::fmt::Display) -> CallToolResult {
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

impl CorralTools {
    /// Tools over the installation at `home`, serving `tool_router`.
    pub(super) fn serving(home: Home, tool_router: ToolRouter<Self>) -> CorralTools {
        CorralTools { home, tool_router }
    }

    /// Runs `f` with a freshly healed store on a blocking thread; any error
    /// becomes a tool error.
    pub(super) async fn with_store<F>(&self, f: F) -> CallToolResult
    where
        F: FnOnce(&mut Store, &ShepherdCommand) -> Result<CallToolResult, ToolFailure> + Send + 'static,
    {
        let home = self.home.clone();
        let work = tokio::task::spawn_blocking(move || -> Result<CallToolResult, ToolFailure> {
            let shepherd = ShepherdCommand::current_exe()?;
            let mut store = crate::upkeep::heal::open_healed(&home, &shepherd)?;
            f(&mut store, &shepherd)
        });
        match work.await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => tool_error(e),
            Err(e) => tool_error(format!("the call failed inside Corral: {e}")),
        }
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
        let empty = crate::verbs::launch::LaunchError::EmptyTask.to_string();
        assert!(!for_tools(&empty).contains("corral "), "{empty}");
    }
}
