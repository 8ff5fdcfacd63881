//! The shepherd's event loop: one thread polling the agent's stdout and
//! stderr, SIGCHLD and stop signals, and the clock.
//!
//! One thread keeps the order of things exact: when the agent is reaped,
//! everything it wrote before exiting is already in the pipe and is read
//! (non-blocking) before the outcome is decided from its exit status.
//!
//! The [`Supervisor`] owns the parts and decides; each part is a room of
//! its own: the output streams (`streams`), the clocks and time limits
//! (`clock`), the agent process of the turn (`turn`), the agent's session
//! over turns (`session`), the writes to the store (`recorder`), the stop
//! sequence (`cleanup`), freezing for a pause (`freeze`), Corral's own
//! processes in the run (`launchers`) and its child runs (`child_runs`,
//! and `children` for waiting on them). What stays here is one thing:
//! the loop and the order it does things in (when a turn is over, when the
//! outcome is committed, when a stop is followed). Its own rooms hold what
//! the loop calls at its moments, each one rule: reading the output
//! (`output`), following a pause (`pausing`), the spend and its budget
//! (`spend`), a sandbox widened mid-run (`allows`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::budget::Spending;
use super::child_runs;
use super::cleanup::Cleanup;
use super::clock::{Clock, StopCause};
use super::launchers::await_launchers;
use super::limited;
use super::recorder::Recorder;
use super::replies::NextTurn;
use super::session::Session;
use super::spawn::{AgentLaunch, RunLogs};
use super::streams::Streams;
use super::turn::{self, Turn};
use super::{OsDoing, ShepherdError};
use crate::adapter::{Adapter, EventKind, ProcessEnd, Report, Verdict};
use crate::cost::resources::Resources;
use crate::home::config::{Config, Limits};
use crate::process::{self, SignalPipe, StartedAgent};
use crate::run::{RunStatus, StopReason};
use crate::store::{Committed, Outcome, Store};
use crate::upkeep::heal::HEAL_EVERY_AT_WORK;
use crate::upkeep::queue::ShepherdCommand;

/// Bytes read per wake before looking at signals and clocks again.
mod allows;
mod output;
mod pausing;
mod spend;

const READ_BUDGET: usize = 1 << 20;

/// Everything the supervisor starts with.
pub(super) struct Setup {
    pub store: Store,
    pub run_id: String,
    pub child: StartedAgent,
    pub adapter: Box<dyn Adapter>,
    pub launch: AgentLaunch,
    pub config: Config,
    pub logs: RunLogs,
    pub sigchld: SignalPipe,
    pub stop: SignalPipe,
    /// SIGUSR1: look at the store (a pause or resume request).
    pub nudge: SignalPipe,
    pub shepherd: ShepherdCommand,
    /// What earlier turns reported: those of a run reopened by a reply.
    pub earlier: Option<Report>,
    /// The stop sequence, holding the run's cgroup if it has one.
    pub cleanup: Cleanup,
    /// What the run used in earlier shepherds' lives (a run reopened by a
    /// reply): its use now adds to it.
    pub used_before: Resources,
}

/// The runtime state of one supervised run. Nothing here is persisted as
/// such; what matters is written to the store as it happens.
pub(super) struct Supervisor {
    pub(super) store: Store,
    pub(super) run_id: String,
    pub(super) config: Config,
    pub(super) limits: Limits,
    pub(super) stop: SignalPipe,
    pub(super) sigchld: SignalPipe,
    /// SIGUSR1: a pause or resume request.
    nudge: SignalPipe,
    pub(super) cleanup: Cleanup,
    /// How to start shepherds of queued runs, when this one heals the store.
    pub(super) shepherd: ShepherdCommand,
    pub(super) session: Session,

    /// The current turn: one agent process, from spawn to reaping.
    turn: Turn,
    clock: Clock,
    streams: Streams,
    recorder: Recorder,
    /// What the agent spent, as last recorded against the budgets.
    spending: Spending,
    /// The verdict of a turn that ended with child runs to wait for or hand
    /// over; committed (or continued) once the turn's processes are gone.
    pub(super) held: Option<Verdict>,
    /// A turn that ended at the agent's usage limit: waited out once the
    /// turn's processes are gone (see `limit`).
    pub(super) limited: Option<limited::Limited>,
    /// Limits without a reset time waited out so far.
    pub(super) limit_tries: u32,
    /// Corral's own executable: a process of the run running it may be
    /// recording a child run.
    corral_exe: PathBuf,
    /// When this shepherd last healed the store.
    healed_at: Instant,
}

