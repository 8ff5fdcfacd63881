//! Adapters: each knows one agent CLI — how to invoke it headless, how to
//! read its stdout into normalized transcript events, what its terminal
//! event is, and how to conclude a run from it.
//!
//! The shepherd owns the process and the clock; an adapter only reads lines
//! and judges. It never sees a pipe, a pid or the store, which keeps every
//! adapter testable on captured output alone.

mod claude;
mod codex;
mod command;
mod gemini;
pub mod json;
mod opencode;
mod pi;
pub mod session_log;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::preset::Preset;
pub use crate::run::AgentKind;
use crate::run::{RunStatus, StopReason, Usage};
use crate::text::word::word_enum;

pub use claude::ClaudeAdapter;
pub use codex::CodexAdapter;
pub use command::{CommandAdapter, TASK_FILE};
pub use gemini::GeminiAdapter;
pub use opencode::OpencodeAdapter;
pub use pi::PiAdapter;

/// What the shepherd needs to start the agent: a program and its argv,
/// never a shell line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program, looked up on `PATH` if it has no slash.
    pub program: String,
    /// Its arguments; the task is one of them, verbatim (after every
    /// option, behind `--` where the CLI knows it), or it is `stdin`.
    pub args: Vec<String>,
    /// Variables added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// Text the agent reads on its standard input (else it reads nothing):
    /// for CLIs that cannot take any text as an argument.
    pub stdin: Option<String>,
    /// Files written (0600, the user's alone) before the agent starts, for
    /// what must not be in argv, which every local user can read: the
    /// commands a reply allowed, which often hold tokens.
    pub files: Vec<(PathBuf, String)>,
}

/// What an adapter may use to build an invocation.
#[derive(Debug, Clone)]
pub struct InvocationContext<'a> {
    /// The preset as launched.
    pub preset: &'a Preset,
    /// The task text, exactly as given.
    pub task: &'a str,
    /// The model override of this launch, else the preset's.
    pub model: Option<&'a str>,
    /// The run's folder (its files the agent reads: the task, settings).
    pub run_dir: PathBuf,
    /// The preset's body written to a file, for agents that read it from one.
    pub system_prompt_file: Option<PathBuf>,
    /// Tools allowed for this turn besides the preset's (a reply's
    /// `--allow-denied`), as the agent's permission rules write them.
    pub allowed: &'a [String],
}

/// The folder of the run's folder its agent writes (pi's session): the
/// only one of Corral's a sandboxed agent may write.
pub fn agent_dir(run_dir: &std::path::Path) -> PathBuf {
    run_dir.join("agent")
}

/// Why an invocation cannot be built from a preset.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvocationError {
    /// A `command` preset without a command.
    #[error("preset '{preset}' has agent 'command' but no `command:` list: add e.g. `command: [cargo, test]`")]
    MissingCommand { preset: String },
}

word_enum! {
    /// What one transcript event is.
    pub enum EventKind as "event kind" {
        /// Text the assistant wrote.
        Text = "text",
        /// The assistant's visible reasoning.
        Thinking = "thinking",
        /// A tool call with its arguments.
        ToolCall = "tool_call",
        /// A tool's result.
        ToolResult = "tool_result",
        /// An error the agent reported.
        Error = "error",
        /// A retry of a failed model call (progress, not an ending).
        Retry = "retry",
        /// Token usage update.
        Usage = "usage",
        /// Plain program output (the `command` adapter, and lines that are not
        /// events of the agent's stream).
        Output = "output",
        /// Something the agent or Corral noted about the run.
        System = "system",
        /// What the user said to the agent after the task (`corral reply`).
        User = "user",
        /// What the agent's process wrote to its standard error, in order
        /// with the rest.
        Stderr = "stderr",
        /// Something the run's sandbox refused (a write, a read, a host).
        Denial = "denial",
    }
}

/// One normalized transcript item, as stored in the `events` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEvent {
    /// What it is.
    pub kind: EventKind,
    /// Its human text (what search finds).
    pub text: String,
    /// Structured detail (tool arguments, usage, the raw event), if any.
    pub json: Option<serde_json::Value>,
}

impl TranscriptEvent {
    /// An event with text only.
    pub fn text(kind: EventKind, text: impl Into<String>) -> Self {
        TranscriptEvent { kind, text: text.into(), json: None }
    }
}

