//! The `command` adapter: any program. There is no stream protocol, so the
//! run ends when the process does: exit 0 is completed, anything else failed
//! with the code or signal. The final text is the last lines of output.

use std::collections::VecDeque;

use super::{
    signal_name, Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// How many trailing lines make the final text.
const FINAL_LINES: usize = 20;
/// Longest kept line of the final text, in bytes.
const FINAL_LINE_MAX: usize = 2000;
/// The argument replaced by the task text.
pub const TASK_PLACEHOLDER: &str = "{task}";
/// An output event is cut after the line that takes it past this size.
const EVENT_BYTES: usize = 16 << 10;
/// The variable naming the file that holds the task (`task.txt`, 0600, in
/// the run's folder), whatever its size.
pub const TASK_FILE_ENV: &str = "CORRAL_TASK_FILE";
/// That file's name in the run's folder.
pub const TASK_FILE: &str = "task.txt";
/// The longest task also put in `CORRAL_TASK`.
pub const TASK_ENV_MAX: usize = 64 << 10;
/// The variable that carries the task to a `command` run.
pub const TASK_ENV: &str = "CORRAL_TASK";

/// Reads plain output. Lines are grouped into one `output` event per store
/// commit rather than a row per line.
#[derive(Debug, Default)]
pub struct CommandAdapter {
    pending: String,
    last_lines: VecDeque<String>,
}

impl Adapter for CommandAdapter {
    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let (program, rest) = preset
            .command
            .split_first()
            .ok_or_else(|| InvocationError::MissingCommand { preset: preset.name.clone() })?;
        let args = rest
            .iter()
            .chain(&preset.args)
            .map(|arg| if arg == TASK_PLACEHOLDER { ctx.task.to_string() } else { arg.clone() })
            .collect();
        // The whole task is in a private file; the variable too while it is
        // short enough for one (the kernel takes 128 KiB per variable).
        let mut env = vec![(TASK_FILE_ENV.to_string(), ctx.run_dir.join(TASK_FILE).to_string_lossy().into_owned())];
        if ctx.task.len() <= TASK_ENV_MAX {
            env.push((TASK_ENV.to_string(), ctx.task.to_string()));
        }
        if let Some(model) = ctx.model {
            env.push(("CORRAL_MODEL".to_string(), model.to_string()));
        }
        Ok(Invocation { program: program.clone(), args, env, stdin: None, files: Vec::new() })
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        let mut text = String::from_utf8_lossy(line.bytes).into_owned();
        if line.dropped > 0 {
            text.push_str(&format!(" …[{} bytes cut]", line.dropped));
        }
        self.pending.push_str(&text);
        self.pending.push('\n');
        // Output that floods comes as events of a bounded size: search,
        // tail and the window then never handle megabytes at once.
        if self.pending.len() >= EVENT_BYTES {
            self.flush(out);
        }
        if self.last_lines.len() == FINAL_LINES {
            self.last_lines.pop_front();
        }
        self.last_lines.push_back(cut(text, FINAL_LINE_MAX));
        None
    }

    fn flush(&mut self, out: &mut Vec<TranscriptEvent>) {
        if !self.pending.is_empty() {
            let text = std::mem::take(&mut self.pending);
            out.push(TranscriptEvent::text(EventKind::Output, text));
        }
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        verdict_from_end(end, stderr_tail)
    }

    fn report(&self) -> Report {
        let lines: Vec<&str> = self.last_lines.iter().map(String::as_str).collect();
        let text = lines.join("\n").trim_end().to_string();
        Report { final_text: (!text.is_empty()).then_some(text), ..Report::default() }
    }
}

/// The verdict for a process that ended without a terminal event.
pub(super) fn verdict_from_end(end: ProcessEnd, stderr_tail: &str) -> Verdict {
    let with_stderr = |what: String| super::with_hint(what, super::last_line(stderr_tail));
    match end {
        ProcessEnd::Exited(0) => {
            Verdict { status: RunStatus::Completed, stop_reason: StopReason::ExitCode, error: None }
        }
        ProcessEnd::Exited(code) => Verdict {
            status: RunStatus::Failed,
            stop_reason: StopReason::ExitCode,
            error: Some(with_stderr(format!("exited with code {code}"))),
        },
        ProcessEnd::Signaled(sig) => Verdict {
            status: RunStatus::Failed,
            stop_reason: StopReason::Signal,
            error: Some(with_stderr(format!("killed by {}", signal_name(sig)))),
        },
    }
}

fn cut(mut text: String, max: usize) -> String {
    if super::truncate_at_char(&mut text, max) > 0 {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_text_is_the_last_lines() {
        let mut a = CommandAdapter::default();
        let mut out = Vec::new();
        for i in 0..30 {
            let line = format!("line {i}");
            a.read_line(StreamLine { bytes: line.as_bytes(), dropped: 0 }, &mut out);
        }
        let text = a.report().final_text.unwrap();
        assert!(text.starts_with("line 10\n"), "{text}");
        assert!(text.ends_with("line 29"));
        a.flush(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].text.lines().count(), 30);
    }

    #[test]
    fn exit_codes_and_signals_decide() {
        let v = verdict_from_end(ProcessEnd::Exited(3), "warning\nboom: no such file\n");
        assert_eq!(v.status, RunStatus::Failed);
        assert_eq!(v.error.as_deref(), Some("exited with code 3: boom: no such file"));
        // A Rust panic with its backtrace, a Node error with its stack: the
        // message, not the last frame or the runtime's footer.
        let panic = "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:\n   0: rust_begin_unwind\n  13: <unknown>\nnote: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        assert_eq!(
            verdict_from_end(ProcessEnd::Exited(101), panic).error.as_deref(),
            Some("exited with code 101: boom")
        );
        let short = "thread 'main' panicked at src/main.rs:2:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            verdict_from_end(ProcessEnd::Exited(101), short).error.as_deref(),
            Some("exited with code 101: boom")
        );
        let node = "/x.js:1\nError: no config\n    at Object.<anonymous> (/x.js:1:7)\n    at node:internal/main:1:1\n\nNode.js v20.19.0\n";
        assert_eq!(
            verdict_from_end(ProcessEnd::Exited(1), node).error.as_deref(),
            Some("exited with code 1: Error: no config")
        );
        let v = verdict_from_end(ProcessEnd::Signaled(9), "");
        assert_eq!(v.error.as_deref(), Some("killed by SIGKILL (9)"));
        assert_eq!(verdict_from_end(ProcessEnd::Exited(0), "").status, RunStatus::Completed);
    }
}
