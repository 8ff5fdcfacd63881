//! Reconciliation: making the store true again after a shepherd died.
//!
//! Every process that reads or waits on the store runs this (see `heal`).
//! A run that
//! is active in the store but whose shepherd is gone (checked by pid *and*
//! start time, never pid alone) becomes `lost` / `shepherd_died` — never
//! `completed`, never silently `failed` — and every process still alive from
//! it is killed: its whole cgroup, if it has one (then removed); else the
//! recorded agent's process group while a process of the run is in it, and
//! any process carrying the run's id in its environment (a `setsid`
//! grandchild whose parents are gone). A
//! wait whose process died is removed, so its run holds its slot again. A
//! process that finds its own run lost steps out of it, kills the rest of
//! it, finishes its heal (the queue moves on), and stops too (see
//! [`EXIT_RUN_LOST`]).

use std::time::Duration;

use crate::adapter::{EventKind, TranscriptEvent};
use crate::cost::resources::Resources;
use crate::cost::usage_limit::CONTINUE;
use crate::process::cgroup::RunCgroup;
use crate::process::{self, ProcessId, Sig};
use crate::run::env::RUN_ID_ENV;
use crate::run::{PauseReason, Run, RunStatus, StopReason};
use crate::store::{Outcome, Store, StoreError};
use crate::text::time;

/// A run still `starting` with no shepherd recorded this long after it got
/// its slot, though whoever promoted it is alive, never got one: its
/// shepherd died before claiming it. Counted from the promotion, never the
/// creation: queueing is not lateness.
const SHEPHERD_START_LIMIT: Duration = Duration::from_secs(30);

/// How long a shepherd spawned just before its promoter died may take to
/// claim its run before the run goes back to the queue.
const CLAIM_GRACE: Duration = Duration::from_secs(2);

/// What reconciliation changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reconciled {
    /// Runs it marked `lost`.
    pub lost: Vec<Run>,
    /// Waits it removed because their process died.
    pub stale_waits: usize,
    /// Ended runs whose shepherd died before reaping everything: their
    /// survivors were killed and their exit recorded.
    pub reaped: usize,
    /// Runs put back in the queue: whoever gave them a slot died before
    /// starting their shepherd.
    pub requeued: usize,
    /// A run it found lost (or unreaped) that this very process belongs to:
    /// its other survivors were killed, this process stepped out of it
    /// first; it stops last (see [`stop_as_lost`]), once the heal is done.
    pub own_lost: Option<Run>,
}

impl Reconciled {
    /// True if it committed anything.
    pub fn changed(&self) -> bool {
        !self.lost.is_empty() || self.stale_waits > 0 || self.reaped > 0 || self.requeued > 0
    }
}

/// Marks runs whose shepherd is gone as `lost` and kills their survivors;
/// removes waits whose process died.
pub fn reconcile(store: &mut Store) -> Result<Reconciled, StoreError> {
    let mut own_lost = None;
    let reconciled = reconcile_into(store, &mut own_lost);
    // Stepped out of its own lost run, a process stops with it whatever
    // failed after: it never goes on outside the run it belonged to.
    match (&reconciled, own_lost) {
        (Err(_), Some(own)) => stop_as_lost(&own),
        _ => reconciled,
    }
}

/// [`reconcile`], noting in `own_lost` the lost run this process belongs
/// to as soon as it steps out of it.
fn reconcile_into(store: &mut Store, own_lost: &mut Option<Run>) -> Result<Reconciled, StoreError> {
    // Read only once a run is found lost: a heal runs every second in
    // every working shepherd, and most find nothing.
    let holds_me = std::cell::OnceCell::new();
    let holds_me = || holds_me.get_or_init(ThisProcess::read);
    let mut stale_waits = 0;
    for blocked in store.blocked_processes()? {
        if !blocked.process.is_alive() {
            store.remove_wait(blocked.wait)?;
            stale_waits += 1;
        }
    }
    let mut lost = Vec::new();
    let mut requeued = 0;
    for run in store.active_runs()? {
        if promoter_died_before_starting(&run) {
            // Nothing of it ever ran: back to the queue, not `lost`.
            if store.requeue_unstarted(&run.id)? {
                requeued += 1;
            }
            continue;
        }
        if !shepherd_is_gone(&run) {
            continue;
        }
        let outcome = Outcome {
            status: RunStatus::Lost,
            stop_reason: StopReason::ShepherdDied,
            exit_code: None,
            exit_signal: None,
            error: Some(lost_reason(store)),
            report: Default::default(),
        };
        // A run waiting out a usage limit has no process of its own:
        // its shepherd died, yet none of its work went with it. Queued
        // again in one commit: never `lost` on the way.
        let limited = run.pause_reason == Some(PauseReason::UsageLimit)
            && run.session_id.is_some()
            && run.shepherd_pid.is_some()
            && run.shepherd_start.is_some();
        if limited {
            match go_on_after_limit(store, &run)? {
                AfterLimit::Requeued => requeued += 1,
                // Another healer queued it first (or it changed since it
                // was read): never marked lost from a stale look.
                AfterLimit::NotThatRun => {}
            }
            continue;
        }
        if store.commit_outcome(&run.id, &outcome)? {
            if holds_me().in_run(&run) {
                holds_me().step_out(&run);
                *own_lost = Some(run.clone());
            }
            let used = kill_survivors(&run, &store.home().run_dir(&run.id));
            store.mark_exited_using(&run.id, None, None, used.as_ref())?;
            lost.push(store.run(&run.id)?);
        }
    }
    // A shepherd killed after the outcome, during cleanup: the outcome
    // stands, but what is left of the run must go and its exit be known.
    let mut reaped = 0;
    for run in store.unreaped_runs()? {
        if shepherd_is_gone(&run) {
            if holds_me().in_run(&run) {
                holds_me().step_out(&run);
                own_lost.get_or_insert_with(|| run.clone());
            }
            let used = kill_survivors(&run, &store.home().run_dir(&run.id));
            store.mark_exited_using(&run.id, None, None, used.as_ref())?;
            reaped += 1;
        }
    }
    Ok(Reconciled { lost, stale_waits, reaped, requeued, own_lost: own_lost.clone() })
}

