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
//! and `children` for waiting on them). What stays here, at some 600
//! lines, is one thing: the loop and the order it does things in (when a
//! turn is over, when the outcome is committed, how a pause or a stop is
//! followed); split further, that order would be spread over files.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::budget::Spending;
use super::child_runs;
use super::cleanup::Cleanup;
use super::clock::{Clock, StopCause};
use super::freeze::{self, Frozen};
use super::launchers::await_launchers;
use super::limited;
use super::recorder::Recorder;
use super::replies::NextTurn;
use super::session::Session;
use super::spawn::{AgentLaunch, RunLogs};
use super::streams::Streams;
use super::turn::{self, Turn};
use super::{OsDoing, ShepherdError};
use crate::adapter::{Adapter, EventKind, ProcessEnd, Report, StreamLine, Verdict};
use crate::cost::budget::OnBudget;
use crate::cost::resources::Resources;
use crate::home::config::{Config, Limits};
use crate::process::{self, Readiness, SignalPipe, StartedAgent};
use crate::run::{PauseReason, RunStatus, StopReason};
use crate::store::{Committed, Outcome, Store};
use crate::upkeep::heal::HEAL_EVERY_AT_WORK;
use crate::upkeep::queue::ShepherdCommand;

/// Bytes read per wake before looking at signals and clocks again.
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
        self.cleanup.note(&format!("agent started: pid {} (group {})", self.turn.agent.pid, self.turn.agent.pid));
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

    /// Pauses or resumes the run as the store asks: freezes every process
    /// of the run and frees its slot, or takes a slot back (ahead of the
    /// queue; until one is free the run stays paused) and thaws them. The
    /// turn's clocks do not count the pause.
    fn follow_pause(&mut self) -> Result<(), ShepherdError> {
        let wanted = self.store.pause_requested(&self.run_id)?;
        if !self.clock.is_paused() {
            if wanted && !self.clock.turn_is_over() && !self.recorder.is_committed() {
                self.pause("paused: every process of the run is frozen")?;
            }
        } else if !wanted && self.store.resume_paused(&self.run_id, self.config.max_parallel)? {
            self.cleanup.freeze(false);
            let paused = self.clock.resume(Instant::now());
            let note = format!("resumed after {} paused", humantime::format_duration(round_ms(paused)));
            self.note_event(EventKind::System, note)?;
        }
        Ok(())
    }

    /// Freezes the run and records it paused (see `freeze`), saying `why`
    /// in its transcript.
    fn pause(&mut self, why: &str) -> Result<(), ShepherdError> {
        self.flush_events()?;
        match freeze::freeze(&mut self.store, &mut self.cleanup, &self.run_id)? {
            Frozen::Paused => {
                self.clock.pause(Instant::now());
                self.note_event(EventKind::System, why.to_string())?;
                // Its slot is free now: hand it on at once.
                self.heal_if_due(Duration::ZERO);
            }
            Frozen::NotPaused => {}
            Frozen::GaveUp => {
                let note = "pause given up: the store stayed locked each time the run was frozen";
                self.note_event(EventKind::System, note.into())?;
            }
        }
        Ok(())
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
        self.cleanup.note(&format!("agent pid {} ended: {}", self.turn.agent.pid, turn::describe(end)));
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

    /// Reads stdout, at most `budget` bytes, concluding as soon as the
    /// terminal event is read.
    fn read_stdout(&mut self, budget: usize) -> Result<(), ShepherdError> {
        let mut read = 0;
        while read < budget && self.streams.stdout_open() {
            let over = self.clock.turn_is_over();
            let Supervisor { streams, session, recorder, .. } = self;
            let readiness = streams
                .read_stdout(|bytes, dropped| {
                    session.read_line(StreamLine { bytes, dropped }, recorder.pending(), over)
                })
                .doing("reading the agent's stdout")?;
            match readiness {
                Readiness::Data(n) => {
                    read += n;
                    self.clock.saw_output(Instant::now());
                    self.after_lines()?;
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => return self.after_lines(),
            }
        }
        Ok(())
    }

    /// The stream ended: a last line without LF still counts.
    fn finish_stdout(&mut self) -> Result<(), ShepherdError> {
        let over = self.clock.turn_is_over();
        let Supervisor { streams, session, recorder, .. } = self;
        streams
            .finish_stdout(|bytes, dropped| session.read_line(StreamLine { bytes, dropped }, recorder.pending(), over));
        self.after_lines()
    }

    /// Concludes on the terminal event's verdict, or commits a full batch.
    fn after_lines(&mut self) -> Result<(), ShepherdError> {
        self.clock.settling(self.session.adapter().settling(), Instant::now());
        if let Some(verdict) = self.session.take_verdict() {
            return self.conclude(verdict);
        }
        if self.recorder.batch_is_full() {
            self.flush_events()?;
        }
        self.keep_budget()
    }

    /// Records what the agent reported spending, if it changed, and acts
    /// on a budget it crossed: freezes the run and asks (see `budget`), or
    /// stops it (`on_budget: stop`).
    fn keep_budget(&mut self) -> Result<(), ShepherdError> {
        if self.clock.is_paused() || self.clock.turn_is_over() || self.recorder.is_committed() {
            return Ok(());
        }
        match self.record_spend()? {
            Some(crossing) => self.act_on_crossing(crossing),
            None => Ok(()),
        }
    }

    /// Records what the agent reported spending, if it changed: the budget
    /// it crossed, if one is. Also at a turn's end (an agent that says its
    /// spend only there, Codex or Gemini CLI): the runs it waits for, and
    /// their parents' budgets, see it at once.
    fn record_spend(&mut self) -> Result<Option<crate::cost::budget::Crossing>, ShepherdError> {
        let report = self.session.report();
        let model = self.session.launch().model.clone();
        let looked = self.spending.look(&mut self.store, &self.run_id, &report, model.as_deref())?;
        if let Some(note) = looked.note {
            self.note_event(EventKind::System, note)?;
        }
        Ok(looked.crossing)
    }

    /// A new turn's agent has just started: if a budget over the run is
    /// already crossed (by the turn before, or by runs it launched), it is
    /// frozen (or stopped) before it spends, and the user asked, as at a
    /// crossing mid-turn.
    fn hold_to_budget(&mut self) -> Result<(), ShepherdError> {
        match self.store.budget_crossed(&self.run_id)? {
            Some(crossing) => self.act_on_crossing(crossing),
            None => Ok(()),
        }
    }

    /// Freezes the run and asks, or stops it, at `crossing`.
    fn act_on_crossing(&mut self, crossing: crate::cost::budget::Crossing) -> Result<(), ShepherdError> {
        let words = crossing.words(&self.run_id);
        match crossing.on_budget {
            OnBudget::Stop => self.stop_for(StopCause::Budget(words)),
            OnBudget::Pause => {
                if self.store.request_pause_for(&self.run_id, PauseReason::Budget)? {
                    let id = &self.run_id;
                    let ask = format!(
                        "paused: {words}. Allow more with `corral resume {id} --budget +N` (N more dollars), or stop it with `corral abort {id}`"
                    );
                    self.pause(&ask)?;
                }
                Ok(())
            }
        }
    }

    fn read_stderr(&mut self) -> Result<(), ShepherdError> {
        let read = self.streams.read_stderr().doing("reading the agent's stderr")?;
        if read.saw_data {
            self.clock.saw_output(Instant::now());
        }
        self.stderr_events(read.events);
        Ok(())
    }

    /// Widens the run's sandbox as `corral allow` asked: hosts reachable at
    /// once, paths writable from the next turn on.
    fn follow_allows(&mut self) -> Result<(), ShepherdError> {
        let launch = self.session.launch_mut();
        let Some((sandbox, _)) = &launch.sandbox else { return Ok(()) };
        let widening = self.store.sandbox_allows(&self.run_id)?;
        let widened = sandbox.widened(&widening);
        if &widened == sandbox {
            return Ok(());
        }
        if let Some(proxy) = &launch.proxy {
            for host in &widening.hosts {
                proxy.allow(host);
            }
        }
        if let Some((sandbox, _)) = &mut launch.sandbox {
            *sandbox = widened;
        }
        if launch.proxy.is_none() {
            // A run that had no network gets its way out from the next turn.
            launch.start_proxy().doing("starting the sandbox's proxy")?;
        }
        let note = format!(
            "sandbox widened: {}",
            widening.entries().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        );
        self.note_event(EventKind::System, note)
    }

    /// Hosts the sandbox's proxy refused become denials in the transcript.
    fn note_refused_hosts(&mut self) -> Result<(), ShepherdError> {
        let hosts = self.session.launch().proxy.as_ref().map(|p| p.take_refused()).unwrap_or_default();
        // Written with the next flush, after what the agent said before.
        self.session.flush_output(self.recorder.pending());
        self.session.refused_hosts(hosts, self.recorder.pending());
        Ok(())
    }

    /// Whole stderr lines become transcript events (marked stderr), in
    /// order with the stream's.
    fn stderr_events(&mut self, events: Vec<String>) {
        if events.is_empty() {
            return;
        }
        // What the agent wrote to stdout before comes first.
        self.session.flush_output(self.recorder.pending());
        let from = self.recorder.pending().len();
        for text in events {
            self.recorder.push(EventKind::Stderr, text);
        }
        self.session.note_denials(self.recorder.pending(), from);
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
            self.cleanup.note(&format!("turn ended with {} child run(s) active: waiting", kids.active));
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
        self.cleanup.note(&format!("agent of the next turn started: pid {}", self.turn.agent.pid));
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
        self.cleanup.note(&note);
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
        self.cleanup.note("every process of the run is reaped");
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