/// One line of the agent's stdout, without its LF. A line over the
/// shepherd's budget arrives cut, with the count of bytes dropped.
#[derive(Debug, Clone, Copy)]
pub struct StreamLine<'a> {
    /// The line's bytes (possibly cut), not necessarily UTF-8.
    pub bytes: &'a [u8],
    /// Bytes dropped from the end of an oversized line.
    pub dropped: u64,
}

/// The adapter's judgment of how a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `Completed` or `Failed`.
    pub status: RunStatus,
    /// Why.
    pub stop_reason: StopReason,
    /// What went wrong, for failures.
    pub error: Option<String>,
}

/// How the agent's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessEnd {
    /// It exited with a code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
}

/// What an adapter learned from the stream, besides the verdict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// The agent's final answer.
    pub final_text: Option<String>,
    /// The model the agent says it used.
    pub resolved_model: Option<String>,
    /// Token counts.
    pub usage: Usage,
    /// Cost in USD, when the agent reports one (or Corral estimated it).
    pub cost_usd: Option<f64>,
    /// The cost is Corral's estimate from the usage (see `price`).
    pub cost_estimated: bool,
    /// The agent's session id, for resuming.
    pub session_id: Option<String>,
    /// Tool calls the agent was refused (`Bash(npm test)`), in order.
    pub denied: Vec<String>,
}

/// One agent CLI's invocation and stream rules.
pub trait Adapter: Send {
    /// The program and argv for this launch.
    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError>;

    /// Reads one stdout line, appending transcript events to `out`. Returns
    /// the verdict when this line is the agent's terminal event.
    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict>;

    /// Hands over anything the adapter buffered, before a store commit.
    fn flush(&mut self, _out: &mut Vec<TranscriptEvent>) {}

    /// While the stream has shown a possible end that the next line could
    /// still retract (pi's `agent_end` before a retry), how long to wait for
    /// that line before [`Adapter::settle`] makes it the end.
    fn settling(&self) -> Option<Duration> {
        None
    }

    /// The possible end, confirmed by silence.
    fn settle(&mut self) -> Option<Verdict> {
        None
    }

    /// True while a tool call is in flight: silence then is work, not idleness.
    fn busy(&self) -> bool {
        false
    }

    /// The invocation of a continuation turn in the same session, if this
    /// agent can resume one: `ctx.task` is the continuation prompt and
    /// `session_id` the id the stream reported. `None`: it cannot.
    fn resume_invocation(&self, _ctx: &InvocationContext<'_>, _session_id: &str) -> Option<Invocation> {
        None
    }

    /// True if [`InvocationContext::allowed`] reaches the agent: it can be
    /// told to allow exactly the tool calls it was refused.
    fn allows_tools(&self) -> bool {
        false
    }

    /// The session file the agent writes its spend to as it works, where
    /// its stream says usage only at a turn's end (Codex, Gemini CLI).
    fn session_log(&self) -> Option<session_log::Format> {
        None
    }

    /// True if the stream's usage covers the whole session (Codex), so a
    /// continuation's usage replaces the earlier turn's instead of adding.
    fn usage_is_cumulative(&self) -> bool {
        false
    }

    /// True if the agent stops cleanly on SIGINT and should get it before
    /// SIGTERM (Codex).
    fn interrupts_first(&self) -> bool {
        false
    }

    /// The places under the user's home the agent writes to work (its
    /// config, sessions, credentials; a folder ends with `/`): a sandbox
    /// always lets it.
    fn own_files(&self) -> &'static [&'static str] {
        &[]
    }

    /// What of its own files is its history (other sessions' transcripts,
    /// logs, an installed copy of itself): not carried into a sandboxed
    /// run's copy of them.
    fn own_history(&self) -> &'static [&'static str] {
        &[]
    }

    /// The prefixes of the variables the agent reads (keys, base URLs): a
    /// sandbox that keeps only some variables keeps these too.
    fn own_env(&self) -> &'static [&'static str] {
        &[]
    }

    /// The hosts of the agent's API, for a sandbox's `network: [agent]`:
    /// its vendor's, and those its environment (`env`) and config files
    /// under `home` point it at.
    fn api_hosts(&self, _env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        Vec::new()
    }

    /// The verdict when the process ended without a terminal event.
    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict;

    /// What the stream said so far.
    fn report(&self) -> Report;
}

