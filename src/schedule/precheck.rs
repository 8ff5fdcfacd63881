//! A schedule's precheck: a command run before a fire, in a cgroup of its
//! own where one can be made (else its own process group, its processes
//! marked in their environment so a detached one is found too), with a
//! timeout that holds: what it leaves holding its output is not waited
//! for, so one precheck never stops a firer's other schedules.
//! Exit 0 means there is work; its output lines are the items of an `each`
//! schedule. Anything else (an exit code, a signal, the timeout, a program
//! that cannot start) means nothing to do, and the fire says why.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Precheck;
use crate::cost::resources::ResourceLimits;
use crate::process::{self, cgroup::RunCgroup, PidFd, ProcessId, Sig};

/// Most bytes of a precheck's output kept (items and what it said).
const OUTPUT_MAX: usize = 64 << 10;
/// How long, once it ended, what it printed is read to its end (a
/// process it left may hold its output open for ever).
const OUTPUT_GRACE: Duration = Duration::from_secs(1);
/// The variable marking a precheck's processes (value: its label): a
/// process that left its group is still found by it.
const MARK_ENV: &str = "CORRAL_PRECHECK";

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
/// `cgroups`: make one where one can be (config.toml's `cgroups`).
pub(super) fn run(
    precheck: &Precheck,
    label: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    cgroups: bool,
    mut started: impl FnMut(Option<ProcessId>, Option<&Path>),
) -> Checked {
    let Some((program, args)) = precheck.command.split_first() else {
        return Checked::Nothing("the precheck is empty".into());
    };
    let group = match cgroups {
        true => RunCgroup::create(label, &ResourceLimits::default()).ok().map(|(group, _)| group),
        false => None,
    };
    if let Some(group) = &group {
        started(None, Some(group.dir()));
    }
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd).env_clear().envs(env.iter().cloned()).env(MARK_ENV, label);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    process::prepare_run_command(&mut command, group.as_ref().map(RunCgroup::join).unwrap_or_default());
    let checked = match command.spawn() {
        Ok(child) => {
            if let Some(process) = ProcessId::of(child.id() as i32) {
                started(Some(process), group.as_ref().map(RunCgroup::dir));
            }
            wait(child, Duration::from_secs(precheck.timeout_secs), group.as_ref(), label)
        }
        Err(e) => Checked::Nothing(format!("the precheck '{program}' cannot start: {e}")),
    };
    if let Some(group) = group {
        let _ = group.kill();
        let _ = group.remove();
    }
    checked
}

/// What a reader thread kept of one pipe, handed over when the pipe ends
/// (or taken as it is, once the grace is over).
type Kept = std::sync::Arc<std::sync::Mutex<Pipe>>;

/// One pipe's output as kept: its head (the items), and its tail (why it
/// found nothing: a program's errors come last).
#[derive(Debug, Default, Clone)]
struct Pipe {
    head: Vec<u8>,
    /// More came than the head holds.
    cut: bool,
    /// The last bytes of all it printed, at most twice [`SAID_KEPT`].
    tail: Vec<u8>,
    /// How many bytes it printed in all.
    total: u64,
}

