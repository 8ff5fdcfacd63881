//! The launch template: a warm process that makes a run cost a fork.
//!
//! A cold `corral launch` pays a program start, a store opened (its schema
//! parsed), a heal, a preset scan and a shepherd forked from a process that
//! exits at once (so every page it leaves the shepherd is the shepherd's
//! alone). The template, as Android starts apps from a zygote, pays those
//! once:
//!
//! - **The template** (`corral template`, this module) holds the socket
//!   (`Home::template_socket`) and never opens the store: a process that
//!   forks must not have SQLite open. It keeps one **spare** forked from
//!   itself, and forks the next as soon as a launch takes it.
//! - **A spare** (`shepherd::spare`) opens its own store, then waits on
//!   the socket. It takes one launch: checks the caller (this user, outside
//!   every run), records the run, answers the launcher, and becomes that
//!   run's shepherd with the store it already has. Its pages are the
//!   template's, shared copy-on-write with every other shepherd forked
//!   from it.
//! - **The launcher** (`ask`) asks the socket first and, with no template
//!   there, launches cold as before and starts one for the next launch.
//!
//! Nothing depends on it: a launch without an answer goes cold (under the
//! same request key, so a launch the spare recorded before it failed is not
//! made twice), a killed template takes no run with it (its shepherds are
//! not its children), and it ends after [`IDLE`] without a launch.

pub mod ask;
pub mod wire;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::home::{self, Home};
use crate::process::{self, FileLock, Forked};

/// How long a template lives without a launch.
pub const IDLE: Duration = Duration::from_secs(600);

/// How many spares in a row may die young (before taking a launch, within
/// [`YOUNG`] of their start) before the template gives up: a spare that
/// cannot open its store would otherwise be forked for ever.
const DEATHS_IN_A_ROW: u32 = 3;
const YOUNG: Duration = Duration::from_secs(2);

/// What keeps a template from serving.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// Its socket or lock could not be made.
    #[error("cannot {doing} {}: {source}", path.display())]
    Io { doing: &'static str, path: PathBuf, source: std::io::Error },
}

/// Serves launches of `home` until [`IDLE`] passes without one. Returns at
/// once if another template of `home` serves.
pub fn serve(home: &Home) -> Result<(), TemplateError> {
    // Its spares become shepherds: never from inside a run, whose end
    // would take them along.
    if !crate::run::caller::this_process_outside_every_run() {
        return Ok(());
    }
    let io = |doing, path: &PathBuf| {
        let path = path.clone();
        move |source| TemplateError::Io { doing, path, source }
    };
    home.ensure().map_err(|e| TemplateError::Io {
        doing: "make",
        path: home.data_dir().to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    let lock_path = home.template_lock();
    let lock_file = home::open_private_append(&lock_path).map_err(io("open", &lock_path))?;
    let Some(_lock) = FileLock::try_exclusive(lock_file.try_clone().map_err(io("open", &lock_path))?) else {
        return Ok(());
    };
    // Said in it, for whoever would end this template.
    lock_file
        .set_len(0)
        .and_then(|()| (&lock_file).write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(io("write", &lock_path))?;
    // Held alone: a socket left here is a dead template's.
    let socket = home.template_socket();
    let _ = std::fs::remove_file(&socket);
    let listener = bind_private(&socket).map_err(io("listen on", &socket))?;
    let served = keep_a_spare(home, &listener);
    // Gone before the lock is: a launcher finds no socket, or a live one.
    let _ = std::fs::remove_file(&socket);
    served.map_err(io("keep a spare for", &socket))
}

/// Listens on `path`, which only this user may connect to.
fn bind_private(path: &std::path::Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(home::FILE_MODE))?;
    // A spare polls it, then accepts: another may have taken the launch.
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// One spare at a time, the next forked as soon as one takes a launch.
fn keep_a_spare(home: &Home, listener: &UnixListener) -> std::io::Result<()> {
    let mut young_deaths = 0;
    let mut last_launch = Instant::now();
    loop {
        if let Some(why) = not_wanted(home) {
            tracing::info!("the template ends: {why}");
            return Ok(());
        }
        let born = Instant::now();
        let Some(spare) = fork_spare(home, listener)? else { return Ok(()) };
        // Told when the spare takes a launch (a byte), or dies (hung up).
        let left = IDLE.saturating_sub(last_launch.elapsed());
        let ready = process::wait_readable(&[spare.taken.as_fd()], Some(left))?;
        if !ready[0] {
            // Idle: the spare leaves when its pipe from here closes.
            tracing::info!("no launch for {IDLE:?}: the template ends");
            return Ok(());
        }
        let mut byte = [0u8; 1];
        match File::from(spare.taken).read(&mut byte) {
            Ok(1) => {
                young_deaths = 0;
                last_launch = Instant::now();
            }
            _ if born.elapsed() < YOUNG => {
                young_deaths += 1;
                if young_deaths >= DEATHS_IN_A_ROW {
                    tracing::warn!("{young_deaths} spares in a row died before taking a launch: the template ends");
                    return Ok(());
                }
            }
            _ => young_deaths = 0,
        }
        drop(spare.quit);
    }
}

/// Why no more spares are wanted: the settings turned templates off, or
/// the program was replaced (an upgrade, a build) and its spares would
/// launch with the old one.
fn not_wanted(home: &Home) -> Option<String> {
    if wire::exe_replaced() {
        return Some("corral was replaced since it started".into());
    }
    match crate::home::config::Config::load(home) {
        Ok(config) if config.launch_template => None,
        Ok(_) => Some("`launch_template` is not on in config.toml".into()),
        Err(e) => Some(e.to_string()),
    }
}

/// The template's ends of a spare's pipes: `taken` says it took a launch
/// (or died); dropping `quit` tells an idle spare to leave.
struct Spare {
    taken: OwnedFd,
    quit: OwnedFd,
}

/// Forks a spare; `None` if this process may not fork (more than one
/// thread). In the spare, never returns.
fn fork_spare(home: &Home, listener: &UnixListener) -> std::io::Result<Option<Spare>> {
    use nix::fcntl::OFlag;
    let (taken_read, taken_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    let (quit_read, quit_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    match process::fork_detached()? {
        Some(Forked::Caller(_middle)) => Ok(Some(Spare { taken: taken_read, quit: quit_write })),
        Some(Forked::Detached) => {
            use std::os::fd::AsRawFd;
            // Nothing of the template's but what a spare uses: its lock or
            // its socket held open by a shepherd would outlive it.
            let code = match listener.try_clone() {
                Ok(listener) => {
                    let keep = [listener.as_raw_fd(), taken_write.as_raw_fd(), quit_read.as_raw_fd()];
                    match process::close_all_but(&keep) {
                        Ok(()) => crate::shepherd::spare::serve(home, listener, taken_write, quit_read),
                        Err(_) => 1,
                    }
                }
                Err(_) => 1,
            };
            std::process::exit(code)
        }
        None => Ok(None),
    }
}

/// Starts a template for `home` detached, for the next launch; nothing if
/// one serves already (it leaves at once).
pub fn start(home: &Home) {
    let started = (|| {
        let exe = crate::upkeep::queue::ShepherdCommand::current_exe()?.program;
        let log = home::open_private_append(&home.data_dir().join("template.log"))?;
        let mut command = crate::upkeep::queue::corral_command(&exe, home);
        command.arg("template").env_remove(crate::run::env::SHEPHERD_ENV);
        process::spawn_detached(command, log)
    })();
    if let Err(e) = started {
        tracing::debug!("cannot start a launch template: {e}");
    }
}
