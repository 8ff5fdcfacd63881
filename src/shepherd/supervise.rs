//! The shepherd's event loop: one thread polling the agent's stdout and
//! stderr, SIGCHLD and stop signals, and the clock.
//!
//! One thread keeps the order of things exact: when the agent is reaped,
//! everything it wrote before exiting is already in the pipe and is read
//! (non-blocking) before the outcome is decided from its exit status.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::{ChildStderr, ChildStdout};
use std::time::{Duration, Instant};

use super::cleanup::Cleanup;
use super::lines::LineSplitter;
use super::{OsDoing, ShepherdError};
use crate::adapter::{Adapter, ProcessEnd, StreamLine, TranscriptEvent, Verdict};
use crate::config::{Config, Limits};
use crate::preset::Preset;
use crate::process::{self, ProcessId, Readiness, SignalPipe, Sig};
use crate::run::{RunStatus, StopReason};
use crate::store::{Outcome, Store};

/// Most bytes of one stdout line kept in memory; the rest is counted.
pub const MAX_LINE: usize = 4 << 20;
/// Events are committed at least this often while output flows.
const FLUSH_INTERVAL: Duration = Duration::from_millis(25);
/// ...or as soon as this many are pending.
const FLUSH_BATCH: usize = 512;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 4096;
/// Bytes read per wake before looking at signals and clocks again.
const READ_BUDGET: usize = 1 << 20;

/// Everything the supervisor starts with.
pub(super) struct Setup {
    pub store: Store,
    pub run_id: String,
    pub me: ProcessId,
    pub agent: ProcessId,
    pub adapter: Box<dyn Adapter>,
    pub preset: Preset,
    pub config: Config,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub stdout_log: File,
    pub stderr_log: File,
    pub signals_log: File,
    pub sigchld: SignalPipe,
    pub stop: SignalPipe,
}

/// Why Corral itself is ending a run early.
#[derive(Debug, Clone)]
enum StopCause {
    Abort,
    Signal,
    Timeout(Duration),
    Idle(Duration),
    Startup(Duration),
}

/// The runtime state of one supervised run. Nothing here is persisted as
/// such; what matters is written to the store as it happens.
pub(super) struct Supervisor {
    store: Store,
    run_id: String,
    agent: ProcessId,
    adapter: Box<dyn Adapter>,
    limits: Limits,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    stdout_log: File,
    stderr_log: File,
    sigchld: SignalPipe,
    stop: SignalPipe,
    cleanup: Cleanup,
    splitter: LineSplitter,
    verdict: Option<Verdict>,
    /// When a possible end the adapter is holding becomes the end.
    settle_at: Option<Instant>,
    pending: Vec<TranscriptEvent>,
    pending_since: Option<Instant>,
    next_seq: i64,
    stderr_tail: Vec<u8>,
    agent_end: Option<ProcessEnd>,
    outcome_committed: bool,
    children_gone: bool,
    started: Instant,
    first_output: Option<Instant>,
    last_output: Instant,
    buf: Vec<u8>,
}