/// Waits for the precheck, at most `timeout`, reading what it prints.
fn wait(mut child: std::process::Child, timeout: Duration, group: Option<&RunCgroup>, label: &str) -> Checked {
    let pgid = child.id() as i32;
    let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        let kept: Kept = Default::default();
        let shared = std::sync::Arc::clone(&kept);
        let ended = ended_tx.clone();
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                // Read to the end (a full pipe must not stall it), keep the head.
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    let Ok(mut kept) = shared.lock() else { return };
                    let room = OUTPUT_MAX.saturating_sub(kept.head.len());
                    kept.cut |= n > room;
                    kept.head.extend_from_slice(&chunk[..n.min(room)]);
                    kept.total += n as u64;
                    kept.tail.extend_from_slice(&chunk[..n]);
                    if kept.tail.len() > 2 * SAID_KEPT {
                        let drop = kept.tail.len() - SAID_KEPT;
                        kept.tail.drain(..drop);
                    }
                }
            }
            let _ = ended.send(());
        });
        kept
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
    // Whatever it started goes with it: its group, its cgroup, and those
    // that left its group (found by their mark).
    stop(Some(pgid), group, label);
    let status = match status {
        Some(status) => Some(status),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    };
    // Its output to its end, unless something it left (its mark scrubbed)
    // holds it open: then what came within the grace.
    drop(ended_tx);
    let grace = Instant::now() + OUTPUT_GRACE;
    for _ in 0..2 {
        if ended.recv_timeout(grace.saturating_duration_since(Instant::now())).is_err() {
            break;
        }
    }
    let taken = |kept: &Kept| kept.lock().map(|k| k.clone()).unwrap_or_default();
    let (out, err) = (taken(&stdout), taken(&stderr));
    // A line cut at the bound is not an item: only whole lines are.
    let mut items = out.head.clone();
    if out.cut {
        items.truncate(items.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1));
    }
    let items = String::from_utf8_lossy(&items).into_owned();
    // Its last words say why (as a program's errors come last), kept
    // short: the fire's outcome is a line, kept for a thousand fires.
    let said = |what: String| {
        let tail = |p: &Pipe| String::from_utf8_lossy(&p.tail).trim().to_string();
        let (out_tail, err_tail) = (tail(&out), tail(&err));
        let printed =
            [out_tail.as_str(), err_tail.as_str()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
        if printed.is_empty() {
            return what;
        }
        let mut from = printed.len().saturating_sub(SAID_KEPT);
        while !printed.is_char_boundary(from) {
            from += 1;
        }
        // What the tails never held, and what of them is not shown.
        let untold = (out.total + err.total).saturating_sub((out.tail.len() + err.tail.len()) as u64);
        match untold + from as u64 {
            0 => format!("{what}: {printed}"),
            before => format!("{what}: ({before} bytes before these not kept) …{}", &printed[from..]),
        }
    };
    match status {
        Some(status) if status.success() => {
            Checked::Work(items.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect())
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

/// How much of what a precheck that found nothing printed is kept with its
/// fire: the end of it.
const SAID_KEPT: usize = 1024;

/// Kills every process of the precheck `label`: its process group
/// (`pgid`), its cgroup, and any process marked with its label.
fn stop(pgid: Option<i32>, group: Option<&RunCgroup>, label: &str) {
    if let Some(pgid) = pgid {
        let _ = process::signal_group(pgid, Sig::Kill);
    }
    if let Some(group) = group {
        let _ = group.kill();
    }
    for marked in process::processes_with_env(MARK_ENV, label) {
        // Its group only while it is still that very process (a group's
        // id stays its leader's while any member lives).
        if marked.is_alive() && process::group_of(marked.pid) == Some(marked.pid) {
            let _ = process::signal_group(marked.pid, Sig::Kill);
        }
        let _ = marked.signal(Sig::Kill);
    }
}

/// Stops precheck `label`, whose firer died: its cgroup killed and
/// removed, its process group if it is still that very process, and what
/// carries its mark.
pub(super) fn stop_left(process: Option<ProcessId>, cgroup: Option<&str>, label: &str) {
    if let Some(dir) = cgroup {
        let containment = crate::cost::resources::Containment { cgroup: Some(dir.to_string()), ..Default::default() };
        if let Some(group) = RunCgroup::open(&containment) {
            let _ = group.kill();
            let _ = group.remove();
        }
    }
    let pgid = process.filter(|p| p.is_alive()).map(|p| p.pid);
    stop(pgid, None, label);
}

/// The label of fire `fire`'s precheck of schedule `name`: its cgroup's
/// name and its processes' mark.
pub(super) fn label(name: &str, fire: i64) -> String {
    format!("precheck-{name}-{fire}")
}