/// The adapter for an agent kind, fresh for one run.
pub fn for_agent(agent: AgentKind) -> Box<dyn Adapter> {
    match agent {
        AgentKind::Pi => Box::<PiAdapter>::default(),
        AgentKind::Claude => Box::<ClaudeAdapter>::default(),
        AgentKind::Codex => Box::<CodexAdapter>::default(),
        AgentKind::Gemini => Box::<GeminiAdapter>::default(),
        AgentKind::Opencode => Box::<OpencodeAdapter>::default(),
        AgentKind::Command => Box::<CommandAdapter>::default(),
    }
}

impl Report {
    /// The report of a run whose session went on in a continuation turn:
    /// `next` is the continuation's. Texts and ids come from the latest turn
    /// that has them; usage and cost add up unless `cumulative`.
    pub fn then(&self, next: &Report, cumulative: bool) -> Report {
        let (usage, cost_usd) = if cumulative {
            (next.usage, next.cost_usd.or(self.cost_usd))
        } else {
            let usage = self.usage + next.usage;
            let cost = match (self.cost_usd, next.cost_usd) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
            };
            (usage, cost)
        };
        Report {
            final_text: next.final_text.clone().or_else(|| self.final_text.clone()),
            resolved_model: next.resolved_model.clone().or_else(|| self.resolved_model.clone()),
            usage,
            cost_usd,
            session_id: next.session_id.clone().or_else(|| self.session_id.clone()),
            cost_estimated: self.cost_estimated || next.cost_estimated,
            denied: self.denied.iter().chain(&next.denied).cloned().collect(),
        }
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary; returns how
/// many bytes were dropped.
pub(crate) fn truncate_at_char(text: &mut String, max: usize) -> usize {
    if text.len() <= max {
        return 0;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let dropped = text.len() - end;
    text.truncate(end);
    dropped
}

/// The likeliest reason in a stderr tail, trimmed: its last line that is
/// not a stack trace or a runtime's footer. A Rust panic's backtrace is cut
/// at `stack backtrace:` (the message is above it), and frames (`at …`,
/// `13: <unknown>`), `Node.js v20…` and `note: run with RUST_BACKTRACE…`
/// are passed over: "exited with code 1: 13: <unknown>" said nothing.
pub(crate) fn last_line(stderr_tail: &str) -> Option<&str> {
    let before_backtrace = match stderr_tail.find("\nstack backtrace:") {
        Some(at) => &stderr_tail[..at],
        None => stderr_tail,
    };
    let noise = |line: &str| {
        let frame = line.split_once(": ").is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        frame
            || line.starts_with("at ")
            || line.starts_with("Node.js v")
            || line.starts_with("note: run with `RUST_BACKTRACE")
            || line.starts_with("note: Some details are omitted")
    };
    let lines = || before_backtrace.lines().rev().map(str::trim).filter(|l| !l.is_empty());
    lines().find(|l| !noise(l)).or_else(|| lines().next())
}

/// `what`, followed by `: hint` when there is one.
pub(crate) fn with_hint(what: String, hint: Option<&str>) -> String {
    match hint {
        Some(h) => format!("{what}: {h}"),
        None => what,
    }
}

/// Describes a signal by name: `SIGKILL (9)`.
pub fn signal_name(signal: i32) -> String {
    match nix::sys::signal::Signal::try_from(signal) {
        Ok(sig) => format!("{} ({signal})", sig.as_str()),
        Err(_) => format!("signal {signal}"),
    }
}

/// The version of each agent CLI whose stream Corral was built and tested
/// against (the real CLIs the tests run, pinned in `scripts/setup.sh`).
/// Another minor version usually streams the same; `corral doctor` says
/// when one differs.
pub fn tested_version(agent: AgentKind) -> Option<&'static str> {
    match agent {
        AgentKind::Claude => Some("2.1.197"),
        AgentKind::Codex => Some("0.169.0"),
        AgentKind::Pi => Some("0.73.1"),
        AgentKind::Gemini => Some("0.61.0"),
        AgentKind::Opencode => Some("1.18.33"),
        AgentKind::Command => None,
    }
}
