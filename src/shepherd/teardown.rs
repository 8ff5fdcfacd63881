//! A preset's `teardown`, run when a run's worktree is discarded or
//! removed (`dropdb app_{run}`): in the run's worktree, with its
//! environment (`env:` filled in, `CORRAL_PORT`), in a cgroup of its own
//! with the run's limits and in the run's sandbox, as its `setup` ran. It
//! runs in a process of its own (`corral teardown RUN`, which the discard
//! starts), so whoever discards (the CLI, the app, an MCP server) needs no
//! shepherd of its own; what it printed goes to the transcript.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::spawn::AgentLaunch;
use crate::adapter::{EventKind, TranscriptEvent};
use crate::home::config::Config;
use crate::home::Home;
use crate::process::{self, cgroup::RunCgroup};
use crate::store::{Store, StoreError};

/// The longest a teardown may take: it is killed then.
pub const TEARDOWN_LIMIT: Duration = Duration::from_secs(120);

/// Most bytes of its output kept in the transcript.
const OUTPUT: usize = 8 << 10;

/// Why a teardown did not run, or failed.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    /// It could not be started.
    #[error("cannot run teardown '{program}': {source}; fix `teardown:` in the preset {preset}")]
    Start { program: String, preset: String, source: std::io::Error },
    /// The run's sandbox cannot be made here.
    #[error("teardown of run {run} runs in its sandbox, and {why}")]
    Sandbox { run: String, why: String },
    /// The run is still active: what it made is in use.
    #[error("run {0} is still active: its teardown runs when its worktree goes, after it ends")]
    Active(String),
    /// It ran and failed (or took too long).
    #[error("teardown '{command}' of run {run} failed ({how}):\n{output}")]
    Failed { run: String, command: String, how: String, output: String },
}

