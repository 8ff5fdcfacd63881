//! Widening one run's sandbox after it refused something (`corral allow RUN
//! --write PATH | --host HOST`), and letting its agent go on in its session.
//!
//! The widening is kept with the run: a host is reachable at once (the
//! shepherd's proxy is told), a path is writable from the agent's next
//! turn, which a reply starts in the same session ("the sandbox now lets
//! you …; go on").

use std::path::Path;

use crate::home::config::{Config, ConfigError};
use crate::sandbox::{expand, BadSandbox, Widening};
use crate::store::{Store, StoreError};
use crate::upkeep::queue::ShepherdCommand;
use crate::verbs::reply::{self, Replied, ReplyError};

/// Why a sandbox could not be widened.
#[derive(Debug, thiserror::Error)]
pub enum AllowError {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Nothing asked.
    #[error("say what to allow: corral allow RUN --write PATH or --host HOST")]
    Nothing,
    /// Asked from inside a run: a sandbox is widened by its user only.
    #[error(
        "a sandbox is widened by you, not from inside run {0} (its agent could widen its own): \
         run `corral allow` in your own terminal"
    )]
    InsideRun(String),
    /// The run has no sandbox to widen.
    #[error("run {0} is not sandboxed: it may already write and reach what its user can")]
    NotSandboxed(String),
    /// A path that is not a full path, or does not exist.
    #[error("--write {0}: {1}")]
    BadPath(String, &'static str),
    /// A host that is not a host name.
    #[error("--host: {0}")]
    BadHost(#[from] BadSandbox),
    /// The reply was refused (nothing of the sandbox was widened).
    #[error(transparent)]
    Reply(#[from] ReplyError),
    /// The sandbox was widened, and the reply that lets the agent go on
    /// was refused.
    #[error("allowed, but the agent cannot go on in its session: {0}")]
    NotContinued(ReplyError),
}

/// What was allowed, and the reply that lets the agent go on (if asked).
#[derive(Debug)]
pub struct Allowed {
    /// The run's id.
    pub run_id: String,
    /// What the run's sandbox was widened by.
    pub widening: Widening,
    /// The reply placed, when the agent was told to go on.
    pub replied: Option<Replied>,
}

/// Widens run `id`'s sandbox by `asked` (paths with `~` are the user's
/// home), and unless `quiet`, tells its agent to go on with `message` (or
/// with what it may do now).
pub fn allow(
    store: &mut Store,
    id: &str,
    asked: &Widening,
    message: Option<&str>,
    quiet: bool,
    shepherd: &ShepherdCommand,
) -> Result<Allowed, AllowError> {
    if asked.is_empty() {
        return Err(AllowError::Nothing);
    }
    if let Some(caller) = crate::run::caller::caller_run(store)? {
        return Err(AllowError::InsideRun(caller));
    }
    let run = store.find_run(id)?;
    let config = Config::load(store.home())?;
    if config.sandbox_for(&store.run_preset(&run.id)?).is_none() {
        return Err(AllowError::NotSandboxed(run.id));
    }
    let home = user_home();
    let real_home = std::fs::canonicalize(&home).unwrap_or_else(|_| home.clone());
    let mut widening = Widening::default();
    for path in &asked.write {
        if !crate::sandbox::is_full_path(path) {
            return Err(AllowError::BadPath(path.clone(), "write a full path (from / or ~)"));
        }
        let full = expand(path, &home);
        if !Path::new(&full).exists() {
            return Err(AllowError::BadPath(path.clone(), "it does not exist: create it first, or allow its folder"));
        }
        let full = std::fs::canonicalize(&full).unwrap_or(full);
        // The home as it resolves too: a home reached through a link
        // (`/home` → `/var/home`) is still the home.
        if full.parent().is_none() || home.starts_with(&full) || real_home.starts_with(&full) {
            return Err(AllowError::BadPath(
                path.clone(),
                "that is / or a folder holding your home: a sandbox that writes it is no sandbox. Allow the folder \
                 the run needs",
            ));
        }
        widening.write.push(full.to_string_lossy().into_owned());
    }
    for host in &asked.hosts {
        widening.hosts.push(crate::sandbox::host_name(host.trim())?);
    }
    store.allow_in_sandbox(&run.id, &widening)?;
    crate::verbs::pause::nudge(&run);
    if quiet {
        return Ok(Allowed { run_id: run.id, widening, replied: None });
    }
    let text = match message {
        Some(text) if !text.trim().is_empty() => text.to_string(),
        _ => go_on(&widening),
    };
    let replied = reply::reply(store, &run.id, &text, false, shepherd).map_err(AllowError::NotContinued)?;
    Ok(Allowed { run_id: run.id, widening, replied: Some(replied) })
}

/// "Allow and continue" for everything run `id` was refused: its tool calls
/// (as `reply --allow-denied`) and its sandbox's refusals (writes and hosts,
/// as `corral allow`; never a denied read), in one new turn of its session.
pub fn allow_denied(
    store: &mut Store,
    id: &str,
    text: &str,
    shepherd: &ShepherdCommand,
) -> Result<Replied, AllowError> {
    use crate::sandbox::denial::{Allowance, Denial};
    let run = store.find_run(id)?;
    let home = user_home();
    let allowances: Vec<Allowance> =
        run.denied.iter().filter_map(|d| Denial::from_entry(d)).filter_map(|d| d.allowance(&home)).collect();
    // A sandbox is widened by its user only: refused before anything is
    // made for it.
    if !allowances.is_empty() {
        if let Some(caller) = crate::run::caller::caller_run(store)? {
            return Err(AllowError::InsideRun(caller));
        }
    }
    let mut widening = Widening::default();
    for allowance in &allowances {
        match allowance {
            Allowance::Write { path, .. } => {
                let path = path.to_string_lossy().into_owned();
                if widening.write.contains(&path) {
                    continue;
                }
                // One that cannot be made is left (the denial says how to
                // allow it by hand); the others are allowed.
                if let Err(e) = allowance.make() {
                    tracing::warn!("{path} cannot be made ({e}): left for the user to allow by hand");
                    continue;
                }
                widening.write.push(path);
            }
            Allowance::Host(host) if !widening.hosts.contains(host) => widening.hosts.push(host.clone()),
            Allowance::Host(_) => {}
        }
    }
    let tools = run.denied.iter().any(|d| !crate::sandbox::denial::is_entry(d));
    if widening.is_empty() {
        return Ok(reply::reply(store, &run.id, text, true, shepherd)?);
    }
    // The sandbox first, so the turn the reply starts has it.
    let allowed = allow(store, &run.id, &widening, None, true, shepherd)?;
    let text = if text.trim().is_empty() { go_on(&allowed.widening) } else { text.to_string() };
    reply::reply(store, &run.id, &text, tools, shepherd).map_err(AllowError::NotContinued)
}

/// The user's home, as this process's environment says.
pub(crate) fn user_home() -> std::path::PathBuf {
    std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_else(|| "/".into())
}

/// What the agent is told when its sandbox was widened.
fn go_on(widening: &Widening) -> String {
    let mut may = Vec::new();
    if !widening.write.is_empty() {
        may.push(format!("write {}", widening.write.join(", ")));
    }
    if !widening.hosts.is_empty() {
        may.push(format!("reach {}", widening.hosts.join(", ")));
    }
    format!("The sandbox now lets you {}. Go on with your task.", may.join(" and "))
}
