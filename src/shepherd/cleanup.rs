//! The stop sequence, and the log of every signal sent.
//!
//! After an outcome: a grace for the agent to exit by itself, then SIGTERM
//! (with SIGCONT, so a stopped process can act on it) to its group, then,
//! after the stop grace, SIGKILL to the group and to every other descendant
//! — including `setsid` escapees, which the shepherd inherits as subreaper,
//! and anything carrying the run's id in its environment — repeated until
//! none is left.

use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

use crate::process::{self, Sig};
use crate::time;

/// How often the final SIGKILL sweep repeats while processes remain.
const KILL_SWEEP: Duration = Duration::from_millis(20);

/// Where the sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing asked yet.
    Idle,
    /// The outcome is in; the agent may still exit by itself until then.
    Grace { until: Instant },
    /// The group was asked to stop; SIGKILL comes at `until`.
    Terminated { until: Instant },
    /// Everything left is being killed; next sweep at `next`.
    Killing { next: Instant },
}

/// Drives the stop sequence of one run.
pub(super) struct Cleanup {
    stage: Stage,
    run_id: String,
    shepherd: i32,
    pgid: i32,
    exit_grace: Duration,
    stop_grace: Duration,
    /// The first signal of a stop: SIGTERM, or SIGINT for agents that stop
    /// cleanly on it.
    first: Sig,
    log: File,
}

impl Cleanup {
    pub(super) fn new(
        run_id: &str,
        shepherd: i32,
        pgid: i32,
        (exit_grace, stop_grace): (Duration, Duration),
        first: Sig,
        log: File,
    ) -> Cleanup {
        Cleanup { stage: Stage::Idle, run_id: run_id.to_string(), shepherd, pgid, exit_grace, stop_grace, first, log }
    }

    /// A new agent process (a continuation turn) leads the run's group now.
    pub(super) fn restart(&mut self, pgid: i32) {
        self.stage = Stage::Idle;
        self.pgid = pgid;
    }

    /// The agent's turn is over: give its processes their exit grace.
    pub(super) fn after_outcome(&mut self, now: Instant) {
        if self.stage == Stage::Idle {
            self.stage = Stage::Grace { until: now + self.exit_grace };
        }
    }

    /// Stop now: signal the group (SIGTERM or SIGINT, then SIGCONT so a
    /// stopped process can act on it), then SIGKILL after the stop grace.
    /// Does nothing if the sequence is already past this point.
    pub(super) fn stop(&mut self, now: Instant, why: &str) {
        if matches!(self.stage, Stage::Idle | Stage::Grace { .. }) {
            self.note(&format!("stopping: {why}"));
            self.signal_group(self.first);
            self.signal_group(Sig::Cont);
            self.stage = Stage::Terminated { until: now + self.stop_grace };
        }
    }

    /// When the sequence next needs to act.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Idle => None,
            Stage::Grace { until } | Stage::Terminated { until } => Some(until),
            Stage::Killing { next } => Some(next),
        }
    }

    /// Advances the sequence if its deadline has passed.
    pub(super) fn tick(&mut self, now: Instant) {
        match self.stage {
            Stage::Grace { until } if now >= until => {
                self.stop(now, "exit grace is over and processes remain");
            }
            Stage::Terminated { until } if now >= until => {
                self.note("stop grace is over");
                self.kill_all();
                self.stage = Stage::Killing { next: now + KILL_SWEEP };
            }
            Stage::Killing { next } if now >= next => {
                self.kill_all();
                self.stage = Stage::Killing { next: now + KILL_SWEEP };
            }
            _ => {}
        }
    }

    /// Every live process of this run other than the shepherd: its
    /// descendants (orphans included, adopted as subreaper) and anything
    /// carrying the run's id. Shepherds of other runs the shepherd adopted
    /// (runs launched from this one) are not this run's, nor their trees.
    pub(super) fn own_processes(&self) -> Vec<i32> {
        let me = self.shepherd;
        let mut pids = process::descendants(me, |pid| pid != me && process::has_env_var(pid, super::SHEPHERD_ENV));
        for pid in process::pids_with_env(super::RUN_ID_ENV, &self.run_id) {
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        pids
    }

    /// SIGKILL to the agent's group and every other process of the run.
    pub(super) fn kill_all(&mut self) {
        self.signal_group(Sig::Kill);
        let others = self.own_processes();
        if !others.is_empty() {
            let list: Vec<String> = others.iter().map(i32::to_string).collect();
            self.note(&format!("SIGKILL -> pids {}", list.join(" ")));
            for pid in others {
                let _ = process::signal_pid(pid, Sig::Kill);
            }
        }
    }

    /// Appends a timestamped line to `signals.log`.
    pub(super) fn note(&mut self, what: &str) {
        // Losing a log line must never disturb supervision.
        let _ = writeln!(self.log, "{} {what}", time::format(time::now()));
    }

    fn signal_group(&mut self, sig: Sig) {
        let result = process::signal_group(self.pgid, sig);
        let suffix = match result {
            Ok(()) => String::new(),
            Err(e) => format!(" (failed: {e})"),
        };
        self.note(&format!("{} -> group {}{suffix}", sig.name(), self.pgid));
    }
}
