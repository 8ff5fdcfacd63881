//! Forking a copy of this process that lives on detached: how a launch
//! starts its shepherd, and a template its spares, without starting a
//! program. Its own room because it needs Linux (whether this process has
//! one thread is read from `/proc`) and what any Unix has alike.

use std::io;

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// Which side of [`fork_detached`] this is.
#[derive(Debug)]
pub enum Forked {
    /// The caller, going on as it was, with the middle process to reap.
    Caller(Middle),
    /// The new process: in a session of its own, not the caller's child,
    /// in `/`, its standard input, output and error on `/dev/null`.
    Detached,
}

/// Forks a copy of this process that lives on detached, as
/// [`super::spawn_detached`] starts a program, without a program start: fork,
/// `setsid`, fork again; the middle process exits at once and is reaped
/// when the returned [`Middle`] is dropped (not at once: the caller need
/// not wait for it to be scheduled). Refused (`None`) unless this process
/// has one thread, since only the forking thread lives on in the copy (a
/// lock another thread held would stay held there forever).
pub fn fork_detached() -> io::Result<Option<Forked>> {
    if !super::linux::single_threaded() {
        return Ok(None);
    }
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    // SAFETY: this process has one thread, so the copies may run any code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            // The middle process: a session of its own, then the real one.
            // SAFETY: as above, one thread.
            let detached = unsafe { libc::setsid() != -1 && libc::fork() == 0 };
            if !detached {
                // SAFETY: leaving at once, running nothing of the caller's.
                unsafe { libc::_exit(0) };
            }
            for fd in 0..=2 {
                // SAFETY: dup2 onto the standard descriptors, which this
                // process owns.
                unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) };
            }
            // The copy never returns an error: its caller would go on as a
            // second launcher. It leaves, and the caller starts a program.
            if std::env::set_current_dir("/").is_err() {
                // SAFETY: leaving at once, running nothing of the caller's.
                unsafe { libc::_exit(1) };
            }
            Ok(Some(Forked::Detached))
        }
        middle => Ok(Some(Forked::Caller(Middle(Pid::from_raw(middle))))),
    }
}

/// The middle process of [`fork_detached`], which exits at once: reaped
/// when dropped, so no zombie is left behind it.
#[derive(Debug)]
pub struct Middle(Pid);

impl Drop for Middle {
    fn drop(&mut self) {
        let _ = waitpid(self.0, None);
    }
}
