//! A run's clocks: when a turn started, last showed output and ended, the
//! adapter's settle window, the time limits (`timeout`, `idle_timeout`,
//! `startup_timeout`) and the pauses they do not count.
//!
//! Asked "when does a run time out?", this is the one file to open: the
//! supervisor only asks [`Clock::limit_reached`] and [`Clock::next_deadline`].
//! Runtime state only; nothing here is persisted.

use std::time::{Duration, Instant};

use crate::adapter::Verdict;
use crate::home::config::Limits;
use crate::run::{RunStatus, StopReason};

/// Why Corral itself is ending a run early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StopCause {
    /// `corral abort` (or MCP's `abort_agent`), recorded in the store.
    Abort,
    /// SIGTERM, SIGINT or SIGHUP to the shepherd with no abort recorded.
    Signal,
    /// The wall-clock `timeout`: the agent's work over every turn.
    Timeout(Duration),
    /// `idle_timeout`: no output for this long (a tool call running is work).
    Idle(Duration),
    /// `startup_timeout`: no output at all this long after starting.
    Startup(Duration),
    /// A budget crossed with `on_budget: stop`, in words.
    Budget(String),
}

impl StopCause {
    /// The verdict on a run Corral ends for this cause, its error in words.
    pub fn verdict(&self) -> Verdict {
        let human = |d: &Duration| humantime::format_duration(*d).to_string();
        let (status, stop_reason, error) = match self {
            StopCause::Abort => (RunStatus::Aborted, StopReason::UserAbort, "aborted by request".to_string()),
            StopCause::Signal => (
                RunStatus::Aborted,
                StopReason::Signal,
                "the shepherd was told to stop (SIGTERM, SIGINT or SIGHUP)".to_string(),
            ),
            StopCause::Timeout(d) => {
                (RunStatus::Failed, StopReason::Timeout, format!("ran longer than its timeout of {}", human(d)))
            }
            StopCause::Idle(d) => {
                (RunStatus::Failed, StopReason::Idle, format!("no output for {} (idle_timeout)", human(d)))
            }
            StopCause::Startup(d) => (
                RunStatus::Failed,
                StopReason::StartupTimeout,
                format!("no output within {} of starting (startup_timeout)", human(d)),
            ),
            StopCause::Budget(words) => (RunStatus::Aborted, StopReason::Budget, format!("{words} (on_budget: stop)")),
        };
        Verdict { status, stop_reason, error: Some(error) }
    }
}

/// The clocks of one run, turn after turn.
#[derive(Debug)]
pub(super) struct Clock {
    limits: Limits,
    /// When the current turn's agent started.
    started: Instant,
    first_output: Option<Instant>,
    last_output: Instant,
    /// When a possible end the adapter is holding becomes the end.
    settle_at: Option<Instant>,
    /// The agent's turn is over (its verdict is in, or Corral stopped it),
    /// since then.
    over_at: Option<Instant>,
    /// Time the agent worked in earlier turns (the wall-clock `timeout`
    /// counts work, not waiting for children).
    worked: Duration,
    /// Frozen by `corral pause` since then: the clocks are stopped.
    paused_since: Option<Instant>,
}

impl Clock {
    /// The clocks of a run whose first turn starts `now`.
    pub fn new(limits: Limits, now: Instant) -> Clock {
        Clock {
            limits,
            started: now,
            first_output: None,
            last_output: now,
            settle_at: None,
            over_at: None,
            worked: Duration::ZERO,
            paused_since: None,
        }
    }

    /// A new turn starts `now`: the one before counts as work done.
    pub fn next_turn(&mut self, now: Instant) {
        self.worked += self.over_at.unwrap_or(now).saturating_duration_since(self.started);
        self.started = now;
        self.first_output = None;
        self.last_output = now;
        self.settle_at = None;
        self.over_at = None;
    }

    /// The agent's turn is over (from `now`, unless it was already).
    pub fn end_turn(&mut self, now: Instant) {
        self.over_at.get_or_insert(now);
        self.settle_at = None;
    }

    /// True once the turn's verdict is in or Corral stopped it.
    pub fn turn_is_over(&self) -> bool {
        self.over_at.is_some()
    }

    /// The agent wrote something (stdout or stderr) at `now`.
    pub fn saw_output(&mut self, now: Instant) {
        self.first_output.get_or_insert(now);
        self.last_output = now;
    }

    /// The agent is in a tool call at `now`: silence while a tool runs is
    /// work, so idleness counts from here.
    pub fn busy(&mut self, now: Instant) {
        self.last_output = now;
    }

    /// Follows the adapter's settle window after a read: `window` is how
    /// long a possible end it holds may take to become the end (`None`:
    /// it holds none). A window already open keeps its deadline.
    pub fn settling(&mut self, window: Option<Duration>, now: Instant) {
        self.settle_at = match (window, self.settle_at) {
            (None, _) => None,
            (Some(_), Some(at)) => Some(at),
            (Some(window), None) => Some(now + window),
        };
    }

    /// True if the settle window is open and passed at `now`.
    pub fn settle_due(&self, now: Instant) -> bool {
        self.settle_at.is_some_and(|at| now >= at)
    }

    /// The settle window is closed (the adapter is asked to settle).
    pub fn settled(&mut self) {
        self.settle_at = None;
    }

    /// True while `corral pause` holds the run frozen.
    pub fn is_paused(&self) -> bool {
        self.paused_since.is_some()
    }

