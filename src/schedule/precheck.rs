//! A schedule's precheck: a command run before a fire, in a cgroup of its
//! own where one can be made (else its own process group), with a timeout.
//! Exit 0 means there is work; its output lines are the items of an `each`
//! schedule. Anything else (an exit code, a signal, the timeout, a program
//! that cannot start) means nothing to do, and the fire says why.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Precheck;
use crate::process::{self, cgroup::RunCgroup, PidFd, ProcessId, Sig};
use crate::resources::ResourceLimits;

/// Most bytes of a precheck's output kept (items and what it said).
const OUTPUT_MAX: usize = 64 << 10;

/// What a precheck said.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Checked {
    /// Exit 0: there is work; its output, line by line (blank lines left
    /// out).
    Work(Vec<String>),
    /// Nothing to do, and why in words (the exit, the timeout, a program
    /// that cannot start), with what it printed.
    Nothing(String),
}

/// Runs `precheck` in `cwd` with `env`; `label` names its cgroup.
/// `started` is told its cgroup before it starts, then its process as soon
/// as it runs (so a settler can stop it if this process dies at any time:
/// the cgroup holds all it starts).
pub(super) fn run(
    precheck: &Precheck,
    label: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    mut started: impl FnMut(Option<ProcessId>, Option<&Path>),
) -> Checked {
    let Some((program, args)) = precheck.command.split_first() else {
        return Checked::Nothing("the precheck is empty".into());
    };
    let group = RunCgroup::create(label, &ResourceLimits::default()).ok().map(|(group, _)| group);
    if let Some(group) = &group {
        started(None, Some(group.dir()));
    }
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd).env_clear().envs(env.iter().cloned());
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    process::prepare_run_command(&mut command, group.as_ref().map(RunCgroup::join).unwrap_or_default());
    let checked = match command.spawn() {
        Ok(child) => {
            if let Some(process) = ProcessId::of(child.id() as i32) {
                started(Some(process), group.as_ref().map(RunCgroup::dir));
            }
            wait(child, Duration::from_secs(precheck.timeout_secs), group.as_ref())
        }
        Err(e) => Checked::Nothing(format!("the precheck '{program}' cannot start: {e}")),
    };
    if let Some(group) = group {
        let _ = group.kill();
        let _ = group.remove();
    }
    checked
}

/// Waits for the precheck, at most `timeout`, reading what it prints.
fn wait(mut child: std::process::Child, timeout: Duration, group: Option<&RunCgroup>) -> Checked {
    let pgid = child.id() as i32;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let Some(mut pipe) = pipe else { return kept };
            // Read to the end (a full pipe must not stall it), keep the head.
            let mut chunk = [0u8; 8192];
            let mut cut = false;
            while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                let room = OUTPUT_MAX.saturating_sub(kept.len());
                cut |= n > room;
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            // A line cut at the bound is not an item: only whole lines are.
            if cut {
                kept.truncate(kept.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1));
            }
            kept
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let exited = ProcessId::of(pgid).and_then(|id| PidFd::open(id).ok().flatten());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Err(_) => break None,
            Ok(None) => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break None;
        }
        match &exited {
            Some(fd) => {
                let _ = process::wait_readable(&[std::os::fd::AsFd::as_fd(fd)], Some(left));
            }
            // No pidfd here: look again shortly.
            None => std::thread::sleep(left.min(Duration::from_millis(20))),
        }
    };
    // Whatever it started goes with it: its group, its cgroup.
    let _ = process::signal_group(pgid, Sig::Kill);
    if let Some(group) = group {
        let _ = group.kill();
    }
    let status = match status {
        Some(status) => Some(status),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    let out = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    let said = |what: String| {
        let printed = [out.trim(), err.trim()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
        if printed.is_empty() {
            what
        } else {
            format!("{what}: {printed}")
        }
    };
    match status {
        Some(status) if status.success() => {
            Checked::Work(out.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
        }
        Some(status) => match status.code() {
            Some(code) => Checked::Nothing(said(format!("the precheck exited with {code}"))),
            None => Checked::Nothing(said("the precheck was killed by a signal".to_string())),
        },
        None => Checked::Nothing(said(format!(
            "the precheck did not finish within {} and was stopped",
            humantime::format_duration(timeout)
        ))),
    }
}

/// Stops a precheck whose firer died: its cgroup killed and removed, else
/// its process group, if it is still that very process.
pub(super) fn stop_left(process: Option<ProcessId>, cgroup: Option<&str>) {
    if let Some(dir) = cgroup {
        let containment = crate::resources::Containment { cgroup: Some(dir.to_string()), ..Default::default() };
        if let Some(group) = RunCgroup::open(&containment) {
            let _ = group.kill();
            let _ = group.remove();
            return;
        }
    }
    if let Some(process) = process.filter(|p| p.is_alive()) {
        let _ = process::signal_group(process.pid, Sig::Kill);
    }
}
