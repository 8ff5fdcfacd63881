//! Which run a process works for: the run that launches a child, collects
//! its results, or is blocked waiting on it.
//!
//! The environment cannot be trusted for this: Codex starts MCP servers
//! with a scrubbed environment, and a stale `CORRAL_RUN_ID` can leak into a
//! terminal. The kernel can: a process in a run's cgroup is that run's,
//! whatever its environment or parentage. Without a cgroup, the process
//! tree: the nearest ancestor (or the process itself) that is an active
//! run's agent or shepherd, checked by pid and start time, is the caller.
//! `CORRAL_RUN_ID` is used only when neither says, for a run's process that
//! escaped its tree.

use crate::home::config::Config;
use crate::home::{Home, HomeError, HOME_ENV};
use crate::process::{self, ProcessId};
use crate::run::env::{RUN_ID_ENV, SHEPHERD_ENV};
use crate::store::{Store, StoreError};

/// The installation this process works in: `CORRAL_HOME` if set; else, in
/// a process of a run, the run's (a CLI may start an MCP server with a
/// scrubbed environment, as Codex does: the nearest ancestor that belongs
/// to a run still has it); else the platform's folders.
pub fn home() -> Result<Home, HomeError> {
    Home::from_root(std::env::var_os(HOME_ENV).or_else(run_home))
}

/// `CORRAL_HOME` of the nearest ancestor that belongs to a run, if it has
/// one.
fn run_home() -> Option<std::ffi::OsString> {
    let runner = process::ancestry(std::process::id() as i32)
        .into_iter()
        .skip(1)
        .find(|p| process::has_env_var(p.pid, RUN_ID_ENV))?;
    process::env_var_of(runner.pid, HOME_ENV)
}

/// The run whose sandbox holds this process, if any: its own run, or the
/// nearest of that run's parents whose preset is sandboxed (a run launched
/// from inside a sandbox starts there). What would widen a sandbox or make
/// work that starts outside it is refused to such a process.
pub fn sandboxed_caller(store: &Store, config: &Config) -> Result<Option<String>, StoreError> {
    confining(store, config, caller_run(store)?)
}

/// The sandboxed run whose sandbox holds a process of run `run` (`None`:
/// of no run): `run` itself, or the nearest of its parents whose preset is
/// sandboxed.
pub fn confining(store: &Store, config: &Config, run: Option<String>) -> Result<Option<String>, StoreError> {
    let mut at = run;
    while let Some(id) = at {
        if config.sandbox_for(&store.run_preset(&id)?).is_some() {
            return Ok(Some(id));
        }
        at = store.run(&id)?.parent_id;
    }
    Ok(None)
}

/// The run a sandboxed agent's `corral`, carried out outside its sandbox
/// by the run's shepherd, works for: set once, from what that shepherd said
/// (see `sandbox::broker`). Outside the sandbox, neither its cgroup nor its
/// ancestry is the run's.
static FORWARDED_FOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Says that this process works for run `run`, as the broker that started
/// it said.
pub fn works_for(run: String) {
    let _ = FORWARDED_FOR.set(run);
}

/// The run this process works for if it is a sandboxed agent's `corral`
/// carried out by the run's broker (`None` for any other process).
pub fn forwarded_run() -> Option<&'static str> {
    FORWARDED_FOR.get().map(String::as_str)
}

/// Whether this process was judged outside every run (see
/// [`this_process_outside_every_run`]).
static OUTSIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether nothing says this process belongs to a run: its environment
/// as it is now, and as [`outside_every_run`] judges it. Judged once per
/// process (a launch asks it twice: may it fork, may it ask a template),
/// as reading every ancestor's environment is most of what it costs.
pub fn this_process_outside_every_run() -> bool {
    *OUTSIDE.get_or_init(|| {
        let marks = [RUN_ID_ENV, SHEPHERD_ENV];
        !marks.iter().any(|mark| std::env::var_os(mark).is_some()) && outside_every_run(std::process::id() as i32)
    })
}

/// Whether nothing says process `pid` belongs to a run: its cgroup, its
/// and its ancestors' environments (as the kernel keeps them).
pub fn outside_every_run(pid: i32) -> bool {
    if process::cgroup::run_of(pid).is_some() {
        return false;
    }
    !process::ancestry(pid).iter().any(|p| process::has_any_env_var(p.pid, &[RUN_ID_ENV, SHEPHERD_ENV]))
}

/// The run this process works for, if any.
pub fn caller_run(store: &Store) -> Result<Option<String>, StoreError> {
    if let Some(run) = FORWARDED_FOR.get() {
        return Ok(Some(store.run(run)?.id));
    }
    // Judged already (a launch judges it before it forks): outside every
    // run, by its cgroup, its environment and its ancestors', this process
    // works for none (every agent and shepherd it could descend from
    // carries a run's mark in its environment).
    if OUTSIDE.get() == Some(&true) {
        return Ok(None);
    }
    caller_of(store, std::process::id() as i32)
}

/// The run the process `pid` works for, if any.
pub fn caller_of(store: &Store, pid: i32) -> Result<Option<String>, StoreError> {
    if let Some(id) = process::cgroup::run_of(pid) {
        match store.run(&id) {
            Ok(run) => return Ok(Some(run.id)),
            Err(StoreError::UnknownRun(_)) => {} // another installation's run
            Err(e) => return Err(e),
        }
    }
    let runs = store.active_runs()?;
    let identity = |pid: Option<i32>, start: Option<u64>| pid.zip(start).map(|(pid, start)| ProcessId { pid, start });
    for ancestor in process::ancestry(pid) {
        let owner = runs.iter().find(|run| {
            identity(run.agent_pid, run.agent_start) == Some(ancestor)
                || identity(run.shepherd_pid, run.shepherd_start) == Some(ancestor)
        });
        if let Some(run) = owner {
            return Ok(Some(run.id.clone()));
        }
    }
    let Some(id) = std::env::var(RUN_ID_ENV).ok().filter(|id| !id.is_empty()) else { return Ok(None) };
    // A stale id (from another installation, say) names no run here.
    match store.run(&id) {
        Ok(run) => Ok(Some(run.id)),
        Err(StoreError::UnknownRun(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
