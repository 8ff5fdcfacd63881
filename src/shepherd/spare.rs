//! A template's spare: a shepherd forked before its run exists, warm (its
//! store open, its pages the template's), that takes one launch from the
//! template's socket, answers its launcher, and supervises the run it
//! recorded. See `template` for the whole.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, OnceLock};

use crate::home::{self, Home};
use crate::process;
use crate::run::env::SHEPHERD_ENV;
use crate::shepherd::template::wire::{self, WarmAnswer, WarmLaunch};
use crate::store::Store;
use crate::upkeep::queue::{Handoff, ShepherdCommand};
use crate::verbs::launch::{launch, LaunchRequest};

/// The most a launch request may be: a task of at most 1 MB, and the
/// launcher's environment.
const MOST: u64 = 8 << 20;

/// How long a launcher may take to say what it asks once connected.
const SAY_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a spare leaves a launch to the cold path, as its launcher is told.
#[derive(Debug, thiserror::Error)]
pub enum NotServed {
    /// The program was replaced since the template started (an upgrade).
    #[error("the template runs a corral that was replaced since")]
    Replaced,
    /// The kernel did not say who connected.
    #[error("cannot tell who asks: {0}")]
    Unknown(nix::Error),
    /// Another user connected.
    #[error("asked by user {0}, not this template's")]
    OtherUser(u32),
    /// The launcher is gone: what it would be judged by is too.
    #[error("the launcher exited before it was answered")]
    LauncherGone,
    /// No pidfd of the launcher could be opened.
    #[error("cannot hold the launcher: {0}")]
    Unheld(std::io::Error),
    /// A process of a run: its launch is judged cold.
    #[error("asked from inside a run")]
    InsideARun,
    /// The request did not come whole in time.
    #[error("the request was not read whole: {0}")]
    Unread(std::io::Error),
    /// The request is not a launch this version reads.
    #[error("the request is not one this spare reads: {0}")]
    Unreadable(serde_json::Error),
    /// Another `corral` program asked.
    #[error("asked by {}, another corral than this template's", .0.display())]
    OtherCorral(std::path::PathBuf),
    /// The launcher has other settings or data folders.
    #[error("the launcher's Corral folders are not this template's")]
    OtherFolders,
    /// Templates are turned off.
    #[error("`launch_template` is not on in config.toml")]
    TurnedOff,
    /// The launcher's folders cannot be told.
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    /// The settings are broken.
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    /// This process cannot be as the launcher's launch would be.
    #[error("it cannot launch as the launcher would: {0}")]
    Unlike(#[from] process::Unlike),
    /// This program's path is unknown.
    #[error("cannot find the corral executable: {0}")]
    NoExe(std::io::Error),
}

/// Waits for one launch on `listener` (until the template closes `quit`),
/// carries it out, and supervises its run if it started one. Returns the
/// exit code.
pub fn serve(home: &Home, listener: UnixListener, taken: OwnedFd, quit: OwnedFd) -> i32 {
    let Ok(mut store) = Store::open(home) else { return 1 };
    let Some(stream) = accept_one(&listener, &quit) else { return 0 };
    // Off the template, which forks the next spare now.
    let _ = File::from(taken).write_all(&[1]);
    drop((listener, quit));
    match carry_out(&mut store, stream) {
        Some(run_id) => supervise(home, &run_id, store),
        None => 0,
    }
}

/// The first connection to `listener`; `None` once `quit` hangs up (the
/// template ended) with none.
fn accept_one(listener: &UnixListener, quit: &OwnedFd) -> Option<UnixStream> {
    loop {
        let ready = process::wait_readable(&[listener.as_fd(), quit.as_fd()], None).ok()?;
        if ready[0] {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).ok()?;
                    return Some(stream);
                }
                // Taken by the spare before, or the launcher left.
                Err(_) => continue,
            }
        }
        if ready[1] {
            return None;
        }
    }
}

/// Answers the launcher on `stream`; the run this process now shepherds,
/// if the launch started one (whether or not the launcher was still there
/// to read the answer: the run is recorded, and lives).
fn carry_out(store: &mut Store, mut stream: UnixStream) -> Option<String> {
    // Taken: the launcher waits for the answer now, not for a spare.
    let _ = stream.write_all(wire::TAKEN);
    let (answer, run) = answer(store, &mut stream);
    let _ = stream.write_all(&serde_json::to_vec(&answer).unwrap_or_default());
    run
}