/// True if run `run`, active in the store, needs a heal: its shepherd is
/// gone, or whoever gave it its slot died before starting one.
pub fn needs_healing(run: &Run) -> bool {
    promoter_died_before_starting(run) || shepherd_is_gone(run)
}

/// Stops this process, which belongs to run `run` (an agent's `corral
/// wait` or `launch`, say), found lost: it is the last of its survivors,
/// and no process outlives its run. Called last in a heal, so the queue
/// moved on first (the shepherds it started began outside the run, which
/// this process had stepped out of to kill the rest of it).
pub fn stop_as_lost(run: &Run) -> ! {
    // Its stderr may be a pipe no one reads any more: said if it can be.
    let said = format!("corral: run {} that this process belongs to is lost (its shepherd died): stopping\n", run.id);
    let _ = std::io::Write::write_all(&mut std::io::stderr(), said.as_bytes());
    std::process::exit(EXIT_RUN_LOST);
}

/// What says which run this process belongs to, as [`kill_survivors`]
/// would find it: the run's id in its environment, the run's cgroup, or
/// the agent's process group. Read once per reconciliation.
struct ThisProcess {
    run_id: Option<String>,
    cgroup_run: Option<String>,
    group: Option<i32>,
    session: Option<i32>,
}

impl ThisProcess {
    fn read() -> ThisProcess {
        let me = std::process::id() as i32;
        ThisProcess {
            run_id: std::env::var(RUN_ID_ENV).ok(),
            cgroup_run: process::cgroup::run_of(me),
            group: process::group_of(me),
            session: process::session_of(me),
        }
    }

    /// True if killing what is left of `run` would kill this process.
    fn in_run(&self, run: &Run) -> bool {
        self.run_id.as_deref() == Some(run.id.as_str())
            || self.cgroup_run.as_deref() == Some(run.id.as_str())
            || self.in_agents_group(run)
    }

    /// True if this process is in the process group of `run`'s agent, as
    /// [`kill_survivors`] judges it: a group led by a stranger now (the
    /// agent's pid taken again), or made by `setsid` (a session of the
    /// group's id, which no agent can make), is not the run's.
    fn in_agents_group(&self, run: &Run) -> bool {
        let (Some(pid), Some(start)) = (run.agent_pid, run.agent_start) else { return false };
        self.group == Some(pid)
            && self.session != Some(pid)
            && ProcessId::of(pid).is_none_or(|now| now == ProcessId { pid, start })
    }

    /// Takes this process out of `run`'s cgroup and its agent's process
    /// group, so the kill of what is left of the run spares it until its
    /// heal is done (and spares the shepherds it starts meanwhile).
    fn step_out(&self, run: &Run) {
        if self.cgroup_run.as_deref() == Some(run.id.as_str()) {
            if let Err(e) = process::cgroup::leave_run_group() {
                tracing::debug!(run = run.id, "cannot leave the lost run's cgroup: {e}");
            }
        }
        if self.in_agents_group(run) {
            let _ = nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0));
        }
    }
}

/// Queues run `id` again to go on in its agent's session, as its dead
/// shepherd would have at the limit's reset: the queue holds an agent's
/// runs until its limit resets. Said in its transcript.
fn go_on_after_limit(store: &mut Store, run: &Run) -> Result<AfterLimit, StoreError> {
    let (Some(pid), Some(start)) = (run.shepherd_pid, run.shepherd_start) else { return Ok(AfterLimit::NotThatRun) };
    // It holds no process; any left is not its to keep.
    kill_survivors(run, &store.home().run_dir(&run.id));
    if !store.requeue_at_limit(&run.id, ProcessId { pid, start }, CONTINUE)? {
        return Ok(AfterLimit::NotThatRun);
    }
    let note = TranscriptEvent::text(
        EventKind::System,
        "the run's shepherd died while it waited out a usage limit: it is queued to go on in its session \
         once the limit has reset",
    );
    let seq = store.last_event_seq(&run.id)? + 1;
    store.append_events(&run.id, seq, &[note])?;
    Ok(AfterLimit::Requeued)
}