impl Supervisor {
    pub(super) fn new(setup: Setup) -> Result<Supervisor, ShepherdError> {
        let turn = Turn::start(setup.child.pid).doing("reading the agent's identity")?;
        let streams = Streams::new(setup.child, setup.logs).doing("making the agent's pipes non-blocking")?;
        let mut store = setup.store;
        store.mark_running(&setup.run_id, turn.agent.pid, turn.agent.start)?;
        let recorder = Recorder::new(&mut store, &setup.run_id, setup.config.transcripts.max_bytes, setup.used_before)?;
        let limits = setup.config.limits_for(&setup.launch.preset);
        let session = Session::new(setup.launch, setup.adapter, setup.earlier, setup.config.max_continuations);
        let mut cleanup = setup.cleanup;
        cleanup.restart(turn.agent);
        Ok(Supervisor {
            limits,
            store,
            run_id: setup.run_id,
            config: setup.config,
            stop: setup.stop,
            session,
            sigchld: setup.sigchld,
            nudge: setup.nudge,
            cleanup,
            turn,
            clock: Clock::new(limits, Instant::now()),
            streams,
            recorder,
            spending: Spending::default(),
            held: None,
            limited: None,
            limit_tries: 0,
            corral_exe: std::fs::canonicalize(&setup.shepherd.program).unwrap_or(setup.shepherd.program.clone()),
            shepherd: setup.shepherd,
            healed_at: Instant::now(),
        })
    }

    /// The first turn's agent is running: an abort recorded before this
    /// shepherd was ready is acted on now.
    pub(super) fn begin(&mut self) -> Result<(), ShepherdError> {
        self.cleanup.context(&format!("agent started: pid {} (group {})", self.turn.agent.pid, self.turn.agent.pid));
        if self.store.run(&self.run_id)?.abort_requested_at.is_some() {
            self.stop_for(StopCause::Abort)?;
        } else {
            // Launched under a budget already spent (a parent's): frozen
            // before it spends.
            self.hold_to_budget()?;
        }
        // What starting took (the store's pages read on the way) is not
        // needed while the agent works.
        self.give_back_memory();
        Ok(())
    }

    /// Supervises the current agent process until it and every process it
    /// left behind are gone.
    pub(super) fn supervise_turn(&mut self) -> Result<(), ShepherdError> {
        loop {
            self.reap()?;
            if self.turn.agent_end.is_some() && self.turn.children_gone {
                return Ok(());
            }
            if self.cleanup.gave_up() {
                // Even the agent would not die: its end stays unknown.
                self.turn.children_gone = true;
                return Ok(());
            }
            let now = Instant::now();
            self.check_clock(now)?;
            self.cleanup.tick(now);
            if self.cleanup.gave_up() {
                continue; // nothing left to wait for: decide above
            }
            if self.recorder.flush_deadline().is_some_and(|at| now >= at) {
                self.flush_events()?;
            }
            self.heal_if_due(HEAL_EVERY_AT_WORK);
            // An agent whose stream says its spend only at a turn's end
            // (Codex, Gemini CLI) writes it to its session file as it goes.
            if self.session.follow_session_log(now) {
                self.keep_budget()?;
            }
            if self.recorder.measure_due() {
                // Live figures for `show` and the window; a failure is not
                // the run's.
                if let Err(e) = self.recorder.measure(&mut self.store, &self.run_id, &self.cleanup) {
                    tracing::warn!(run = %self.run_id, "cannot record the run's resource use: {e}");
                }
                self.give_back_memory();
            }

            let wait = self.next_deadline().map(|d| d.saturating_duration_since(Instant::now()));
            let ready = {
                let mut fds = vec![self.sigchld.fd(), self.stop.fd(), self.nudge.fd()];
                fds.extend(self.session.launch().proxy.as_ref().map(|p| p.fd()));
                fds.extend(self.streams.fds());
                process::wait_readable(&fds, wait).doing("waiting for the agent")?
            };
            if self.session.launch().proxy.is_some() && ready[3] {
                self.note_refused_hosts()?;
            }
            if ready[1] && self.stop.drain() {
                self.on_stop_signal()?;
            }
            // A resume waiting for a slot looks again at every wake.
            let nudged = ready[2] && self.nudge.drain();
            if nudged || self.clock.is_paused() {
                self.follow_pause()?;
            }
            if nudged {
                self.follow_allows()?;
            }
            self.sigchld.drain();
            self.read_stdout(READ_BUDGET)?;
            self.read_stderr()?;
        }
    }

