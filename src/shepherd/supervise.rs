//! The shepherd's event loop: one thread polling the agent's stdout and
//! stderr, SIGCHLD and stop signals, and the clock.
//!
//! One thread keeps the order of things exact: when the agent is reaped,
//! everything it wrote before exiting is already in the pipe and is read
//! (non-blocking) before the outcome is decided from its exit status.

use std::fs::File;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::children::{self, Next};
use super::cleanup::Cleanup;
use super::lines::LineSplitter;
use super::replies::NextTurn;
use super::spawn::{AgentLaunch, RunLogs};
use super::transcript::TranscriptBudget;
use super::{OsDoing, ShepherdError};
use crate::adapter::{self, Adapter, EventKind, ProcessEnd, Report, StreamLine, TranscriptEvent, Verdict};
use crate::config::{Config, Limits};
use crate::heal::HEAL_EVERY_AT_WORK;
use crate::process::{self, ProcessId, Readiness, SignalPipe, StartedAgent};
use crate::queue::ShepherdCommand;
use crate::resources::{human_bytes, Resources};
use crate::run::{RunStatus, StopReason};
use crate::store::{Committed, Outcome, Store};

/// Most bytes of one stdout line kept in memory; the rest is counted.
pub const MAX_LINE: usize = 4 << 20;
/// Events are committed at least this often while output flows.
const FLUSH_INTERVAL: Duration = Duration::from_millis(25);
/// ...or as soon as this many are pending.
const FLUSH_BATCH: usize = 512;
/// Most bytes of stderr in one transcript event.
const STDERR_EVENT: usize = 16 << 10;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 4096;
/// How often a turn that ended looks again for Corral processes of the run
/// still recording child runs.
const LAUNCHER_POLL: Duration = Duration::from_millis(2);
/// How often the resource use of a working run is recorded.
const MEASURE_EVERY: Duration = Duration::from_secs(5);
/// How long a turn that ended waits for a process of the run forked this
/// recently to turn out to be a Corral launcher (a fork not yet exec'd).
const LAUNCH_SETTLE: Duration = Duration::from_millis(50);
/// How long a pause waits for the store's write lock with the run frozen,
/// before it thaws the run (which may hold the lock) and tries again.
const FROZEN_WRITE_PATIENCE: Duration = Duration::from_millis(25);
/// How many times a pause freezes the run before it gives up, withdrawn.
const PAUSE_ATTEMPTS: u32 = 8;
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

/// Why Corral itself is ending a run early.
#[derive(Debug, Clone)]
pub(super) enum StopCause {
    Abort,
    Signal,
    Timeout(Duration),
    Idle(Duration),
    Startup(Duration),
}

/// The runtime state of one supervised run. Nothing here is persisted as
/// such; what matters is written to the store as it happens.
pub(super) struct Supervisor {
    pub(super) store: Store,
    pub(super) run_id: String,
    pub(super) launch: AgentLaunch,
    pub(super) config: Config,
    pub(super) limits: Limits,
    pub(super) stop: SignalPipe,
    adapter: Box<dyn Adapter>,
    /// What earlier turns reported, before a continuation turn.
    earlier: Option<Report>,
    /// What the run used before this shepherd (see `Setup::used_before`).
    used_before: Resources,
    /// Continuation turns run so far.
    pub(super) continuations: usize,
    logs: RunLogs,
    pub(super) sigchld: SignalPipe,
    nudge: SignalPipe,
    pub(super) cleanup: Cleanup,
    /// Frozen by `corral pause` since then: its clocks are stopped.
    paused_since: Option<Instant>,
    /// The agent's stream says a tool call is open, as last recorded.
    tool_open: bool,

    /// The current turn: one agent process, from spawn to reaping.
    turn: Turn,
    /// Time the agent worked in earlier turns (the wall-clock `timeout`
    /// counts work, not waiting for children).
    worked: Duration,
    /// The verdict of a turn that ended with child runs to wait for or hand
    /// over; committed (or continued) once the turn's processes are gone.
    pub(super) held: Option<Verdict>,
    outcome_committed: bool,
    /// How to start shepherds of queued runs, when this one heals the store.
    pub(super) shepherd: ShepherdCommand,
    /// Corral's own executable: a process of the run running it may be
    /// recording a child run.
    corral_exe: std::path::PathBuf,
    /// When this shepherd last healed the store.
    healed_at: Instant,
    /// When it last recorded the run's resource use.
    measured_at: Instant,

    pending: Vec<TranscriptEvent>,
    pending_since: Option<Instant>,
    /// What the agent's last retry said, while it has not worked since
    /// (kept in the store for the tray and the window).
    retrying: Option<String>,
    next_seq: i64,
    /// How much more of the transcript may be kept.
    budget: TranscriptBudget,
    buf: Vec<u8>,
}

