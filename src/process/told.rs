//! Being told instead of looking: the kernel wakes a waiting process when
//! another process rings the store's bell (a FIFO, after each commit), when
//! a file in a folder changes (inotify), when a process exits (a pidfd), or
//! when another thread of this process asks (an eventfd). Each is a file
//! descriptor to poll with the rest; none costs a wakeup while nothing
//! happens.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

use super::linux::{start_time, ProcessId};

/// Changes to the files of one folder whose names start with a prefix
/// (the database's `corral.db`, `corral.db-wal`): every commit writes one.
pub struct FolderWatch {
    inotify: Inotify,
    prefix: OsString,
}

impl FolderWatch {
    /// Watches `dir` for writes to, and creation of, files named `prefix…`.
    pub fn new(dir: &Path, prefix: &str) -> io::Result<FolderWatch> {
        let flags = AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO;
        FolderWatch::with(dir, prefix, flags)
    }

    /// Watches `dir` for files named `prefix…` written whole (closed after
    /// a write, or moved in): a settings file. Not told of every write in
    /// the folder — where the database lives beside the settings
    /// (`CORRAL_HOME`), every commit writes one.
    pub fn written_whole(dir: &Path, prefix: &str) -> io::Result<FolderWatch> {
        let flags = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO;
        FolderWatch::with(dir, prefix, flags)
    }

    fn with(dir: &Path, prefix: &str, flags: AddWatchFlags) -> io::Result<FolderWatch> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        inotify.add_watch(dir, flags)?;
        Ok(FolderWatch { inotify, prefix: OsString::from(prefix) })
    }

    /// Reads what it was told; true if one of the files changed (or the
    /// kernel's queue overflowed, so it may have).
    pub fn drain(&self) -> bool {
        let mut changed = false;
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
            changed |= events.iter().any(|e| {
                e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)
                    || e.name.as_ref().is_some_and(|n| n.as_bytes().starts_with(self.prefix.as_bytes()))
            });
        }
        changed
    }
}

impl AsFd for FolderWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }
}

/// A FIFO that wakes every process listening to it at once: a ring opens
/// it for writing and closes it, and each listener's descriptor then polls
/// as hung up (`POLLHUP`: a writer came and went since it opened). Unlike
/// inotify it takes no instance of a per-user limit, costs nothing to
/// close, and is rung after a commit, so what woke a listener is already
/// visible to it. A listener opens it again after each ring.
pub struct Bell {
    fd: OwnedFd,
    path: std::path::PathBuf,
}

impl Bell {
    /// Makes the bell at `path` if it is missing (private to the user).
    pub fn ensure(path: &Path) -> io::Result<()> {
        match nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Wakes every listener of the bell at `path`; nothing if none listens
    /// (or there is no bell).
    pub fn ring(path: &Path) {
        use nix::fcntl::{open, OFlag};
        // No reader: ENXIO at once, nothing to wake.
        let flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        if let Ok(fd) = open(path, flags, nix::sys::stat::Mode::empty()) {
            drop(fd);
        }
    }

    /// Listens to the bell at `path`: rings from now on are told.
    pub fn listen(path: &Path) -> io::Result<Bell> {
        use nix::fcntl::{open, OFlag};
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = open(path, flags, nix::sys::stat::Mode::empty())?;
        let bell = Bell { fd, path: path.to_path_buf() };
        let kind = nix::sys::stat::fstat(bell.fd.as_fd())?.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a FIFO", path.display())));
        }
        Ok(bell)
    }

    /// The bell at `path` listened to by `fd`, as a process listening to it
    /// handed it on across an `exec` (see `watch::asleep`).
    pub fn adopt(fd: OwnedFd, path: &Path) -> io::Result<Bell> {
        let kind = nix::sys::stat::fstat(fd.as_fd())?.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("descriptor {fd:?} is not a FIFO")));
        }
        Ok(Bell { fd, path: path.to_path_buf() })
    }

    /// Listens again after a ring (the old descriptor stays hung up).
    pub fn rearm(&mut self) -> io::Result<()> {
        *self = Bell::listen(&self.path)?;
        Ok(())
    }
}

impl AsFd for Bell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A process to be told of the exit of: readable once it has exited.
pub struct PidFd {
    fd: OwnedFd,
    /// Which process.
    pub process: ProcessId,
}

impl PidFd {
    /// A pidfd of `process`; `None` if it is gone already (or its pid now
    /// names another process). An error if the kernel has no pidfds
    /// (before Linux 5.3).
    pub fn open(process: ProcessId) -> io::Result<Option<PidFd>> {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, process.pid, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ESRCH) { Ok(None) } else { Err(e) };
        }
        // SAFETY: the syscall returned a new descriptor this process owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // Opened after a check of the start time could name a newer process
        // with the same pid: checked after, the fd is for the right one.
        if start_time(process.pid) != Some(process.start) {
            return Ok(None);
        }
        Ok(Some(PidFd { fd, process }))
    }

    /// Sends `sig` to this very process (`pidfd_send_signal`): never to a
    /// later one that took its pid. One that has exited is not an error.
    pub fn signal(&self, sig: super::Sig) -> io::Result<()> {
        // SAFETY: pidfd_send_signal(2) takes a pidfd this process holds, a
        // signal number, no siginfo and no flags.
        let sent = unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, self.fd.as_raw_fd(), sig.number(), std::ptr::null::<u8>(), 0)
        };
        if sent == 0 {
            return Ok(());
        }
        match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
            e => Err(e),
        }
    }

    /// True once the process has exited (a zombie included), asked now.
    pub fn has_exited(&self) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).map_or(true, |n| n > 0)
    }
}

impl AsFd for PidFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Wakes a thread blocked on its [`Waker::fd`] from another thread.
#[derive(Clone)]
pub struct Waker(Arc<EventFd>);

impl Waker {
    /// A new waker, not yet woken.
    pub fn new() -> io::Result<Waker> {
        Ok(Waker(Arc::new(EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?)))
    }

    /// Wakes the waiting thread (or the next wait, if none waits now).
    pub fn wake(&self) {
        let _ = self.0.write(1);
    }

    /// Takes the wakeups so far; true if there was one.
    pub fn drain(&self) -> bool {
        self.0.read().is_ok()
    }

    /// What to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// Signals by identity: through a pidfd, as [`PidFd`] holds a process.
impl ProcessId {
    /// Sends `sig` to this very process, never to a later one that took
    /// its pid: through a pidfd opened and then checked against its start
    /// time. One that is gone is not an error. Without pidfds (Linux
    /// before 5.3), by its pid right after the same check.
    pub fn signal(&self, sig: super::Sig) -> std::io::Result<()> {
        match PidFd::open(*self) {
            Ok(Some(held)) => held.signal(sig),
            Ok(None) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => match self.is_alive_or_zombie() {
                true => super::unix::signal_pid(self.pid, sig),
                false => Ok(()),
            },
            Err(e) => Err(e),
        }
    }
}
