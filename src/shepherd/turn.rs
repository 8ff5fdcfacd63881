//! One turn of a run: an agent process from spawn to reaping, and how its
//! end is told (its exit, a signal, the kernel's OOM killer).
//!
//! A continuation or reply turn starts a fresh [`Turn`]: nothing of the
//! last one's end carries over by accident.

use std::io;

use crate::adapter::{self, ProcessEnd, Verdict};
use crate::cost::resources::human_bytes;
use crate::process::ProcessId;
use crate::run::{RunStatus, StopReason};

/// The agent process of the current turn and what is known of its end.
pub(super) struct Turn {
    pub agent: ProcessId,
    /// How the agent ended, once reaped.
    pub agent_end: Option<ProcessEnd>,
    /// No process of the turn is left.
    pub children_gone: bool,
}

impl Turn {
    /// The turn of agent process `pid`, just started.
    pub fn start(pid: i32) -> io::Result<Turn> {
        let agent = ProcessId::of(pid).ok_or_else(|| io::Error::other("the agent has no /proc entry"))?;
        Ok(Turn { agent, agent_end: None, children_gone: false })
    }

    /// The agent's exit code and signal, as the store keeps them.
    pub fn exit(&self) -> (Option<i32>, Option<i32>) {
        match self.agent_end {
            Some(ProcessEnd::Exited(code)) => (Some(code), None),
            Some(ProcessEnd::Signaled(sig)) => (None, Some(sig)),
            None => (None, None),
        }
    }
}

/// How a process ended, in words.
pub(super) fn describe(end: ProcessEnd) -> String {
    match end {
        ProcessEnd::Exited(code) => format!("exit code {code}"),
        ProcessEnd::Signaled(sig) => format!("killed by {}", adapter::signal_name(sig)),
    }
}

/// What the kernel's OOM killer did to the run (it ended `killed`
/// processes of it, held to `memory_limit`), and what to do.
pub(super) fn out_of_memory_said(killed: u64, memory_limit: Option<u64>) -> String {
    let limit = memory_limit.map(|b| format!(" of {}", human_bytes(b))).unwrap_or_default();
    let what = if killed == 1 { "a process".to_string() } else { format!("{killed} processes") };
    format!(
        "the run ran out of memory: it used more than its memory limit{limit} and the kernel's OOM killer \
         ended {what} of it; raise `limits: {{memory: …}}` in the preset or `[limits]` in config.toml"
    )
}

/// The verdict on a run whose processes the kernel's OOM killer ended:
/// failed for memory, with what the agent's end said.
pub(super) fn out_of_memory(killed: u64, memory_limit: Option<u64>, said: &Verdict, end: ProcessEnd) -> Verdict {
    let mut error = out_of_memory_said(killed, memory_limit);
    if end != ProcessEnd::Signaled(libc::SIGKILL) {
        let then = said.error.clone().unwrap_or_else(|| format!("the agent ended: {}", describe(end)));
        error.push_str(&format!(" (then: {then})"));
    }
    Verdict { status: RunStatus::Failed, stop_reason: StopReason::OutOfMemory, error: Some(error) }
}