    /// A stop signal: an abort if one is recorded, else someone else's.
    pub(super) fn on_stop_signal(&mut self) -> Result<(), ShepherdError> {
        let run = self.store.run(&self.run_id)?;
        let cause = if run.abort_requested_at.is_some() { StopCause::Abort } else { StopCause::Signal };
        self.stop_for(cause)
    }

    /// Reaps every exited child; notes when no process of the turn is left.
    fn reap(&mut self) -> Result<(), ShepherdError> {
        loop {
            match process::reap_any() {
                Ok(Some(reaped)) if reaped.pid == self.turn.agent.pid => self.on_agent_exit(reaped.end)?,
                Ok(Some(orphan)) => self.cleanup.reaped_other(orphan),
                Ok(None) => {
                    self.note_children_gone();
                    return Ok(());
                }
                // No child left, but a process carrying the run's id may be.
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                    self.note_children_gone();
                    return Ok(());
                }
                Err(e) => return Err(e).doing("reaping"),
            }
        }
    }

    /// Once the agent is reaped, the turn is over when no process of the
    /// run is left (adopted shepherds of child runs are not the run's), or
    /// when the kill sweeps gave up on those that are.
    fn note_children_gone(&mut self) {
        if self.turn.agent_end.is_some() && (self.cleanup.gave_up() || self.cleanup.is_empty()) {
            self.turn.children_gone = true;
        }
    }

    fn on_agent_exit(&mut self, end: ProcessEnd) -> Result<(), ShepherdError> {
        self.turn.agent_end = Some(end);
        self.cleanup.context(&format!("agent pid {} ended: {}", self.turn.agent.pid, turn::describe(end)));
        // What the agent wrote before exiting is in the pipe: read it all
        // before judging. A grandchild may keep writing, hence the bound.
        self.read_stdout(16 * READ_BUDGET)?;
        // The agent is gone, so its last line is complete even without a
        // newline, though a grandchild may still hold the pipe open.
        self.finish_stdout()?;
        self.read_stderr()?;
        if !self.clock.turn_is_over() {
            let verdict = match self.session.take_verdict() {
                Some(verdict) => verdict,
                None => self.session.adapter().verdict_on_exit(end, &self.streams.stderr_tail()),
            };
            // Whichever process of the run the OOM killer ended (the agent,
            // or a test runner or build it started), the run says so.
            let memory = self.session.launch().limits.memory_bytes;
            let verdict = match self.cleanup.oom_kills() {
                0 => verdict,
                killed if verdict.status == RunStatus::Completed => {
                    let said = turn::out_of_memory_said(killed, memory);
                    self.note_event(EventKind::System, format!("{said}; the agent went on and finished"))?;
                    verdict
                }
                killed => turn::out_of_memory(killed, memory, &verdict, end),
            };
            self.conclude(verdict)?;
        }
        self.cleanup.after_outcome(Instant::now());
        Ok(())
    }

    /// The settle window and the time limits (stopped while paused).
    fn check_clock(&mut self, now: Instant) -> Result<(), ShepherdError> {
        if self.clock.turn_is_over() || self.clock.is_paused() {
            return Ok(());
        }
        if self.clock.settle_due(now) {
            // What the agent wrote by now may cancel the tentative end (pi's
            // `auto_retry_start`): read it before settling.
            self.read_stdout(READ_BUDGET)?;
            if self.clock.turn_is_over() || !self.clock.settle_due(now) {
                return Ok(());
            }
            self.clock.settled();
            if let Some(verdict) = self.session.adapter().settle() {
                return self.conclude(verdict);
            }
        }
        if self.session.adapter().busy() {
            self.clock.busy(now);
        }
        match self.clock.limit_reached(now) {
            Some(cause) => self.stop_for(cause),
            None => Ok(()),
        }
    }

    /// The earliest moment the loop must wake without input.
    fn next_deadline(&self) -> Option<Instant> {
        [
            self.cleanup.deadline(),
            self.recorder.flush_deadline(),
            Some(self.healed_at + HEAL_EVERY_AT_WORK),
            Some(self.recorder.measure_deadline()),
            self.clock.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The agent's turn ended with `verdict`. With child runs still active,
    /// or finished with results the agent has not collected, the run waits
    /// (or goes on) instead of ending: see `children`.
    fn conclude(&mut self, verdict: Verdict) -> Result<(), ShepherdError> {
        self.clock.end_turn(Instant::now());
        let (tries, max_tries) = (self.limit_tries, self.config.usage_limit_tries);
        let verdict = match limited::reported(&verdict) {
            None => verdict,
            Some(limit) if limited::waits(&limit, || self.session.can_resume(), tries, max_tries) => {
                // Waited out once the agent is gone; nothing is committed.
                self.flush_events()?;
                self.cleanup.after_outcome(Instant::now());
                self.limited = Some(limited::Limited { verdict, limit });
                return Ok(());
            }
            Some(_) => limited::failed(verdict, tries),
        };
        await_launchers(&mut self.cleanup, &self.corral_exe, self.turn.agent.pid, self.config.exit_grace);
        self.cleanup.after_outcome(Instant::now());
        // A crossing is acted on when the next work starts (`hold_to_budget`).
        self.record_spend()?;
        let kids = child_runs::tally(&mut self.store, &self.run_id)?;
        if kids.active > 0 {
            self.flush_events()?;
            self.store.mark_waiting(&self.run_id)?;
            // Its slot is free now: hand it on at once.
            self.heal_if_due(Duration::ZERO);
            self.cleanup.context(&format!("turn ended with {} child run(s) active: waiting", kids.active));
            self.held = Some(verdict);
        } else if kids.uncollected && self.session.can_continue(&verdict) {
            self.held = Some(verdict);
        } else {
            self.commit_with_children(verdict)?;
        }
        Ok(())
    }

    /// Starts a new turn in the agent's session.
    pub(super) fn start_turn(&mut self, mut next: NextTurn) -> Result<(), ShepherdError> {
        let Some(invocation) = self.session.next_invocation(&mut next) else {
            let error = "the agent's session cannot be resumed".to_string();
            return self.commit(RunStatus::Failed, StopReason::SpawnFailed, Some(error));
        };
        self.recorder.pending().extend(next.notes);
        self.flush_events()?;
        let child = match self.session.start_next(&invocation, next.reply) {
            Ok(child) => child,
            Err(error) => return self.commit(RunStatus::Failed, StopReason::SpawnFailed, Some(error)),
        };
        self.turn = Turn::start(child.pid).doing("reading the agent's identity")?;
        self.streams.next_turn(child).doing("making the agent's pipes non-blocking")?;
        self.clock.next_turn(Instant::now());
        self.cleanup.restart(self.turn.agent);
        self.cleanup.context(&format!("agent of the next turn started: pid {}", self.turn.agent.pid));
        self.store.mark_resumed(&self.run_id, self.turn.agent.pid, self.turn.agent.start)?;
        self.hold_to_budget()
    }

    /// Ends the run for a reason of Corral's own, then stops its processes
    /// and its child runs.
    pub(super) fn stop_for(&mut self, cause: StopCause) -> Result<(), ShepherdError> {
        let Verdict { status, stop_reason, error } = cause.verdict();
        let error = error.unwrap_or_default();
        self.clock.end_turn(Instant::now());
        if !self.recorder.is_committed() {
            self.commit(status, stop_reason, Some(error.clone()))?;
        }
        // The stop signal first, while a paused run is still frozen (it is
        // pending then), and only then the thaw: the agent's first act on
        // waking is to take it, never more work after its end was recorded.
        self.cleanup.stop(Instant::now(), &error);
        if self.clock.is_paused() {
            self.clock.resume(Instant::now());
            self.cleanup.freeze(false);
        }
        // Those it cannot reach are noted in the cleanup record.
        child_runs::abort_active(&mut self.store, &mut self.cleanup, &self.run_id)?;
        Ok(())
    }

    /// Heals the store (see `heal`) if it last did `every` ago or more:
    /// another run's shepherd may have died, or a slot may be free. Returns
    /// true if this process committed anything. A failure (a broken
    /// `config.toml`, say) is logged and never disturbs this run's
    /// supervision.
    pub(super) fn heal_if_due(&mut self, every: Duration) -> bool {
        if self.healed_at.elapsed() < every {
            return false;
        }
        self.healed_at = Instant::now();
        match crate::upkeep::heal::heal(&mut self.store, &self.shepherd) {
            Ok(healed) => healed.changed(),
            Err(e) => {
                tracing::warn!(run = %self.run_id, "cannot heal the store: {e}");
                false
            }
        }
    }

    /// Commits the outcome, after every pending transcript event.
    pub(super) fn commit(
        &mut self,
        status: RunStatus,
        stop_reason: StopReason,
        error: Option<String>,
    ) -> Result<(), ShepherdError> {
        let report = self.final_report();
        self.commit_with(Verdict { status, stop_reason, error }, report, false).map(drop)
    }

    /// What the turn reported, once what the adapter held back is in (its
    /// refusals among the run's denials).
    fn final_report(&mut self) -> Report {
        self.session.flush_output(self.recorder.pending());
        self.session.report()
    }

    /// Commits the turn's verdict. Children whose results the agent never
    /// got are listed under its final text, so they are not lost. A reply
    /// waiting for the agent holds the verdict instead, and is delivered in
    /// a new turn (see `children`), if its session can take one.
    pub(super) fn commit_with_children(&mut self, verdict: Verdict) -> Result<(), ShepherdError> {
        let mut report = self.final_report();
        if let Some(note) = child_runs::collect_uncollected(&mut self.store, &self.run_id)? {
            self.note_event(EventKind::System, note.clone())?;
            report.final_text = Some(match report.final_text.take() {
                Some(text) => format!("{text}\n\n{note}"),
                None => note,
            });
        }
        let replies_first = self.session.can_resume();
        self.commit_with(verdict, report, replies_first).map(drop)
    }

    fn commit_with(
        &mut self,
        verdict: Verdict,
        mut report: Report,
        replies_first: bool,
    ) -> Result<Committed, ShepherdError> {
        self.flush_events()?;
        report.cost_estimated |= crate::cost::price::complete(&mut report, self.session.launch().model.as_deref());
        let (exit_code, exit_signal) = self.turn.exit();
        let Verdict { status, stop_reason, error } = verdict.clone();
        let outcome = Outcome { status, stop_reason, exit_code, exit_signal, error, report };
        let committed = self.recorder.commit(&mut self.store, &self.run_id, &outcome, replies_first)?;
        if status == RunStatus::Completed {
            // The agent worked: a usage limit it had is over.
            self.store.clear_agent_limit(self.session.launch().preset.agent)?;
        }
        let note = match committed {
            Committed::ReplyWaits => {
                self.held = Some(verdict);
                return Ok(committed);
            }
            Committed::Applied => format!("outcome committed: {status} ({stop_reason})"),
            Committed::AlreadyDecided => "outcome was already decided elsewhere; kept it".to_string(),
        };
        self.held = None;
        self.cleanup.context(&note);
        Ok(committed)
    }

    /// Writes pending transcript events in one transaction.
    pub(super) fn flush_events(&mut self) -> Result<(), ShepherdError> {
        let over = self.clock.turn_is_over();
        self.session.flush_output(self.recorder.pending());
        self.recorder.flush(&mut self.store, &self.run_id, self.session.adapter(), over)?;
        Ok(())
    }

    /// Appends one transcript event at once.
    pub(super) fn note_event(&mut self, kind: EventKind, text: String) -> Result<(), ShepherdError> {
        self.recorder.push(kind, text);
        self.flush_events()
    }

    /// The run is over: what is left in the pipes is read, its changes
    /// measured, its cgroup removed and its exit recorded.
    pub(super) fn finish(&mut self) -> Result<(), ShepherdError> {
        // Whatever an escapee left in the pipes is still part of the run.
        self.read_stdout(16 * READ_BUDGET)?;
        let rest = self.streams.finish_stderr();
        self.stderr_events(rest);
        self.flush_events()?;
        self.streams.close_logs();
        // What the run changed is known with its exit (the window's +N −M).
        if let Err(e) = crate::verbs::review::measure(&mut self.store, &self.run_id) {
            tracing::warn!(run = %self.run_id, "cannot measure the worktree's changes: {e}");
        }
        let used = self.recorder.used(&self.cleanup);
        self.cleanup.remove_cgroup();
        let (code, signal) = self.turn.exit();
        self.store.mark_exited_using(&self.run_id, code, signal, Some(&used))?;
        self.cleanup.context("every process of the run is reaped");
        Ok(())
    }

    /// Hands the store's cached pages and the heap's free pages back to the
    /// system: a shepherd lives as long as its agent, mostly waiting, and
    /// many run side by side. Pages a burst of output needs are read again
    /// from the system's cache.
    fn give_back_memory(&mut self) {
        if let Err(e) = self.store.release_memory() {
            tracing::debug!(run = %self.run_id, "cannot release the store's cache: {e}");
        }
        process::return_free_memory();
    }
}

impl Drop for Supervisor {
    /// On any early return (a store error, say) no process may outlive the
    /// run: kill and reap everything.
    fn drop(&mut self) {
        if !self.turn.children_gone {
            self.cleanup.note("shepherd is failing: killing every process of the run");
            self.cleanup.kill_and_reap_all(Duration::from_secs(5));
        }
        self.cleanup.remove_cgroup();
    }
}

/// `d` to the millisecond, for notes people read.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64)
}