/// One turn of the run: an agent process and what is known of it. A
/// continuation turn starts a fresh one; nothing carries over by accident.
struct Turn {
    agent: ProcessId,
    stdout: Option<File>,
    stderr: Option<File>,
    splitter: LineSplitter,
    stderr_tail: Vec<u8>,
    /// Stderr read but not yet a whole line.
    stderr_partial: Vec<u8>,
    agent_end: Option<ProcessEnd>,
    /// No process of the turn is left.
    children_gone: bool,
    started: Instant,
    first_output: Option<Instant>,
    last_output: Instant,
    /// The terminal event's verdict, between reading it and concluding.
    verdict: Option<Verdict>,
    /// What the turn reported as of its terminal event: output after it
    /// (even in the same read) is transcript, never part of the outcome.
    frozen: Option<Report>,
    /// When a possible end the adapter is holding becomes the end.
    settle_at: Option<Instant>,
    /// The agent's turn is over (its verdict is in, or Corral stopped it),
    /// since then.
    over_at: Option<Instant>,
}

impl Turn {
    /// A turn of the agent process `child`, just started.
    fn start(child: StartedAgent) -> Result<Turn, ShepherdError> {
        let agent = ProcessId::of(child.pid)
            .ok_or_else(|| std::io::Error::other("the agent has no /proc entry"))
            .doing("reading the agent's identity")?;
        let (stdout, stderr) = take_pipes(child)?;
        let now = Instant::now();
        Ok(Turn {
            agent,
            stdout: Some(stdout),
            stderr: Some(stderr),
            splitter: LineSplitter::new(MAX_LINE),
            stderr_tail: Vec::new(),
            stderr_partial: Vec::new(),
            agent_end: None,
            children_gone: false,
            started: now,
            first_output: None,
            last_output: now,
            verdict: None,
            frozen: None,
            settle_at: None,
            over_at: None,
        })
    }

    fn is_over(&self) -> bool {
        self.over_at.is_some()
    }

    /// How long the agent worked in this turn.
    fn worked(&self) -> Duration {
        self.over_at.unwrap_or_else(Instant::now).saturating_duration_since(self.started)
    }
}

