//! Which runs an agent may see and act on: one rule for its MCP server and
//! for the `corral` its sandbox's broker carries out.
//!
//! An MCP server (or a forwarded `corral`) started by a run's agent speaks
//! for that run: it sees and
//! acts on the run's descendants, and sees (never acts on) the run itself,
//! unless the run's preset grants every run (`mcp: all`) — and so did every
//! run above it: a child's scope is at most its parent's, so an `mcp: own`
//! agent never widens its reach by launching an `mcp: all` preset. A server
//! with no calling run (a person's MCP client) acts on everything. So one
//! agent can never read, abort, merge, discard or reply to another's work.

use crate::preset::McpScope;
use crate::run::caller::caller_run;
use crate::run::Run;
use crate::store::{Store, StoreError};

/// What a tool does with a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads it: status, result, changes, waits on it.
    Read,
    /// Changes it: abort, pause, resume, merge, discard, reply.
    Act,
}

/// A run the calling agent may not see or act on.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run is not the caller's.
    #[error(
        "run {target} is not one of yours: an agent {what} only the runs it launched (and their runs){itself}; \
         run {caller} launched none by that id. A preset can grant every run with `mcp: all`"
    )]
    NotYours { target: String, caller: String, what: &'static str, itself: &'static str },
}

/// True if run `caller` may see and act on every run: its preset says
/// `mcp: all`, and so did the preset of every run above it.
pub fn grants_all(store: &Store, caller: &str) -> Result<bool, StoreError> {
    let mut next = Some(caller.to_string());
    let mut hops = 0;
    while let Some(id) = next.filter(|_| hops < 1024) {
        if store.run_preset(&id)?.mcp != Some(McpScope::All) {
            return Ok(false);
        }
        next = store.run(&id)?.parent_id;
        hops += 1;
    }
    Ok(true)
}

/// Run `id` of another host, if it is one and the caller may see it (or act
/// on it): a person's client, an `mcp: all` preset, or the agent that
/// launched it. `None` when no host has such a run.
pub fn remote_run_for(store: &Store, id: &str, access: Access) -> Result<Option<Run>, Refused> {
    let Some(run) = store.find_remote_run(id)? else { return Ok(None) };
    let Some(caller) = caller_run(store)? else { return Ok(Some(run)) };
    if grants_all(store, &caller)? || store.remote_launched_by(&run.id)?.as_deref() == Some(caller.as_str()) {
        return Ok(Some(run));
    }
    let what = if access == Access::Read { "sees" } else { "acts on" };
    Err(Refused::NotYours { target: run.id, caller, what, itself: "" })
}

/// Run `id` (or a unique prefix), if the calling agent may have `access`
/// to it.
pub fn run_for(store: &Store, id: &str, access: Access) -> Result<Run, Refused> {
    let run = store.find_run(id)?;
    let Some(caller) = caller_run(store)? else { return Ok(run) };
    if grants_all(store, &caller)? {
        return Ok(run);
    }
    if run.id == caller && access == Access::Read {
        return Ok(run);
    }
    // A descendant has the caller among its ancestors.
    if run.id != caller && store.is_within(&run.id, &caller)? {
        return Ok(run);
    }
    let (what, itself) = match access {
        Access::Read => ("sees", " and itself"),
        Access::Act => ("acts on", ""),
    };
    Err(Refused::NotYours { target: run.id, caller, what, itself })
}

/// Whether the calling agent may have `access` to run `id` of this machine
/// or another host's: `Ok` if so, else why not (an unknown id says so).
pub fn may(store: &Store, id: &str, access: Access) -> Result<(), Refused> {
    match run_for(store, id, access) {
        Err(Refused::Store(StoreError::UnknownRun(unknown))) => match remote_run_for(store, id, access)? {
            Some(_) => Ok(()),
            None => Err(Refused::Store(StoreError::UnknownRun(unknown))),
        },
        result => result.map(|_| ()),
    }
}