/// Runs run `id`'s teardown if its preset has one; `Ok(None)` if not, else
/// what it said.
pub fn teardown(home: &Home, store: &mut Store, id: &str) -> Result<Option<String>, TeardownError> {
    let run = store.run(id)?;
    let preset = store.run_preset(id)?;
    if preset.teardown.is_empty() {
        return Ok(None);
    }
    // Once per run, and one at a time: two discards at once (the window
    // and the CLI) never run it twice in one cgroup, the first to end
    // killing the other part way; the second waits, then finds it done.
    let lock_path = home.run_dir(id).join("teardown.lock");
    let lock_file = crate::home::open_private_append(&lock_path)
        .map_err(|e| StoreError::RunFolder { path: lock_path.clone(), source: e })?;
    let _held = process::FileLock::exclusive(lock_file)
        .map_err(|e| StoreError::RunFolder { path: lock_path.clone(), source: e })?;
    // Once per run: a discard, then an `rm`, tear down once (a run torn
    // down by an older Corral has `teardown.done` in its folder).
    if store.torn_down(id)? || home.run_dir(id).join("teardown.done").exists() {
        return Ok(None);
    }
    if run.status.is_active() {
        return Err(TeardownError::Active(id.into()));
    }
    let config = Config::load(home)?;
    let run_dir = home.run_dir(id);
    let env =
        crate::run::env::load(&run_dir).map_err(|e| StoreError::RunFolder { path: run_dir.clone(), source: e })?;
    let mut launch = AgentLaunch::new(home, &run, preset.clone(), run_dir.clone(), env.clone())
        .map_err(|e| StoreError::RunFolder { path: run_dir.clone(), source: e })?;
    match super::sandbox_of(store, id, &config, &preset, env.as_deref())? {
        super::Sandboxing::Made { sandbox, bwrap, .. } => launch.sandbox = Some((sandbox, bwrap)),
        super::Sandboxing::Refused(why) => return Err(TeardownError::Sandbox { run: id.into(), why: why.to_string() }),
        super::Sandboxing::NotAsked | super::Sandboxing::Without(_) => {}
    }
    // A cgroup of its own, with the run's limits: what it starts ends
    // with it.
    let (limits, _) = config.resource_limits_for(&preset);
    let group =
        config.cgroups.then(|| RunCgroup::create(&format!("{id}-teardown"), &limits).ok().map(|(g, _)| g)).flatten();
    if let Some(group) = &group {
        launch.join = group.join();
    }
    let command = &launch.filled(&preset.teardown);
    let start = |e: std::io::Error| TeardownError::Start {
        program: command[0].clone(),
        preset: preset.path.clone(),
        source: e,
    };
    let mut vars = launch.run_environment();
    let mut child = match launch.in_sandbox(&command[0], &command[1..], &mut vars).map_err(start)? {
        Some(c) => c,
        None => {
            let mut c = Command::new(&command[0]);
            c.args(&command[1..]);
            c
        }
    };
    // Its worktree (or, without one, the folder it ran in). One removed
    // by hand is never swapped for the checkout it came from: a relative
    // `rm -rf node_modules` there would be the user's. It runs in an
    // empty folder of the run's own instead (read-only in its sandbox).
    // Nor a link put where it was, nor a folder that is not a worktree of
    // a repository (its `.git` a file naming the repository's): a
    // checkout's `.git` is a folder.
    let here = Path::new(run.worktree.as_ref().map_or(&run.cwd, |w| &w.path));
    let not_its_worktree = run.worktree.is_some()
        && (std::fs::symlink_metadata(here).is_ok_and(|m| m.file_type().is_symlink())
            || !std::fs::symlink_metadata(here.join(".git")).is_ok_and(|m| m.is_file()));
    let stand_in = !here.is_dir() || not_its_worktree;
    let folder = match stand_in {
        false => here.to_path_buf(),
        true => {
            let empty = run_dir.join("teardown-here");
            std::fs::create_dir_all(&empty).map_err(start)?;
            empty
        }
    };
    let log = run_dir.join("teardown.log");
    let out = crate::home::create_private(&log).map_err(start)?;
    let err = out.try_clone().map_err(start)?;
    child.current_dir(&folder).stdin(Stdio::null()).stdout(out).stderr(err).env_clear().envs(vars);
    process::prepare_run_command(&mut child, launch.join.clone());
    let mut child = child.spawn().map_err(start)?;
    let deadline = Instant::now() + TEARDOWN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(start)? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Nothing it started outlives it.
    if let Some(group) = &group {
        let _ = group.kill();
    }
    let _ = process::signal_group(child.id() as i32, process::Sig::Kill);
    let _ = child.wait();
    if let Some(group) = &group {
        let _ = group.remove();
    }
    let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    let cut = text.len().saturating_sub(OUTPUT);
    let cut = (cut..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
    let output = text[cut..].trim_end().to_string();
    if stand_in {
        let _ = std::fs::remove_dir_all(&folder);
    }
    let words = match stand_in {
        false => format!("teardown: {}", command.join(" ")),
        true => format!(
            "teardown: {} (its folder {} was gone: run in an empty folder, not the checkout)",
            command.join(" "),
            here.display()
        ),
    };
    let mut note = vec![TranscriptEvent::text(EventKind::System, words.clone())];
    if !output.is_empty() {
        note.push(TranscriptEvent::text(EventKind::Output, output.clone()));
    }
    store.append_events(id, store.last_event_seq(id)? + 1, &note)?;
    // Ran, whatever it answered: a second discard or `rm` does not run it
    // again (a failure is in the transcript to be fixed by hand), and its
    // ports are free for other runs from now on.
    store.mark_torn_down(id)?;
    match status {
        Some(status) if status.success() => Ok(Some(words)),
        Some(status) => {
            Err(TeardownError::Failed { run: id.into(), command: command.join(" "), how: status.to_string(), output })
        }
        None => Err(TeardownError::Failed {
            run: id.into(),
            command: command.join(" "),
            how: format!("still running after {} s: killed", TEARDOWN_LIMIT.as_secs()),
            output,
        }),
    }
}