/// What became of a run at its limit whose shepherd died.
enum AfterLimit {
    /// Queued to go on in its session, by this process.
    Requeued,
    /// No longer that run as read (queued by another healer meanwhile).
    NotThatRun,
}

/// The exit code of a process that finds its own run lost.
pub const EXIT_RUN_LOST: i32 = 137;

/// Why a run is lost, with the likely cause when the store's disk is full
/// (a shepherd dies when it cannot write its outcome).
fn lost_reason(store: &Store) -> String {
    let base = "the run's shepherd process died, so how the agent ended is unknown";
    let folder = store.home().data_dir();
    match process::disk_free(folder) {
        Some(free) if free < LOW_DISK => {
            format!(
                "{base}; the disk holding {} is full ({free} bytes free): free space, then relaunch",
                folder.display()
            )
        }
        _ => base.to_string(),
    }
}

/// Below this much free space a dead shepherd most likely could not write.
const LOW_DISK: u64 = 1 << 20;

/// A `starting` run with no shepherd whose promoter died, past the grace a
/// spawned shepherd has to claim it.
fn promoter_died_before_starting(run: &Run) -> bool {
    if run.status != RunStatus::Starting || run.shepherd_pid.is_some() {
        return false;
    }
    let (Some(pid), Some(start)) = (run.promoter_pid, run.promoter_start) else { return false };
    if (ProcessId { pid, start }).is_alive() {
        return false;
    }
    let promoted = run.promoted_at.as_deref().and_then(time::parse).unwrap_or_else(time::now);
    (time::now() - promoted).to_std().unwrap_or_default() > CLAIM_GRACE
}

/// True if run `run`, active in the store, has no shepherd any more (or
/// never got one in time): a heal would end it.
pub fn shepherd_is_gone(run: &Run) -> bool {
    match (run.status, run.shepherd_pid, run.shepherd_start) {
        (RunStatus::Queued, _, _) => false,
        (_, Some(pid), Some(start)) => !ProcessId { pid, start }.is_alive(),
        (_, _, _) => {
            let promoted = run.promoted_at.as_deref().unwrap_or(&run.created_at);
            let promoted = time::parse(promoted).unwrap_or_else(time::now);
            (time::now() - promoted).to_std().unwrap_or_default() > SHEPHERD_START_LIMIT
        }
    }
}

/// How long the reconciler waits for a killed cgroup to empty before
/// leaving its removal to the next heal.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(2);

/// Kills what is left of a run whose shepherd died: its whole cgroup, if it
/// has one; then, for a run without one (or processes that left it), the
/// agent's process group while any process of the run is still in it, and
/// every process that carries the run's id. Each signal is written in the
/// run's `signals.log` (in `run_dir`), as its shepherd writes its own.
/// Returns what the run used, as its cgroup last counted (none without
/// one).
fn kill_survivors(run: &Run, run_dir: &std::path::Path) -> Option<Resources> {
    let log = run_dir.join("signals.log");
    // A shepherd holds what its run did until its first signal: one that
    // died held it in memory, so the store says when its agent started.
    let started = match (&run.started_at, run.agent_pid, log.exists()) {
        (Some(at), Some(pid), false) => Some(format!("{at} agent started: pid {pid} (as the store says)\n")),
        _ => None,
    };
    let started = std::cell::Cell::new(started);
    let note = |what: String| {
        // Losing a log line must never stop the kill.
        if let Ok(mut file) = crate::home::open_private_append(&log) {
            let line = format!("{}{} {what}\n", started.take().unwrap_or_default(), time::format(time::now()));
            let _ = std::io::Write::write_all(&mut file, line.as_bytes());
        }
    };
    let mut used = None;
    if let Some(group) = run.containment.as_ref().and_then(RunCgroup::open) {
        if group.is_populated() {
            note(format!("its shepherd is gone: SIGKILL -> cgroup {}", group.dir().display()));
        }
        let _ = group.kill();
        let deadline = std::time::Instant::now() + CGROUP_EMPTY_WAIT;
        while group.is_populated() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        used = Some(group.usage());
        let _ = group.remove();
    }
    if let (Some(pid), Some(start)) = (run.agent_pid, run.agent_start) {
        let agent = ProcessId { pid, start };
        // The agent may be gone while its group lives on (a child started
        // with `env -i`). No new process can take the group's id while a
        // member is left, so members started after the agent are the run's,
        // unless a stranger now leads a group of that id.
        let stranger_leads = ProcessId::of(pid).is_some_and(|now| now != agent);
        if !stranger_leads && (agent.is_alive() || !process::group_members(pid, start).is_empty()) {
            note(format!("its shepherd is gone: SIGKILL -> group {pid}"));
            let _ = process::signal_group(pid, Sig::Kill);
        }
    }
    for marked in process::processes_with_env(RUN_ID_ENV, &run.id) {
        note(format!("its shepherd is gone: SIGKILL -> {} (carries the run's id)", marked.pid));
        let _ = marked.signal(Sig::Kill);
    }
    used
}
