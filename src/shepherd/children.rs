//! Runs that launched runs: waiting for children, and handing their
//! results back to the agent.
//!
//! When an agent's turn ends while its direct children are still active, the
//! run becomes `waiting` (still counted as running) and ends only once they
//! are all terminal, bounded by `children_timeout`. If the agent has not
//! collected the children's results and its adapter can resume the session,
//! a continuation turn gives them to it and asks it to finish; otherwise
//! the run ends with its own final text and a note of the children's
//! outcomes. Only direct children gate a run; each child applies the same
//! rule to its own. Runs the agent launched on other hosts gate it too: the
//! shepherd follows their hosts while it waits (unless someone already
//! does), and a host it cannot reach keeps them as last seen — active — so
//! the run goes on waiting, bounded by the same timeout.

use std::time::Instant;

use super::child_runs;
use super::replies::{self, NextTurn};
use super::supervise::Supervisor;
use super::ShepherdError;
use crate::adapter::Verdict;
use crate::process;
use crate::run::{Run, RunStatus, StopReason};
use crate::watch::{Wake, Watcher};

/// What to do after the children are settled.
pub(super) enum Next {
    /// Run this turn next: a continuation with the children's results, or
    /// a reply.
    Turn(NextTurn),
    /// The run's outcome is committed, or held again for a reply that came
    /// in meanwhile (see `Supervisor::held`).
    Done,
}

/// What a blocked shepherd waited for.
pub(super) enum Woken {
    /// The store may have changed.
    Look,
    /// A stop signal arrived and was acted on: the run is over.
    Stopped,
}

/// Waits until the run's direct children are all terminal (or the
/// children timeout passes, or the run is aborted), then decides. While it
/// waits it heals the store (see `heal`): a child whose shepherd died ends
/// `lost`, and a slot this run freed goes to the queue.
pub(super) fn settle(sup: &mut Supervisor, verdict: Verdict) -> Result<Next, ShepherdError> {
    let limit = sup.limits.children_timeout;
    let deadline = limit.and_then(|t| Instant::now().checked_add(t));
    let mut watcher = Watcher::new(&sup.store)?;
    let mut followers = RemoteFollowers::default();
    let mut relocated = false;
    loop {
        let kids = sup.store.child_runs(&sup.run_id)?;
        let remote = sup.store.remote_children(&sup.run_id)?;
        let active: Vec<&Run> = kids.iter().chain(&remote).filter(|c| c.status.is_active()).collect();
        if active.is_empty() {
            break;
        }
        // A host renamed in config.toml: its runs are found under the new
        // name (once per wait: a host removed for good stays as last seen).
        if !relocated {
            relocated = true;
            let home = sup.store.home().clone();
            let strays: Vec<Run> = remote.iter().filter(|r| r.status.is_active()).cloned().collect();
            if strays.iter().any(|r| crate::remote::host_of(&home, &mut sup.store, r).is_ok_and(|h| r.host != Some(h)))
            {
                continue;
            }
        }
        followers.follow(sup.store.home(), active.iter().filter_map(|r| r.host.as_deref()));
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let ids: Vec<String> = active.iter().map(|c| c.id.clone()).collect();
            let unreached = child_runs::abort_active(&mut sup.store, &mut sup.cleanup, &sup.run_id)?;
            let outcome = match unreached.as_slice() {
                [] => "aborted".to_string(),
                some => format!("aborted, but for {}, on hosts that could not be reached", some.join(", ")),
            };
            let error = format!(
                "child runs still active after children_timeout of {}: {} ({outcome})",
                humantime::format_duration(limit.unwrap_or_default()),
                ids.join(", ")
            );
            sup.commit(RunStatus::Failed, StopReason::ChildrenTimeout, Some(error))?;
            return Ok(Next::Done);
        }
        if let Woken::Stopped = block(sup, &mut watcher, deadline)? {
            return Ok(Next::Done);
        }
    }

    let kids = sup.store.child_runs(&sup.run_id)?;
    let uncollected: Vec<&Run> = kids.iter().filter(|c| c.collected_at.is_none()).collect();
    if !uncollected.is_empty() && sup.session.can_continue(&verdict) {
        let prompt = child_runs::continuation_prompt(&uncollected);
        let ids: Vec<String> = uncollected.iter().map(|c| c.id.clone()).collect();
        if !take_slot_back(sup, &mut watcher)? {
            return Ok(Next::Done);
        }
        sup.store.mark_collected(&ids)?;
        return Ok(Next::Turn(sup.session.continuation(prompt)));
    }
    if sup.session.can_resume() && !sup.store.pending_replies(&sup.run_id)?.is_empty() {
        if !take_slot_back(sup, &mut watcher)? {
            return Ok(Next::Done);
        }
        if let Some(turn) = replies::deliver(&mut sup.store, &sup.run_id)? {
            return Ok(Next::Turn(turn));
        }
    }
    sup.commit_with_children(verdict)?;
    Ok(Next::Done)
}

