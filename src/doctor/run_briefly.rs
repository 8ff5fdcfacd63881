//! Running a program the doctor asks something (`claude --version`, `git
//! config user.name`), given a few seconds at most: a CLI that hangs (one
//! waiting for a login prompt, say) must not hang the doctor.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a program may take to answer: Node CLIs answer `--version` in
/// half a second on an idle machine, but took over 10 s on a loaded one.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// What a program said, or why it said nothing.
pub enum Answer {
    /// It exited 0; its stdout and stderr, trimmed.
    Said(String),
    /// It exited otherwise.
    Failed(String),
    /// It could not be started.
    NotStarted(std::io::Error),
    /// It took longer than [`ANSWER_WITHIN`] (it was killed).
    Hung,
}

/// Runs `command` with no stdin and waits up to [`ANSWER_WITHIN`].
pub fn run(mut command: Command) -> Answer {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Answer::NotStarted(e),
    };
    let (Some(mut out), Some(mut err)) = (child.stdout.take(), child.stderr.take()) else {
        return Answer::Hung;
    };
    // Held by a pidfd while it is still ours to reap: killed at the
    // deadline, it is this very child, never a process that took its pid
    // after it was reaped.
    let held =
        crate::process::ProcessId::of(child.id() as i32).and_then(|p| crate::process::PidFd::open(p).ok().flatten());
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        let _ = err.read_to_string(&mut text);
        let status = child.wait();
        let _ = done.send((status, text));
    });
    match finished.recv_timeout(ANSWER_WITHIN) {
        Ok((Ok(status), text)) if status.success() => Answer::Said(text.trim().to_string()),
        Ok((_, text)) => Answer::Failed(text.trim().to_string()),
        Err(_) => {
            if let Some(held) = &held {
                let _ = held.signal(crate::process::Sig::Kill);
            }
            Answer::Hung
        }
    }
}

/// The first `x.y` or `x.y.z` in `text`.
pub fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .find(|w| w.split('.').count() >= 2 && w.split('.').all(|p| !p.is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_versions_as_agent_clis_print_them() {
        assert_eq!(version_in("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(version_in("codex-cli 0.169.0").as_deref(), Some("0.169.0"));
        assert_eq!(version_in("git version 2.39.5").as_deref(), Some("2.39.5"));
        assert_eq!(version_in("v1.18.33\n").as_deref(), Some("1.18.33"));
        assert_eq!(version_in("no version here 5"), None);
    }
}