fn answer(store: &mut Store, stream: &mut UnixStream) -> (WarmAnswer, Option<String>) {
    let (asked, plain) = match served(store.home(), stream) {
        Ok(served) => served,
        Err(why) => return (WarmAnswer::NotHere { why: why.to_string() }, None),
    };
    let taken = Arc::new(OnceLock::new());
    let (launched, said) = crate::home::logging::said_by(|| {
        // As every command does first; a queued run a heal starts gets a
        // shepherd of its own, never this one.
        crate::upkeep::heal::heal(store, &plain).map_err(|e| e.to_string())?;
        let shepherd = plain.with_forked(Some(Handoff::to_this_process(taken.clone())));
        let request = LaunchRequest {
            preset: asked.preset,
            task: asked.task,
            cwd: asked.cwd,
            model: asked.model,
            parent: None,
            env: Some(asked.env),
            worktree: asked.worktree,
            base: asked.base,
            budget: asked.budget,
            fire: None,
            request: Some(asked.request),
            scope_own: false,
        };
        launch(store, &request, &shepherd).map_err(|e| e.to_string())
    });
    match launched {
        Ok(run) => (WarmAnswer::Launched { run: Box::new(run), said }, taken.get().cloned()),
        Err(error) => (WarmAnswer::Refused { error, said }, None),
    }
}

/// The launch asked on `stream`, once this process is as its launcher's
/// own would have been, and how to start shepherds.
fn served(home: &Home, stream: &mut UnixStream) -> Result<(WarmLaunch, ShepherdCommand), NotServed> {
    let launcher = judged_launcher(stream)?;
    let mut request = Vec::new();
    // A launcher that connects and says nothing holds no spare for ever.
    let _ = stream.set_read_timeout(Some(SAY_WITHIN));
    stream.take(MOST).read_to_end(&mut request).map_err(NotServed::Unread)?;
    let asked: WarmLaunch = serde_json::from_slice(&request).map_err(NotServed::Unreadable)?;
    // Judged alive and outside every run, and alive still: the pidfd is of
    // that very process, so it was not judged after it went (its sockets
    // handed to a process of a run).
    if launcher.has_exited() {
        return Err(NotServed::LauncherGone);
    }
    like_the_launcher(home, &asked, launcher.process.pid)?;
    let plain = ShepherdCommand::current_exe().map_err(NotServed::NoExe)?;
    Ok((asked, plain))
}

/// The process at the other end of `stream`, held by a pidfd, once judged
/// one this spare launches for: this user's, alive, outside every run (a
/// process of a run has its launch judged cold, by what it may do).
fn judged_launcher(stream: &UnixStream) -> Result<process::PidFd, NotServed> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    if wire::exe_replaced() {
        return Err(NotServed::Replaced);
    }
    let creds = getsockopt(stream, PeerCredentials).map_err(NotServed::Unknown)?;
    if creds.uid() != nix::unistd::getuid().as_raw() {
        return Err(NotServed::OtherUser(creds.uid()));
    }
    // 0: a process of another pid namespace, which cannot be judged here.
    let launcher = process::ProcessId::of(creds.pid()).filter(|_| creds.pid() > 0).ok_or(NotServed::LauncherGone)?;
    // Held before it is judged: what is judged is this process, alive.
    let held = process::PidFd::open(launcher).map_err(NotServed::Unheld)?.ok_or(NotServed::LauncherGone)?;
    if !crate::run::caller::outside_every_run(launcher.pid) {
        return Err(NotServed::InsideARun);
    }
    Ok(held)
}

/// Makes this process as the launcher's own launch would have been: its
/// environment (what `git` and the preset's checks see), umask, limits,
/// priority and cgroup; or says why it cannot be, and the launch goes cold.
fn like_the_launcher(home: &Home, asked: &WarmLaunch, launcher: i32) -> Result<(), NotServed> {
    if std::env::current_exe().ok().as_ref() != Some(&asked.program) {
        return Err(NotServed::OtherCorral(asked.program.clone()));
    }
    let ours: Vec<_> = std::env::vars_os().map(|(key, _)| key).collect();
    for key in ours {
        std::env::remove_var(key);
    }
    for (key, value) in &asked.env {
        use std::os::unix::ffi::OsStrExt;
        // What no process's environment can hold (and `set_var` refuses).
        let unsettable = key.is_empty() || key.as_bytes().contains(&b'=') || key.as_bytes().contains(&0);
        if !unsettable && !value.as_bytes().contains(&0) {
            std::env::set_var(key, value);
        }
    }
    // The launcher's settings and data are this spare's: the same socket
    // can be reached with another config folder.
    let theirs = crate::run::caller::home()?;
    if theirs.config_dir() != home.config_dir() || theirs.data_dir() != home.data_dir() {
        return Err(NotServed::OtherFolders);
    }
    if !crate::home::config::Config::load(home)?.launch_template {
        return Err(NotServed::TurnedOff);
    }
    Ok(process::become_like(launcher)?)
}

/// Supervises run `run_id` with `store`, as its shepherd; the exit code.
fn supervise(home: &Home, run_id: &str, store: Store) -> i32 {
    let Ok(log) = home::open_private_append(&crate::upkeep::queue::shepherd_log(&home.run_dir(run_id))) else {
        return 1; // no run folder: the run is healed as never started
    };
    if process::redirect_output(&log).is_err() {
        return 1;
    }
    std::env::set_var(SHEPHERD_ENV, run_id);
    crate::home::logging::init(super::LOG_LEVEL);
    match super::shepherd_with(home, run_id, Some(store)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("corral shepherd {run_id} (a launch template's spare): {e}");
            1
        }
    }
}