/// Followers of the hosts of runs this run waits for, started by it where
/// no one follows them; stopped when it stops waiting. Runtime state only.
#[derive(Default)]
struct RemoteFollowers {
    running: Vec<(String, crate::remote::Following, std::thread::JoinHandle<()>)>,
}

impl RemoteFollowers {
    /// Follows each of `hosts` not followed yet, if no one else does.
    fn follow<'a>(&mut self, home: &crate::home::Home, hosts: impl Iterator<Item = &'a str>) {
        for name in hosts {
            if self.running.iter().any(|(h, _, _)| h == name) {
                continue;
            }
            let Ok(config) = crate::home::config::Config::load(home) else { return };
            let Ok(host) = config.host(name).cloned() else { continue };
            let Some(lock) = crate::remote::FollowLock::try_take(home, name) else { continue };
            let following = crate::remote::Following::default();
            let (home, f) = (home.clone(), following.clone());
            match std::thread::Builder::new()
                .name(format!("corral-host-{name}"))
                .spawn(move || crate::remote::follow(&home, &host, &f, lock))
            {
                Ok(thread) => self.running.push((name.to_string(), following, thread)),
                Err(e) => tracing::warn!(host = name, "cannot follow the host of a child run: {e}"),
            }
        }
    }
}

impl Drop for RemoteFollowers {
    fn drop(&mut self) {
        for (_, following, _) in &self.running {
            following.stop();
        }
        for (_, _, thread) in self.running.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A continuation or reply turn is work: a run that was `waiting` takes a
/// slot back first (ahead of every queued run). False if the run was stopped
/// meanwhile.
fn take_slot_back(sup: &mut Supervisor, watcher: &mut Watcher) -> Result<bool, ShepherdError> {
    loop {
        let status = sup.store.run(&sup.run_id)?.status;
        if status != RunStatus::Waiting {
            return Ok(status == RunStatus::Running);
        }
        if sup.store.take_slot_back(&sup.run_id, sup.config.max_parallel)? {
            return Ok(true);
        }
        if let Woken::Stopped = block(sup, watcher, None)? {
            return Ok(false);
        }
    }
}

/// Blocks until the store changes, a stop signal arrives, `deadline`
/// passes, or it is time to heal again; heals the store on the way.
pub(super) fn block(
    sup: &mut Supervisor,
    watcher: &mut Watcher,
    deadline: Option<Instant>,
) -> Result<Woken, ShepherdError> {
    // Child runs' shepherds may have been adopted (this shepherd is a
    // subreaper): reap those that ended, so none lingers as a zombie.
    while let Ok(Some(_)) = process::reap_any() {}
    match watcher.heal_if_due(&mut sup.store, &sup.shepherd) {
        // This process's own commits do not move its data_version.
        Ok(true) => return Ok(Woken::Look),
        Ok(false) => {}
        Err(e) => tracing::warn!(run = %sup.run_id, "cannot heal the store: {e}"),
    }
    match watcher.wait(&sup.store, deadline, &[sup.stop.fd(), sup.sigchld.fd()])? {
        Wake::Extra(0) if sup.stop.drain() => {
            sup.on_stop_signal()?;
            Ok(Woken::Stopped)
        }
        Wake::Extra(_) => {
            sup.sigchld.drain();
            Ok(Woken::Look)
        }
        Wake::Changed | Wake::Deadline => Ok(Woken::Look),
    }
}
