//! Replying to a run (`corral reply`, the MCP `reply_agent` tool, the
//! window's reply box): one more message to the agent, in a new turn of its
//! own session, in the same folder or worktree.
//!
//! Everything that can make a reply impossible is said here, before anything
//! is recorded or started: an agent that cannot resume, a run that never
//! got a session, a discarded worktree, nothing to allow.

use crate::adapter::{self, InvocationContext};
use crate::home::config::{Config, ConfigError};
use crate::run::{AgentKind, Run};
use crate::store::{ReplyPlaced, Store, StoreError};
use crate::upkeep::queue::{start_queued, ShepherdCommand};

/// Why a reply was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken (the queue cannot be sized).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The agent has no way to continue a session headless.
    #[error("run {run} is a {agent} run, and {agent} cannot continue a session: launch a new run instead")]
    CannotResume { run: String, agent: AgentKind },
    /// The run ended before its agent reported a session.
    #[error(
        "run {run} ended before its agent reported a session id, so it cannot be continued: launch a new run instead"
    )]
    NoSession { run: String },
    /// Its worktree is gone.
    #[error("run {run}'s worktree was discarded, so its agent has nothing to go on with: launch a new run instead")]
    Discarded { run: String },
    /// `--allow-denied` on a run nothing was refused to.
    #[error("run {run} had no actions denied: reply without --allow-denied")]
    NothingDenied { run: String },
    /// `--allow-denied` for an agent Corral cannot tell to allow tools.
    #[error("Corral cannot allow tools for {agent} runs: reply with what to do instead")]
    CannotAllow { agent: AgentKind },
    /// Nothing to say.
    #[error("the reply is empty: say what the agent should do next, e.g. corral reply RUN \"now add tests\"")]
    Empty,
    /// The reply is too long, or holds a NUL byte.
    #[error("{0}")]
    Unusable(String),
}

/// A reply that was recorded.
#[derive(Debug, Clone)]
pub struct Replied {
    /// The run, as it is now.
    pub run: Run,
    /// Whether it waits for the current turn or reopened the run.
    pub placed: ReplyPlaced,
    /// The tools allowed for the turn (`--allow-denied`).
    pub allowed: Vec<String>,
}

/// Says `text` to run `id` (or a unique prefix); with `allow_denied`, the
/// turn that gets it may use exactly the tool calls the agent was refused,
/// and `text` may be empty. A run that ended is queued again and started
/// if a slot is free.
pub fn reply(
    store: &mut Store,
    id: &str,
    text: &str,
    allow_denied: bool,
    shepherd: &ShepherdCommand,
) -> Result<Replied, ReplyError> {
    // The same bounds as a task (it reaches the agent the same way), before
    // anything else is looked at.
    if !text.trim().is_empty() {
        crate::verbs::launch::check_task(text)
            .map_err(|e| ReplyError::Unusable(e.to_string().replacen("the task", "the reply", 1)))?;
    }
    let run = store.find_run(id)?;
    if run.worktree.is_none() && run.worktree_repo.is_some() {
        return Err(ReplyError::Discarded { run: run.id });
    }
    let preset = store.run_preset(&run.id)?;
    let adapter = adapter::for_agent(run.agent);
    let ctx = InvocationContext {
        preset: &preset,
        task: "",
        model: run.model.as_deref(),
        run_dir: store.home().run_dir(&run.id),
        system_prompt_file: None,
        allowed: &[],
    };
    if adapter.resume_invocation(&ctx, "session").is_none() {
        return Err(ReplyError::CannotResume { run: run.id, agent: run.agent });
    }
    let session = run.session_id.as_deref().unwrap_or_default();
    if run.status.is_terminal() && adapter.resume_invocation(&ctx, session).is_none() {
        return Err(ReplyError::NoSession { run: run.id });
    }
    let allowed = if allow_denied {
        // What the sandbox refused is not a tool the agent can be allowed.
        let denied: Vec<String> = run.denied.iter().filter(|d| !crate::sandbox::denial::is_entry(d)).cloned().collect();
        if denied.is_empty() {
            return Err(ReplyError::NothingDenied { run: run.id });
        }
        if !adapter.allows_tools() {
            return Err(ReplyError::CannotAllow { agent: run.agent });
        }
        denied
    } else {
        Vec::new()
    };
    let text = match (text.trim().is_empty(), allowed.is_empty()) {
        (false, _) => text.to_string(),
        (true, false) => {
            format!("The tool calls you were refused are allowed now: {}. Go on with your task.", allowed.join(", "))
        }
        (true, true) => return Err(ReplyError::Empty),
    };

    // A reply from a person makes the run theirs to hear about; one from
    // another run's agent leaves it to that run's announcement.
    let by_user = crate::run::caller::caller_run(store)?.is_none();
    let placed = store.add_reply(&run.id, &text, &allowed, by_user)?;
    if placed == ReplyPlaced::Reopened {
        let config = Config::load(store.home())?;
        start_queued(store, &config, shepherd)?;
    }
    Ok(Replied { run: store.run(&run.id)?, placed, allowed })
}