impl Supervisor {
    pub(super) fn new(setup: Setup) -> Result<Supervisor, ShepherdError> {
        process::make_nonblocking(setup.stdout.as_fd()).doing("making stdout non-blocking")?;
        process::make_nonblocking(setup.stderr.as_fd()).doing("making stderr non-blocking")?;
        let next_seq = setup.store.last_event_seq(&setup.run_id)? + 1;
        let now = Instant::now();
        let cleanup = Cleanup::new(
            &setup.run_id,
            setup.me.pid,
            setup.agent.pid,
            (setup.config.exit_grace, setup.config.stop_grace),
            if setup.adapter.interrupts_first() { Sig::Int } else { Sig::Term },
            setup.signals_log,
        );
        Ok(Supervisor {
            store: setup.store,
            run_id: setup.run_id,
            agent: setup.agent,
            adapter: setup.adapter,
            limits: setup.config.limits_for(&setup.preset),
            stdout: Some(setup.stdout),
            stderr: Some(setup.stderr),
            stdout_log: setup.stdout_log,
            stderr_log: setup.stderr_log,
            sigchld: setup.sigchld,
            stop: setup.stop,
            cleanup,
            splitter: LineSplitter::new(MAX_LINE),
            verdict: None,
            settle_at: None,
            pending: Vec::new(),
            pending_since: None,
            next_seq,
            stderr_tail: Vec::new(),
            agent_end: None,
            outcome_committed: false,
            children_gone: false,
            started: now,
            first_output: None,
            last_output: now,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Runs until every process of the run is reaped.
    pub(super) fn run(&mut self) -> Result<(), ShepherdError> {
        self.cleanup.note(&format!("agent started: pid {} (group {})", self.agent.pid, self.agent.pid));
        // An abort may have been recorded before this shepherd was ready.
        if self.store.run(&self.run_id)?.abort_requested_at.is_some() {
            self.stop_for(StopCause::Abort)?;
        }
        loop {
            self.reap()?;
            if self.agent_end.is_some() && self.children_gone {
                break;
            }
            let now = Instant::now();
            self.check_timeouts(now)?;
            self.cleanup.tick(now);
            if self.pending_since.is_some_and(|since| now >= since + FLUSH_INTERVAL) {
                self.flush_events()?;
            }

            let wait = self.next_deadline().map(|d| d.saturating_duration_since(Instant::now()));
            let ready = {
                let mut fds = vec![self.sigchld.fd(), self.stop.fd()];
                if let Some(out) = &self.stdout {
                    fds.push(out.as_fd());
                }
                if let Some(err) = &self.stderr {
                    fds.push(err.as_fd());
                }
                process::wait_readable(&fds, wait).doing("waiting for the agent")?
            };
            if ready[1] && self.stop.drain() {
                let run = self.store.run(&self.run_id)?;
                let cause = if run.abort_requested_at.is_some() { StopCause::Abort } else { StopCause::Signal };
                self.stop_for(cause)?;
            }
            self.sigchld.drain();
            self.read_stdout(READ_BUDGET)?;
            self.read_stderr()?;
        }
        self.finish()
    }

    /// Reaps every exited child; notes when none is left.
    fn reap(&mut self) -> Result<(), ShepherdError> {
        loop {
            match process::reap_any() {
                Ok(Some(reaped)) if reaped.pid == self.agent.pid => self.on_agent_exit(reaped.end)?,
                Ok(Some(_orphan)) => {}
                Ok(None) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                    self.children_gone = true;
                    return Ok(());
                }
                Err(e) => return Err(e).doing("reaping"),
            }
        }
    }

    fn on_agent_exit(&mut self, end: ProcessEnd) -> Result<(), ShepherdError> {
        self.agent_end = Some(end);
        self.cleanup.note(&format!("agent pid {} ended: {}", self.agent.pid, describe(end)));
        // What the agent wrote before exiting is in the pipe: read it all
        // before judging. A grandchild may keep writing, hence the bound.
        self.read_stdout(16 * READ_BUDGET)?;
        if self.stdout.is_none() {
            self.finish_stdout()?;
        }
        self.read_stderr()?;
        if !self.outcome_committed {
            let stderr_tail = String::from_utf8_lossy(&self.stderr_tail).into_owned();
            let verdict = self.verdict.take().unwrap_or_else(|| self.adapter.verdict_on_exit(end, &stderr_tail));
            self.commit(verdict.status, verdict.stop_reason, verdict.error)?;
        }
        self.cleanup.after_outcome(Instant::now());
        Ok(())
    }

    fn read_stdout(&mut self, budget: usize) -> Result<(), ShepherdError> {
        let mut read = 0;
        while read < budget {
            let Some(out) = self.stdout.as_mut() else { return Ok(()) };
            match process::read_available(out, &mut self.buf).doing("reading the agent's stdout")? {
                Readiness::Data(n) => {
                    read += n;
                    self.saw_output();
                    // Losing the raw log must not stop supervision; the
                    // transcript in the store is the record.
                    let _ = self.stdout_log.write_all(&self.buf[..n]);
                    let chunk = std::mem::take(&mut self.buf);
                    self.feed(&chunk[..n]);
                    self.buf = chunk;
                    self.after_lines()?;
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => {
                    self.stdout = None;
                    return self.finish_stdout();
                }
            }
        }
        Ok(())
    }

    /// The stream ended: a last line without LF still counts.
    fn finish_stdout(&mut self) -> Result<(), ShepherdError> {
        let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(0));
        splitter.finish(|bytes, dropped| self.read_line(bytes, dropped));
        self.splitter = LineSplitter::new(MAX_LINE);
        self.after_lines()
    }

    fn feed(&mut self, chunk: &[u8]) {
        let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(0));
        splitter.feed(chunk, |bytes, dropped| self.read_line(bytes, dropped));
        self.splitter = splitter;
    }

    fn read_line(&mut self, bytes: &[u8], dropped: u64) {
        let verdict = self.adapter.read_line(StreamLine { bytes, dropped }, &mut self.pending);
        if self.verdict.is_none() && !self.outcome_committed {
            self.verdict = verdict;
        }
        self.pending_since.get_or_insert_with(Instant::now);
    }

    /// Commits the terminal event's verdict, or a full batch of events.
    fn after_lines(&mut self) -> Result<(), ShepherdError> {
        self.settle_at = match (self.adapter.settling(), self.settle_at) {
            (None, _) => None,
            (Some(_), Some(at)) => Some(at),
            (Some(window), None) => Some(Instant::now() + window),
        };
        if let Some(verdict) = self.verdict.take() {
            self.commit(verdict.status, verdict.stop_reason, verdict.error)?;
            self.cleanup.after_outcome(Instant::now());
        } else if self.pending.len() >= FLUSH_BATCH {
            self.flush_events()?;
        }
        Ok(())
    }

    fn read_stderr(&mut self) -> Result<(), ShepherdError> {
        loop {
            let Some(err) = self.stderr.as_mut() else { return Ok(()) };
            match process::read_available(err, &mut self.buf).doing("reading the agent's stderr")? {
                Readiness::Data(n) => {
                    self.saw_output();
                    let _ = self.stderr_log.write_all(&self.buf[..n]);
                    self.stderr_tail.extend_from_slice(&self.buf[..n]);
                    let excess = self.stderr_tail.len().saturating_sub(STDERR_TAIL);
                    self.stderr_tail.drain(..excess);
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => {
                    self.stderr = None;
                    return Ok(());
                }
            }
        }
    }

    fn saw_output(&mut self) {
        let now = Instant::now();
        self.first_output.get_or_insert(now);
        self.last_output = now;
    }

    fn check_timeouts(&mut self, now: Instant) -> Result<(), ShepherdError> {
        if self.outcome_committed {
            return Ok(());
        }
        if self.settle_at.is_some_and(|at| now >= at) {
            self.settle_at = None;
            if let Some(verdict) = self.adapter.settle() {
                self.commit(verdict.status, verdict.stop_reason, verdict.error)?;
                self.cleanup.after_outcome(now);
                return Ok(());
            }
        }
        // Silence while a tool runs is work: idleness counts from now.
        if self.adapter.busy() {
            self.last_output = now;
        }
        let p = &self.limits;
        let cause = if p.timeout.is_some_and(|t| now >= self.started + t) {
            Some(StopCause::Timeout(p.timeout.unwrap_or_default()))
        } else if self.first_output.is_none() && p.startup_timeout.is_some_and(|t| now >= self.started + t) {
            Some(StopCause::Startup(p.startup_timeout.unwrap_or_default()))
        } else if self.first_output.is_some() && p.idle_timeout.is_some_and(|t| now >= self.last_output + t) {
            Some(StopCause::Idle(p.idle_timeout.unwrap_or_default()))
        } else {
            None
        };
        match cause {
            Some(cause) => self.stop_for(cause),
            None => Ok(()),
        }
    }

    /// The earliest moment the loop must wake without input.
    fn next_deadline(&self) -> Option<Instant> {
        let p = &self.limits;
        let mut deadlines = vec![self.cleanup.deadline(), self.pending_since.map(|s| s + FLUSH_INTERVAL)];
        if !self.outcome_committed {
            deadlines.push(self.settle_at);
            deadlines.push(p.timeout.map(|t| self.started + t));
            if self.first_output.is_none() {
                deadlines.push(p.startup_timeout.map(|t| self.started + t));
            } else {
                deadlines.push(p.idle_timeout.map(|t| self.last_output + t));
            }
        }
        deadlines.into_iter().flatten().min()
    }

    /// Ends the run for a reason of Corral's own, then stops its processes.
    fn stop_for(&mut self, cause: StopCause) -> Result<(), ShepherdError> {
        let human = |d: Duration| humantime::format_duration(d).to_string();
        let (status, reason, error) = match &cause {
            StopCause::Abort => (RunStatus::Aborted, StopReason::UserAbort, "aborted by request".to_string()),
            StopCause::Signal => (
                RunStatus::Aborted,
                StopReason::Signal,
                "the shepherd was told to stop (SIGTERM, SIGINT or SIGHUP)".to_string(),
            ),
            StopCause::Timeout(d) => (RunStatus::Failed, StopReason::Timeout, format!("ran longer than its timeout of {}", human(*d))),
            StopCause::Idle(d) => (RunStatus::Failed, StopReason::Idle, format!("no output for {} (idle_timeout)", human(*d))),
            StopCause::Startup(d) => (
                RunStatus::Failed,
                StopReason::StartupTimeout,
                format!("no output within {} of starting (startup_timeout)", human(*d)),
            ),
        };
        if !self.outcome_committed {
            self.commit(status, reason, Some(error.clone()))?;
        }
        self.cleanup.stop(Instant::now(), &error);
        Ok(())
    }

    /// Commits the outcome, after every pending transcript event.
    fn commit(&mut self, status: RunStatus, stop_reason: StopReason, error: Option<String>) -> Result<(), ShepherdError> {
        self.flush_events()?;
        let (exit_code, exit_signal) = split_end(self.agent_end);
        let outcome = Outcome { status, stop_reason, exit_code, exit_signal, error, report: self.adapter.report() };
        let applied = self.store.commit_outcome(&self.run_id, &outcome)?;
        self.outcome_committed = true;
        let note = if applied {
            format!("outcome committed: {status} ({stop_reason})")
        } else {
            "outcome was already decided elsewhere; kept it".to_string()
        };
        self.cleanup.note(&note);
        Ok(())
    }

    fn flush_events(&mut self) -> Result<(), ShepherdError> {
        self.adapter.flush(&mut self.pending);
        self.pending_since = None;
        if self.pending.is_empty() {
            return Ok(());
        }
        self.store.append_events(&self.run_id, self.next_seq, &self.pending)?;
        self.next_seq += self.pending.len() as i64;
        self.pending.clear();
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ShepherdError> {
        // Whatever an escapee left in the pipe is still part of the run.
        self.read_stdout(16 * READ_BUDGET)?;
        self.flush_events()?;
        let (code, signal) = split_end(self.agent_end);
        self.store.mark_exited(&self.run_id, code, signal)?;
        self.cleanup.note("every process of the run is reaped");
        Ok(())
    }
}

impl Drop for Supervisor {
    /// On any early return (a store error, say) no process may outlive the
    /// run: kill and reap everything.
    fn drop(&mut self) {
        if !(self.agent_end.is_some() && self.children_gone) {
            self.cleanup.note("shepherd is failing: killing every process of the run");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                self.cleanup.kill_all();
                match process::reap_any() {
                    Err(_) => break,
                    Ok(Some(_)) => continue,
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
    }
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
        ProcessEnd::Signaled(sig) => format!("killed by {}", crate::adapter::signal_name(sig)),
    }
}