    /// The run is frozen from `now` on.
    pub fn pause(&mut self, now: Instant) {
        self.paused_since.get_or_insert(now);
    }

    /// The run is thawed at `now`: every clock of the turn moves on by the
    /// time it was paused, which is returned (zero if it was not paused).
    pub fn resume(&mut self, now: Instant) -> Duration {
        let Some(since) = self.paused_since.take() else { return Duration::ZERO };
        let paused = now.saturating_duration_since(since);
        let shift = |at: Instant| at.checked_add(paused).unwrap_or(at);
        self.started = shift(self.started);
        self.last_output = shift(self.last_output);
        self.settle_at = self.settle_at.map(shift);
        paused
    }

    /// The time limit the turn has reached at `now`, if any. A turn that is
    /// over or paused reaches none.
    pub fn limit_reached(&self, now: Instant) -> Option<StopCause> {
        if self.turn_is_over() || self.is_paused() {
            return None;
        }
        let l = self.limits;
        if self.work_deadline().is_some_and(|at| now >= at) {
            l.timeout.map(StopCause::Timeout)
        } else if self.first_output.is_none() {
            l.startup_timeout.filter(|t| now.saturating_duration_since(self.started) >= *t).map(StopCause::Startup)
        } else {
            l.idle_timeout.filter(|t| now.saturating_duration_since(self.last_output) >= *t).map(StopCause::Idle)
        }
    }

    /// The earliest moment a clock of the turn may say something without
    /// input (the settle window, a limit); none while over or paused.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.turn_is_over() || self.is_paused() {
            return None;
        }
        let l = &self.limits;
        let quiet = match self.first_output {
            None => l.startup_timeout.and_then(|t| self.started.checked_add(t)),
            Some(_) => l.idle_timeout.and_then(|t| self.last_output.checked_add(t)),
        };
        [self.settle_at, self.work_deadline(), quiet].into_iter().flatten().min()
    }

    /// When the wall-clock `timeout` passes: it counts the agent's work in
    /// every turn, not the time spent waiting for child runs.
    fn work_deadline(&self) -> Option<Instant> {
        // No deadline a clock cannot hold: the limit is then never reached.
        self.limits.timeout.and_then(|t| self.started.checked_add(t.saturating_sub(self.worked)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn limits(timeout: u64, idle: u64, startup: u64) -> Limits {
        Limits {
            timeout: Some(S * timeout as u32),
            idle_timeout: Some(S * idle as u32),
            startup_timeout: Some(S * startup as u32),
            ..Limits::default()
        }
    }

    #[test]
    fn silence_before_any_output_is_a_startup_timeout_and_after_it_an_idle_one() {
        let t0 = Instant::now();
        let mut clock = Clock::new(limits(100, 10, 5), t0);
        assert_eq!(clock.limit_reached(t0 + 4 * S), None);
        assert_eq!(clock.limit_reached(t0 + 5 * S), Some(StopCause::Startup(5 * S)));
        clock.saw_output(t0 + 4 * S);
        assert_eq!(clock.limit_reached(t0 + 13 * S), None);
        assert_eq!(clock.next_deadline(), Some(t0 + 14 * S));
        assert_eq!(clock.limit_reached(t0 + 14 * S), Some(StopCause::Idle(10 * S)));
    }

    #[test]
    fn a_tool_call_running_is_work_not_idleness() {
        let t0 = Instant::now();
        let mut clock = Clock::new(limits(100, 10, 5), t0);
        clock.saw_output(t0);
        clock.busy(t0 + 9 * S);
        assert_eq!(clock.limit_reached(t0 + 15 * S), None);
    }

    #[test]
    fn a_pause_stops_every_clock_and_the_timeout_counts_work_over_turns() {
        let t0 = Instant::now();
        let mut clock = Clock::new(limits(20, 100, 100), t0);
        clock.saw_output(t0);
        clock.pause(t0 + 5 * S);
        assert_eq!(clock.limit_reached(t0 + 50 * S), None, "paused: no limit is reached");
        assert_eq!(clock.next_deadline(), None);
        assert_eq!(clock.resume(t0 + 35 * S), 30 * S);
        // 5 s worked before the pause: the timeout is 15 s after the thaw.
        assert_eq!(clock.next_deadline(), Some(t0 + 50 * S));
        clock.end_turn(t0 + 45 * S);
        assert_eq!(clock.limit_reached(t0 + 60 * S), None, "a turn that is over times out no more");
        // 15 s worked in all; a waiting parent's next turn has 5 s left.
        clock.next_turn(t0 + 100 * S);
        assert_eq!(clock.limit_reached(t0 + 104 * S), None);
        assert_eq!(clock.limit_reached(t0 + 105 * S), Some(StopCause::Timeout(20 * S)));
    }

    #[test]
    fn a_settle_window_keeps_its_first_deadline() {
        let t0 = Instant::now();
        let mut clock = Clock::new(Limits::default(), t0);
        clock.settling(Some(S), t0);
        clock.settling(Some(S), t0 + S / 2);
        assert!(!clock.settle_due(t0 + S / 2));
        assert!(clock.settle_due(t0 + S));
        assert_eq!(clock.next_deadline(), Some(t0 + S));
        clock.settling(None, t0 + S);
        assert!(!clock.settle_due(t0 + 2 * S));
    }
}