impl Supervisor {
    pub(super) fn new(setup: Setup) -> Result<Supervisor, ShepherdError> {
        let turn = Turn::start(setup.child)?;
        let mut store = setup.store;
        store.mark_running(&setup.run_id, turn.agent.pid, turn.agent.start)?;
        let next_seq = store.last_event_seq(&setup.run_id)? + 1;
        let size = store.run(&setup.run_id)?.transcript;
        let budget = TranscriptBudget::new(setup.config.transcripts.max_bytes, size.bytes, size.dropped_events > 0);
        let mut cleanup = setup.cleanup;
        cleanup.restart(turn.agent);
        Ok(Supervisor {
            limits: setup.config.limits_for(&setup.launch.preset),
            store,
            run_id: setup.run_id,
            launch: setup.launch,
            config: setup.config,
            stop: setup.stop,
            adapter: setup.adapter,
            earlier: setup.earlier,
            used_before: setup.used_before,
            continuations: 0,
            logs: setup.logs,
            sigchld: setup.sigchld,
            nudge: setup.nudge,
            cleanup,
            paused_since: None,
            tool_open: false,
            turn,
            worked: Duration::ZERO,
            held: None,
            outcome_committed: false,
            corral_exe: std::fs::canonicalize(&setup.shepherd.program).unwrap_or(setup.shepherd.program.clone()),
            shepherd: setup.shepherd,
            healed_at: Instant::now(),
            measured_at: Instant::now(),
            pending: Vec::new(),
            pending_since: None,
            retrying: None,
            next_seq,
            budget,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Runs until the outcome is committed and every process is reaped.
    pub(super) fn run(&mut self) -> Result<(), ShepherdError> {
        self.cleanup.note(&format!("agent started: pid {} (group {})", self.turn.agent.pid, self.turn.agent.pid));
        // An abort may have been recorded before this shepherd was ready.
        if self.store.run(&self.run_id)?.abort_requested_at.is_some() {
            self.stop_for(StopCause::Abort)?;
        }
        // What starting took (the store's pages read on the way) is not
        // needed while the agent works.
        self.give_back_memory();
        loop {
            self.supervise_turn()?;
            // Settling may hold the verdict again: a reply that came in as
            // the run was about to end.
            let next = loop {
                let Some(verdict) = self.held.take() else { break None };
                if let Next::Turn(turn) = children::settle(self, verdict)? {
                    break Some(turn);
                }
            };
            match next {
                Some(turn) => self.start_turn(turn)?,
                None => break,
            }
        }
        self.finish()
    }

    /// Supervises the current agent process until it and every process it
    /// left behind are gone.
    fn supervise_turn(&mut self) -> Result<(), ShepherdError> {
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
            if self.pending_since.is_some_and(|since| now >= since + FLUSH_INTERVAL) {
                self.flush_events()?;
            }
            self.heal_if_due(HEAL_EVERY_AT_WORK);
            if self.measured_at.elapsed() >= MEASURE_EVERY {
                // Live figures for `show` and the window; a failure is not
                // the run's.
                self.measured_at = Instant::now();
                if let Err(e) = self.record_resources() {
                    tracing::warn!(run = %self.run_id, "cannot record the run's resource use: {e}");
                }
                self.give_back_memory();
            }

            let wait = self.next_deadline().map(|d| d.saturating_duration_since(Instant::now()));
            let ready = {
                let mut fds = vec![self.sigchld.fd(), self.stop.fd(), self.nudge.fd()];
                fds.extend(self.turn.stdout.as_ref().map(AsFd::as_fd));
                fds.extend(self.turn.stderr.as_ref().map(AsFd::as_fd));
                process::wait_readable(&fds, wait).doing("waiting for the agent")?
            };
            if ready[1] && self.stop.drain() {
                self.on_stop_signal()?;
            }
            // A resume waiting for a slot looks again at every wake.
            if (ready[2] && self.nudge.drain()) || self.paused_since.is_some() {
                self.follow_pause()?;
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
        match self.paused_since {
            None if wanted && !self.turn.is_over() && !self.outcome_committed => {
                self.flush_events()?;
                // A process of the run (`corral wait`, `corral launch`, the
                // MCP server) may be frozen holding the store's write lock:
                // then no one could write, this shepherd included. The pause
                // is recorded only once the lock is taken with the run
                // frozen; else the run is thawed, lets go, and is tried again.
                for attempt in 1..=PAUSE_ATTEMPTS {
                    self.cleanup.freeze(true);
                    match self.store.mark_paused(&self.run_id, FROZEN_WRITE_PATIENCE)? {
                        Some(true) => {
                            self.paused_since = Some(Instant::now());
                            let note = "paused: every process of the run is frozen".into();
                            self.note_event(EventKind::System, note)?;
                            // Its slot is free now: hand it on at once.
                            self.heal_if_due(Duration::ZERO);
                            break;
                        }
                        Some(false) => {
                            self.cleanup.freeze(false);
                            break;
                        }
                        None => {
                            self.cleanup.freeze(false);
                            self.cleanup
                                .note(&format!("pause {attempt}: the store stayed locked while frozen; thawed"));
                            if attempt == PAUSE_ATTEMPTS {
                                // Withdrawn, so no later wake acts on it.
                                self.store.request_pause(&self.run_id, false)?;
                                let note = "pause given up: the store stayed locked each time the run was frozen";
                                self.note_event(EventKind::System, note.into())?;
                            } else {
                                std::thread::sleep(FROZEN_WRITE_PATIENCE * attempt);
                            }
                        }
                    }
                }
            }
            Some(since) if !wanted && self.store.resume_paused(&self.run_id, self.config.max_parallel)? => {
                self.cleanup.freeze(false);
                self.paused_since = None;
                let paused = since.elapsed();
                let shift = |at: Instant| at.checked_add(paused).unwrap_or(at);
                self.turn.started = shift(self.turn.started);
                self.turn.last_output = shift(self.turn.last_output);
                self.turn.settle_at = self.turn.settle_at.map(shift);
                let note = format!("resumed after {} paused", humantime::format_duration(round_ms(paused)));
                self.note_event(EventKind::System, note)?;
            }
            _ => {}
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
                Ok(Some(_orphan)) => {}
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
        self.cleanup.note(&format!("agent pid {} ended: {}", self.turn.agent.pid, describe(end)));
        // What the agent wrote before exiting is in the pipe: read it all
        // before judging. A grandchild may keep writing, hence the bound.
        self.read_stdout(16 * READ_BUDGET)?;
        // The agent is gone, so its last line is complete even without a
        // newline, though a grandchild may still hold the pipe open.
        self.finish_stdout()?;
        self.read_stderr()?;
        if !self.turn.is_over() {
            let stderr_tail = String::from_utf8_lossy(&self.turn.stderr_tail).into_owned();
            let verdict = match self.turn.verdict.take() {
                Some(verdict) => verdict,
                None => self.adapter.verdict_on_exit(end, &stderr_tail),
            };
            // Whichever process of the run the OOM killer ended (the agent,
            // or a test runner or build it started), the run says so.
            let verdict = match self.cleanup.oom_kills() {
                0 => verdict,
                killed if verdict.status == RunStatus::Completed => {
                    let note = format!("{}; the agent went on and finished", self.out_of_memory_said(killed));
                    self.note_event(EventKind::System, note)?;
                    verdict
                }
                killed => self.out_of_memory(killed, &verdict, end),
            };
            self.conclude(verdict)?;
        }
        self.cleanup.after_outcome(Instant::now());
        Ok(())
    }

    /// What the kernel's OOM killer did to the run, and what to do.
    fn out_of_memory_said(&self, killed: u64) -> String {
        let limit = self.launch.limits.memory_bytes.map(|b| format!(" of {}", human_bytes(b))).unwrap_or_default();
        let what = if killed == 1 { "a process".to_string() } else { format!("{killed} processes") };
        format!(
            "the run ran out of memory: it used more than its memory limit{limit} and the kernel's OOM killer              ended {what} of it; raise `limits: {{memory: …}}` in the preset or `[limits]` in config.toml"
        )
    }

    /// The verdict on a run whose processes the kernel's OOM killer ended:
    /// failed for memory, with what the agent's end said.
    fn out_of_memory(&self, killed: u64, said: &Verdict, end: ProcessEnd) -> Verdict {
        let mut error = self.out_of_memory_said(killed);
        if end != ProcessEnd::Signaled(libc::SIGKILL) {
            let then = said.error.clone().unwrap_or_else(|| format!("the agent ended: {}", describe(end)));
            error.push_str(&format!(" (then: {then})"));
        }
        Verdict { status: RunStatus::Failed, stop_reason: StopReason::OutOfMemory, error: Some(error) }
    }

    fn read_stdout(&mut self, budget: usize) -> Result<(), ShepherdError> {
        let mut read = 0;
        while read < budget {
            let Some(out) = self.turn.stdout.as_mut() else { return Ok(()) };
            match process::read_available(out, &mut self.buf).doing("reading the agent's stdout")? {
                Readiness::Data(n) => {
                    read += n;
                    self.saw_output();
                    self.logs.stdout.write(&self.buf[..n]);
                    let chunk = std::mem::take(&mut self.buf);
                    self.feed(&chunk[..n]);
                    self.buf = chunk;
                    self.after_lines()?;
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => {
                    self.turn.stdout = None;
                    return self.finish_stdout();
                }
            }
        }
        Ok(())
    }

    /// The stream ended: a last line without LF still counts.
    fn finish_stdout(&mut self) -> Result<(), ShepherdError> {
        let mut splitter = std::mem::replace(&mut self.turn.splitter, LineSplitter::new(0));
        splitter.finish(|bytes, dropped| self.read_line(bytes, dropped));
        self.turn.splitter = LineSplitter::new(MAX_LINE);
        self.after_lines()
    }

    fn feed(&mut self, chunk: &[u8]) {
        let mut splitter = std::mem::replace(&mut self.turn.splitter, LineSplitter::new(0));
        splitter.feed(chunk, |bytes, dropped| self.read_line(bytes, dropped));
        self.turn.splitter = splitter;
    }

    fn read_line(&mut self, bytes: &[u8], dropped: u64) {
        let verdict = self.adapter.read_line(StreamLine { bytes, dropped }, &mut self.pending);
        if self.turn.verdict.is_none() && !self.turn.is_over() && verdict.is_some() {
            self.turn.frozen = Some(self.adapter.report());
            self.turn.verdict = verdict;
        }
        self.pending_since.get_or_insert_with(Instant::now);
    }

    /// Concludes on the terminal event's verdict, or commits a full batch.
    fn after_lines(&mut self) -> Result<(), ShepherdError> {
        self.turn.settle_at = match (self.adapter.settling(), self.turn.settle_at) {
            (None, _) => None,
            (Some(_), Some(at)) => Some(at),
            (Some(window), None) => Some(Instant::now() + window),
        };
        if let Some(verdict) = self.turn.verdict.take() {
            self.conclude(verdict)?;
        } else if self.pending.len() >= FLUSH_BATCH {
            self.flush_events()?;
        }
        Ok(())
    }

    fn read_stderr(&mut self) -> Result<(), ShepherdError> {
        loop {
            let Some(err) = self.turn.stderr.as_mut() else { return Ok(()) };
            match process::read_available(err, &mut self.buf).doing("reading the agent's stderr")? {
                Readiness::Data(n) => {
                    self.saw_output();
                    self.logs.stderr.write(&self.buf[..n]);
                    self.turn.stderr_tail.extend_from_slice(&self.buf[..n]);
                    let excess = self.turn.stderr_tail.len().saturating_sub(STDERR_TAIL);
                    self.turn.stderr_tail.drain(..excess);
                    self.turn.stderr_partial.extend_from_slice(&self.buf[..n]);
                    self.stderr_lines(false);
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => {
                    self.turn.stderr = None;
                    self.stderr_lines(true);
                    return Ok(());
                }
            }
        }
    }

    /// Whole stderr lines become a transcript event (marked stderr), in
    /// order with the stream's; a line longer than [`STDERR_EVENT`] is cut
    /// there, and at the stream's end the rest counts as a line.
    fn stderr_lines(&mut self, at_end: bool) {
        let partial = &mut self.turn.stderr_partial;
        let whole = match partial.iter().rposition(|&b| b == b'\n') {
            Some(at) => at + 1,
            None if at_end || partial.len() >= STDERR_EVENT => partial.len(),
            None => return,
        };
        let bytes: Vec<u8> = partial.drain(..whole).collect();
        // What the agent wrote to stdout before comes first.
        self.adapter.flush(&mut self.pending);
        let text = String::from_utf8_lossy(&bytes);
        for piece in text.as_bytes().chunks(STDERR_EVENT) {
            let piece = String::from_utf8_lossy(piece);
            let piece = piece.trim_end_matches('\n');
            if !piece.is_empty() {
                self.pending.push(TranscriptEvent::text(EventKind::Stderr, piece.to_string()));
                self.pending_since.get_or_insert_with(Instant::now);
            }
        }
    }

    fn saw_output(&mut self) {
        let now = Instant::now();
        self.turn.first_output.get_or_insert(now);
        self.turn.last_output = now;
    }

    /// The settle window and the time limits (stopped while paused).
    fn check_clock(&mut self, now: Instant) -> Result<(), ShepherdError> {
        if self.turn.is_over() || self.paused_since.is_some() {
            return Ok(());
        }
        if self.turn.settle_at.is_some_and(|at| now >= at) {
            // What the agent wrote by now may cancel the tentative end (pi's
            // `auto_retry_start`): read it before settling.
            self.read_stdout(READ_BUDGET)?;
            if self.turn.is_over() || self.turn.settle_at.is_none_or(|at| now < at) {
                return Ok(());
            }
            self.turn.settle_at = None;
            if let Some(verdict) = self.adapter.settle() {
                return self.conclude(verdict);
            }
        }
        // Silence while a tool runs is work: idleness counts from now.
        if self.adapter.busy() {
            self.turn.last_output = now;
        }
        let l = self.limits;
        let cause = if self.work_deadline().is_some_and(|at| now >= at) {
            l.timeout.map(StopCause::Timeout)
        } else if self.turn.first_output.is_none()
            && l.startup_timeout.is_some_and(|t| now.saturating_duration_since(self.turn.started) >= t)
        {
            l.startup_timeout.map(StopCause::Startup)
        } else if self.turn.first_output.is_some()
            && l.idle_timeout.is_some_and(|t| now.saturating_duration_since(self.turn.last_output) >= t)
        {
            l.idle_timeout.map(StopCause::Idle)
        } else {
            None
        };
        match cause {
            Some(cause) => self.stop_for(cause),
            None => Ok(()),
        }
    }

    /// When the wall-clock `timeout` passes: it counts the agent's work in
    /// every turn, not the time spent waiting for child runs.
    fn work_deadline(&self) -> Option<Instant> {
        // No deadline a clock cannot hold: the limit is then never reached.
        self.limits.timeout.and_then(|t| self.turn.started.checked_add(t.saturating_sub(self.worked)))
    }

    /// The earliest moment the loop must wake without input.
    fn next_deadline(&self) -> Option<Instant> {
        let l = &self.limits;
        let mut deadlines = vec![
            self.cleanup.deadline(),
            self.pending_since.map(|s| s + FLUSH_INTERVAL),
            Some(self.healed_at + HEAL_EVERY_AT_WORK),
            Some(self.measured_at + MEASURE_EVERY),
        ];
        if !self.turn.is_over() && self.paused_since.is_none() {
            deadlines.push(self.turn.settle_at);
            deadlines.push(self.work_deadline());
            if self.turn.first_output.is_none() {
                deadlines.push(l.startup_timeout.and_then(|t| self.turn.started.checked_add(t)));
            } else {
                deadlines.push(l.idle_timeout.and_then(|t| self.turn.last_output.checked_add(t)));
            }
        }
        deadlines.into_iter().flatten().min()
    }

    /// The agent's turn ended with `verdict`. With child runs still active,
    /// or finished with results the agent has not collected, the run waits
    /// (or goes on) instead of ending: see `children`.
    fn conclude(&mut self, verdict: Verdict) -> Result<(), ShepherdError> {
        self.turn.over_at.get_or_insert_with(Instant::now);
        self.turn.settle_at = None;
        self.await_launchers();
        self.cleanup.after_outcome(Instant::now());
        let kids = self.store.child_runs(&self.run_id)?;
        let remote_active = self.store.remote_children(&self.run_id)?.iter().filter(|r| r.status.is_active()).count();
        let active = kids.iter().filter(|c| c.status.is_active()).count() + remote_active;
        let uncollected = kids.iter().any(|c| c.status.is_terminal() && c.collected_at.is_none());
        if active > 0 {
            self.flush_events()?;
            self.store.mark_waiting(&self.run_id)?;
            // Its slot is free now: hand it on at once.
            self.heal_if_due(Duration::ZERO);
            self.cleanup.note(&format!("turn ended with {active} child run(s) active: waiting"));
            self.held = Some(verdict);
        } else if uncollected && self.can_continue(&verdict) {
            self.held = Some(verdict);
        } else {
            children::commit_with_children(self, verdict)?;
        }
        Ok(())
    }

    /// Waits (at most the exit grace) for Corral's own programs still running
    /// in the run (`corral launch … &`, an MCP server): a child run they are
    /// recording must be counted before the run is judged, or the parent
    /// would end while its child runs.
    fn await_launchers(&mut self) {
        let start = Instant::now();
        let deadline = start + self.config.exit_grace;
        let mut noted = false;
        loop {
            let left = self.cleanup.own_processes();
            let launchers: Vec<i32> = left
                .iter()
                .copied()
                .filter(|&pid| process::exe_of(pid).is_some_and(|exe| exe == self.corral_exe))
                .collect();
            // A shell's `corral launch … &` may not have exec'd yet when the
            // shell exits: a process forked just now may still become a
            // launcher. One that has run longer (the agent lingering after
            // its last line, a server it started) never delays the verdict.
            let since = start.elapsed();
            let agent = self.turn.agent.pid;
            let fresh = |pid: &i32| process::age(*pid).is_some_and(|age| age <= LAUNCH_SETTLE + since);
            let settling =
                since < LAUNCH_SETTLE && left.iter().filter(|p| **p != agent && !launchers.contains(p)).any(fresh);
            if (launchers.is_empty() && !settling) || Instant::now() >= deadline {
                return;
            }
            if launchers.is_empty() {
                std::thread::sleep(LAUNCHER_POLL);
                continue;
            }
            if !noted {
                let pids: Vec<String> = launchers.iter().map(i32::to_string).collect();
                self.cleanup
                    .note(&format!("waiting for Corral processes of the run to finish: pids {}", pids.join(" ")));
                noted = true;
            }
            // Nothing is reaped here: the agent's exit status is read by
            // `reap` alone (zombies are in no list of the run's processes).
            std::thread::sleep(LAUNCHER_POLL);
        }
    }

    /// True if a continuation turn can hand results to the agent.
    pub(super) fn can_continue(&self, verdict: &Verdict) -> bool {
        verdict.status == RunStatus::Completed
            && self.continuations < self.config.max_continuations
            && self.can_resume()
    }

    /// True if the agent's session can take another turn (a reply's).
    pub(super) fn can_resume(&self) -> bool {
        self.resume_invocation("").is_some()
    }

    fn resume_invocation(&self, prompt: &str) -> Option<adapter::Invocation> {
        let session = self.report().session_id.unwrap_or_default();
        self.adapter.resume_invocation(&self.launch.context(prompt), &session)
    }

    /// The next turn with the children's results: `prompt` in the agent's
    /// session.
    pub(super) fn continuation(&mut self, prompt: String) -> NextTurn {
        self.continuations += 1;
        let notes = vec![
            TranscriptEvent::text(
                EventKind::System,
                format!("continuation turn {}: handing the results of child runs to the agent", self.continuations),
            ),
            TranscriptEvent::text(EventKind::System, format!("prompt: {prompt}")),
        ];
        NextTurn { prompt, allowed: None, notes, reply: false }
    }

    /// Starts a new turn in the agent's session.
    fn start_turn(&mut self, turn: NextTurn) -> Result<(), ShepherdError> {
        if let Some(allowed) = turn.allowed {
            self.launch.allowed = allowed;
        }
        let prompt = turn.prompt;
        let Some(invocation) = self.resume_invocation(&prompt) else {
            let error = "the agent's session cannot be resumed".to_string();
            return self.commit(RunStatus::Failed, StopReason::SpawnFailed, Some(error));
        };
        self.pending.extend(turn.notes);
        self.flush_events()?;
        let mut earlier = self.report();
        if turn.reply {
            // Refusals answered by the user are not this run's any more.
            earlier.denied.clear();
        }
        self.earlier = Some(earlier);
        let next = adapter::for_agent(self.launch.preset.agent);
        let cumulative = next.usage_is_cumulative();
        self.adapter = next;
        if cumulative {
            // The stream's usage will cover every turn: keep only the texts.
            if let Some(earlier) = &mut self.earlier {
                earlier.usage = Default::default();
                earlier.cost_usd = None;
            }
        }
        let child = match self.launch.spawn(&invocation) {
            Ok(child) => child,
            Err(e) => {
                let error = super::spawn::spawn_error(&invocation.program, &self.launch.preset.path, &e);
                return self.commit(RunStatus::Failed, StopReason::SpawnFailed, Some(error));
            }
        };
        self.worked += self.turn.worked();
        self.turn = Turn::start(child)?;
        self.cleanup.restart(self.turn.agent);
        self.cleanup.note(&format!("agent of the next turn started: pid {}", self.turn.agent.pid));
        self.store.mark_resumed(&self.run_id, self.turn.agent.pid, self.turn.agent.start)?;
        Ok(())
    }

    /// Ends the run for a reason of Corral's own, then stops its processes
    /// and its child runs.
    pub(super) fn stop_for(&mut self, cause: StopCause) -> Result<(), ShepherdError> {
        let human = |d: Duration| humantime::format_duration(d).to_string();
        let (status, reason, error) = match &cause {
            StopCause::Abort => (RunStatus::Aborted, StopReason::UserAbort, "aborted by request".to_string()),
            StopCause::Signal => (
                RunStatus::Aborted,
                StopReason::Signal,
                "the shepherd was told to stop (SIGTERM, SIGINT or SIGHUP)".to_string(),
            ),
            StopCause::Timeout(d) => {
                (RunStatus::Failed, StopReason::Timeout, format!("ran longer than its timeout of {}", human(*d)))
            }
            StopCause::Idle(d) => {
                (RunStatus::Failed, StopReason::Idle, format!("no output for {} (idle_timeout)", human(*d)))
            }
            StopCause::Startup(d) => (
                RunStatus::Failed,
                StopReason::StartupTimeout,
                format!("no output within {} of starting (startup_timeout)", human(*d)),
            ),
        };
        self.turn.over_at.get_or_insert_with(Instant::now);
        if !self.outcome_committed {
            self.commit(status, reason, Some(error.clone()))?;
        }
        if self.paused_since.take().is_some() {
            // A frozen process cannot act on SIGTERM.
            self.cleanup.freeze(false);
        }
        self.cleanup.stop(Instant::now(), &error);
        // Those it cannot reach are noted in the cleanup record.
        children::abort_active(self)?;
        Ok(())
    }

    /// Heals the store (see `heal`) if it last did `every` ago or more:
    /// another run's shepherd may have died, or a slot may be free. Returns
    /// true if this process committed
    /// anything. A failure (a broken `config.toml`, say) is logged and
    /// never disturbs this run's supervision.
    pub(super) fn heal_if_due(&mut self, every: Duration) -> bool {
        if self.healed_at.elapsed() < every {
            return false;
        }
        self.healed_at = Instant::now();
        match crate::heal::heal(&mut self.store, &self.shepherd) {
            Ok(healed) => healed.changed(),
            Err(e) => {
                tracing::warn!(run = %self.run_id, "cannot heal the store: {e}");
                false
            }
        }
    }

    /// What the stream said, over every turn.
    pub(super) fn report(&self) -> Report {
        let now = self.turn.frozen.clone().unwrap_or_else(|| self.adapter.report());
        match &self.earlier {
            Some(earlier) => earlier.then(&now, false),
            None => now,
        }
    }

    /// Commits the outcome, after every pending transcript event.
    pub(super) fn commit(
        &mut self,
        status: RunStatus,
        stop_reason: StopReason,
        error: Option<String>,
    ) -> Result<(), ShepherdError> {
        let report = self.report();
        self.commit_report(status, stop_reason, error, report)
    }

    /// Commits the outcome with this report.
    pub(super) fn commit_report(
        &mut self,
        status: RunStatus,
        stop_reason: StopReason,
        error: Option<String>,
        report: Report,
    ) -> Result<(), ShepherdError> {
        self.commit_with(Verdict { status, stop_reason, error }, report, false).map(drop)
    }

    /// Commits the outcome of the agent's own last turn, unless a reply
    /// waits for it and its session can take one: then the verdict is held
    /// and the reply is delivered in a new turn. False if so.
    pub(super) fn commit_turn_end(&mut self, verdict: Verdict, report: Report) -> Result<bool, ShepherdError> {
        let replies_first = self.can_resume();
        self.commit_with(verdict, report, replies_first).map(|c| c != Committed::ReplyWaits)
    }

    fn commit_with(
        &mut self,
        verdict: Verdict,
        report: Report,
        replies_first: bool,
    ) -> Result<Committed, ShepherdError> {
        self.flush_events()?;
        let mut report = report;
        report.cost_estimated = crate::price::complete(&mut report, self.launch.model.as_deref());
        let (exit_code, exit_signal) = split_end(self.turn.agent_end);
        let Verdict { status, stop_reason, error } = verdict.clone();
        let outcome = Outcome { status, stop_reason, exit_code, exit_signal, error, report };
        let committed = if replies_first {
            self.store.commit_turn_end(&self.run_id, &outcome)?
        } else if self.store.commit_outcome(&self.run_id, &outcome)? {
            Committed::Applied
        } else {
            Committed::AlreadyDecided
        };
        let note = match committed {
            Committed::ReplyWaits => {
                self.held = Some(verdict);
                return Ok(committed);
            }
            Committed::Applied => format!("outcome committed: {status} ({stop_reason})"),
            Committed::AlreadyDecided => "outcome was already decided elsewhere; kept it".to_string(),
        };
        self.held = None;
        self.outcome_committed = true;
        self.cleanup.note(&note);
        Ok(committed)
    }

    /// Writes pending transcript events in one transaction.
    pub(super) fn flush_events(&mut self) -> Result<(), ShepherdError> {
        self.adapter.flush(&mut self.pending);
        self.pending_since = None;
        // Whether the agent is in a tool call: a wait that tool call runs
        // frees the run's slot only meanwhile (see `blocking`).
        let tool_open = !self.turn.is_over() && self.adapter.busy();
        if tool_open != self.tool_open {
            self.store.set_tool_open(&self.run_id, tool_open)?;
            self.tool_open = tool_open;
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        // Retrying until the agent shows work again (its usage and Corral's
        // own notes are neither).
        let mut retrying = self.retrying.clone();
        for event in &self.pending {
            match event.kind {
                EventKind::Retry => retrying = Some(event.text.clone()),
                // Neither is the agent working again.
                EventKind::Usage | EventKind::System | EventKind::Stderr => {}
                _ => retrying = None,
            }
        }
        if retrying != self.retrying && !self.outcome_committed {
            self.store.set_retrying(&self.run_id, retrying.as_deref())?;
            self.retrying = retrying;
        }
        self.budget.admit(&mut self.pending);
        let dropped = self.budget.take_dropped();
        self.store.append_transcript(&self.run_id, self.next_seq, &self.pending, dropped)?;
        self.next_seq += self.pending.len() as i64;
        self.pending.clear();
        Ok(())
    }

    /// Appends one transcript event at once.
    pub(super) fn note_event(&mut self, kind: EventKind, text: String) -> Result<(), ShepherdError> {
        self.pending.push(TranscriptEvent::text(kind, text));
        self.flush_events()
    }

    fn finish(&mut self) -> Result<(), ShepherdError> {
        // Whatever an escapee left in the pipes is still part of the run.
        self.read_stdout(16 * READ_BUDGET)?;
        self.stderr_lines(true);
        self.flush_events()?;
        self.logs.close();
        // What the run changed is known with its exit (the window's +N −M).
        if let Err(e) = crate::review::measure(&mut self.store, &self.run_id) {
            tracing::warn!(run = %self.run_id, "cannot measure the worktree's changes: {e}");
        }
        let used = self.resources_used();
        self.cleanup.remove_cgroup();
        let (code, signal) = split_end(self.turn.agent_end);
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

    /// Records what the run's processes used so far (live figures).
    fn record_resources(&mut self) -> Result<(), ShepherdError> {
        let used = self.resources_used();
        self.store.record_resources(&self.run_id, &used)?;
        Ok(())
    }

    /// What the run's processes used, over every shepherd's life.
    fn resources_used(&self) -> Resources {
        let now = self.cleanup.resources();
        Resources {
            cpu_seconds: self.used_before.cpu_seconds + now.cpu_seconds,
            memory_peak_bytes: match (self.used_before.memory_peak_bytes, now.memory_peak_bytes) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }
}

impl Drop for Supervisor {
    /// On any early return (a store error, say) no process may outlive the
    /// run: kill and reap everything.
    fn drop(&mut self) {
        if !self.turn.children_gone {
            self.cleanup.note("shepherd is failing: killing every process of the run");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                self.cleanup.kill_all();
                match process::reap_any() {
                    Err(_) => break,
                    Ok(Some(_)) => continue,
                    Ok(None) if self.cleanup.is_empty() => break,
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        self.cleanup.remove_cgroup();
    }
}

/// `d` to the millisecond, for notes people read.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis().min(u64::MAX as u128) as u64)
}

fn take_pipes(child: StartedAgent) -> Result<(File, File), ShepherdError> {
    process::make_nonblocking(child.stdout.as_fd()).doing("making stdout non-blocking")?;
    process::make_nonblocking(child.stderr.as_fd()).doing("making stderr non-blocking")?;
    // Reaping is done with waitpid(-1), for the agent and every orphan alike.
    Ok((child.stdout, child.stderr))
}

fn split_end(end: Option<ProcessEnd>) -> (Option<i32>, Option<i32>) {
    match end {
        Some(ProcessEnd::Exited(code)) => (Some(code), None),
        Some(ProcessEnd::Signaled(sig)) => (None, Some(sig)),
        None => (None, None),
    }
}

fn describe(end: ProcessEnd) -> String {
    match end {
        ProcessEnd::Exited(code) => format!("exit code {code}"),
        ProcessEnd::Signaled(sig) => format!("killed by {}", adapter::signal_name(sig)),
    }
}
