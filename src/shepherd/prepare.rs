//! Before the agent starts: its git worktree, what the checkout ignores
//! that `.worktreeinclude` names carried into it, and the preset's `setup`.
//!
//! The worktree is created by the shepherd (not at launch), so a queued run
//! branches when it starts and the time goes to the run. `setup` runs in
//! the agent's folder with the run's environment, its own process group
//! and PDEATHSIG like the agent; its output goes to the transcript. A stop
//! (an abort) while it runs kills it at once: nobody waits for `npm ci` to
//! finish a run that was told to stop.

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use super::spawn::AgentLaunch;
use crate::adapter::{EventKind, TranscriptEvent};
use crate::home;
use crate::process::{self, Sig, SignalPipe};
use crate::run::Run;
use crate::store::{Store, StoreError};

/// How often a running setup is looked at besides SIGCHLD.
const SETUP_POLL: Duration = Duration::from_millis(100);

/// Most bytes of setup output kept in the transcript and the error.
const SETUP_OUTPUT: usize = 16 << 10;

/// Why the agent cannot start: said in the run's error.
pub(super) enum NotPrepared {
    /// The store failed.
    Store(StoreError),
    /// The worktree or setup failed, with what to tell the user.
    Failed(String),
    /// A stop signal came while setup ran; its processes are gone.
    Stopped,
}

impl From<StoreError> for NotPrepared {
    fn from(e: StoreError) -> Self {
        NotPrepared::Store(e)
    }
}

/// Creates the run's worktree if it has one and it does not exist yet, then
/// runs the preset's `setup` there before the run's first turn (a run
/// reopened by a reply was set up already).
pub(super) fn prepare(
    store: &mut Store,
    run: &Run,
    launch: &AgentLaunch,
    first_turn: bool,
    signals: (&mut SignalPipe, &mut SignalPipe),
) -> Result<(), NotPrepared> {
    let mut notes = Vec::new();
    if let (Some(worktree), Some(repo)) = (&run.worktree, &run.worktree_repo) {
        if !Path::new(&worktree.path).exists() {
            crate::worktree::create(Path::new(repo), Path::new(&worktree.path), &worktree.branch, &worktree.base)
                .map_err(|e| NotPrepared::Failed(format!("cannot create the run's worktree: {e}")))?;
            notes.push(format!(
                "worktree {} on branch {} from {}",
                worktree.path,
                worktree.branch,
                &worktree.base[..worktree.base.len().min(12)]
            ));
            // What the checkout ignores and `.worktreeinclude` names
            // (`.env`, `node_modules/`), before setup.
            // Only what the run's own sandbox lets it read.
            let readable = |path: &Path| match &launch.sandbox {
                Some((sandbox, _)) => sandbox.reads_by_rules(path, &launch.user_home),
                None => true,
            };
            let cannot = |e: crate::worktree::WorktreeError| {
                NotPrepared::Failed(format!("cannot carry ignored files into the run's worktree: {e}"))
            };
            let carried = crate::worktree::carry(
                Path::new(repo),
                Path::new(&worktree.path),
                &launch.preset.worktree_include,
                &readable,
            )
            .map_err(cannot)?;
            if let Some(carried) = carried {
                crate::worktree::carry::keep_list(Path::new(&worktree.path), &carried).map_err(cannot)?;
                home::create_private(&crate::worktree::carry::list_file(&launch.run_dir))
                    .and_then(|mut f| std::io::Write::write_all(&mut f, carried.list().as_bytes()))
                    .map_err(|e| NotPrepared::Failed(format!("cannot keep the list of carried files: {e}")))?;
                notes.push(carried.words());
            }
        }
    }
    if launch.preset.setup.is_empty() || !first_turn {
        return note(store, &run.id, notes);
    }
    let setup = &launch.filled(&launch.preset.setup);
    notes.push(format!("setup: {}", setup.join(" ")));
    note(store, &run.id, std::mem::take(&mut notes))?;
    // In the run's sandbox, as its agent: a setup (`npm ci`) runs the
    // project's own scripts.
    let mut env = launch.run_environment();
    let cannot = |e: std::io::Error| {
        NotPrepared::Failed(format!(
            "cannot run setup '{}': {e}; fix `setup:` in the preset {}",
            setup[0], launch.preset.path
        ))
    };
    let mut command = match launch.in_sandbox(&setup[0], &setup[1..], &mut env).map_err(cannot)? {
        Some(command) => command,
        None => {
            let mut command = Command::new(&setup[0]);
            command.args(&setup[1..]);
            command
        }
    };
    command.current_dir(&run.cwd).stdin(Stdio::null()).env_clear().envs(env);
    process::prepare_run_command(&mut command, launch.join.clone());
    let log = launch.run_dir.join("setup.log");
    let Some(status) = run_setup(&mut command, &log, signals).map_err(cannot)? else {
        return Err(NotPrepared::Stopped);
    };
    let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    let tail = tail_of(&text, SETUP_OUTPUT);
    if !tail.trim().is_empty() {
        store.append_events(
            &run.id,
            store.last_event_seq(&run.id)? + 1,
            &[TranscriptEvent::text(EventKind::Output, tail.to_string())],
        )?;
    }
    if !status.success() {
        return Err(NotPrepared::Failed(format!(
            "setup '{}' failed ({status}):\n{}",
            setup.join(" "),
            tail.trim_end()
        )));
    }
    Ok(())
}

/// Runs `command` with its output in `log` until it exits (its status), or
/// until a stop signal: then its process group is killed and reaped, and
/// the answer is `None`.
fn run_setup(
    command: &mut Command,
    log: &Path,
    (sigchld, stop): (&mut SignalPipe, &mut SignalPipe),
) -> std::io::Result<Option<ExitStatus>> {
    let out = home::create_private(log)?;
    let mut child = command.stdout(out.try_clone()?).stderr(out).spawn()?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let ready = process::wait_readable(&[sigchld.fd(), stop.fd()], Some(SETUP_POLL))?;
        sigchld.drain();
        if ready[1] && stop.drain() {
            process::signal_group(child.id() as i32, Sig::Kill)?;
            child.wait()?;
            return Ok(None);
        }
    }
}

fn note(store: &mut Store, run_id: &str, notes: Vec<String>) -> Result<(), NotPrepared> {
    if notes.is_empty() {
        return Ok(());
    }
    let events: Vec<TranscriptEvent> = notes.into_iter().map(|n| TranscriptEvent::text(EventKind::System, n)).collect();
    store.append_events(run_id, store.last_event_seq(run_id)? + 1, &events)?;
    Ok(())
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
