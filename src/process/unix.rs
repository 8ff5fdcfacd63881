//! Unix process plumbing: detached spawning, agent process groups, signals,
//! reaping, and non-blocking pipe reads with `poll`.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::adapter::ProcessEnd;

/// The signals Corral sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// Ask politely (Ctrl-C).
    Int,
    /// Ask to terminate.
    Term,
    /// Wake a stopped process so it can act on a pending signal.
    Cont,
    /// Kill, no questions.
    Kill,
    /// Freeze (where no cgroup can).
    Stop,
    /// Look at the store: a shepherd's nudge (pause, resume).
    Usr1,
}

impl Sig {
    fn nix(self) -> Signal {
        match self {
            Sig::Int => Signal::SIGINT,
            Sig::Term => Signal::SIGTERM,
            Sig::Cont => Signal::SIGCONT,
            Sig::Kill => Signal::SIGKILL,
            Sig::Stop => Signal::SIGSTOP,
            Sig::Usr1 => Signal::SIGUSR1,
        }
    }

    /// Its number.
    pub fn number(self) -> i32 {
        self.nix() as i32
    }

    /// The usual name, e.g. `SIGTERM`.
    pub fn name(self) -> &'static str {
        self.nix().as_str()
    }
}

/// Sends `sig` to every process of the group `pgid`. A group that no longer
/// exists is not an error.
pub fn signal_group(pgid: i32, sig: Sig) -> io::Result<()> {
    match signal::killpg(Pid::from_raw(pgid), sig.nix()) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sends `sig` to one process by its number alone: only for a child of
/// this process not yet reaped (its pid cannot be taken meanwhile).
/// Anything else is signalled by identity ([`ProcessId::signal`]). A
/// process that no longer exists is not an error.
pub(super) fn signal_pid(pid: i32, sig: Sig) -> io::Result<()> {
    match signal::kill(Pid::from_raw(pid), sig.nix()) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Starts `command` fully detached: in a new session, not a child of this
/// process (so the caller never has a zombie to reap, and the program lives
/// on when the caller exits).
///
/// The double fork happens inside `pre_exec`: the intermediate child forks
/// the real one and exits at once; the caller reaps the intermediate here.
/// std's exec-error pipe is inherited by the grandchild, so a failed exec is
/// still reported to the caller.
pub fn spawn_detached(mut command: Command, log: File) -> io::Result<()> {
    command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: the closure only calls async-signal-safe functions (setsid,
    // fork, _exit) between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => Ok(()),
                _ => libc::_exit(0),
            }
        });
    }
    let mut intermediate = command.spawn()?;
    intermediate.wait()?;
    Ok(())
}

/// Sends this process's standard output and error to `file` from now on.
pub fn redirect_output(file: &File) -> io::Result<()> {
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 onto a standard descriptor, which this process owns.
        if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(file), fd) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes `command`'s process die with the thread that starts it (a
/// follower's `ssh`: no connection outlives the process that reads it).
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A child that was reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Its pid.
    pub pid: i32,
    /// How it ended.
    pub end: ProcessEnd,
    /// The CPU time (user and system) it and the children it reaped used,
    /// in microseconds: what reaping it added to this process's
    /// `RUSAGE_CHILDREN`.
    pub cpu_micros: u64,
}

/// Reaps one exited child without blocking. `Ok(None)` when children exist
/// but none has exited; `Err` with `ECHILD` kind when there are no children.
pub fn reap_any() -> io::Result<Option<Reaped>> {
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of the plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 writes only to the two out-pointers given, which
        // live for the call. nix has no wait4, and its rusage is needed.
        let pid = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG | libc::__WALL, &mut usage) };
        let end = match pid {
            0 => return Ok(None),
            -1 if Errno::last() == Errno::EINTR => continue,
            -1 => return Err(io::Error::last_os_error()),
            _ if libc::WIFEXITED(status) => ProcessEnd::Exited(libc::WEXITSTATUS(status)),
            _ if libc::WIFSIGNALED(status) => ProcessEnd::Signaled(libc::WTERMSIG(status)),
            _ => continue, // stopped/continued notices: not an end
        };
        let micros = |t: libc::timeval| t.tv_sec.max(0) as u64 * 1_000_000 + t.tv_usec.max(0) as u64;
        let cpu_micros = micros(usage.ru_utime) + micros(usage.ru_stime);
        return Ok(Some(Reaped { pid, end, cpu_micros }));
    }
}

/// An exclusive lock on a file (`flock`), held until dropped; the kernel
/// lets it go when its process dies, however it dies.
#[derive(Debug)]
pub struct FileLock {
    _lock: nix::fcntl::Flock<File>,
}

impl FileLock {
    /// Locks `file` if no one else holds it.
    pub fn try_exclusive(file: File) -> Option<FileLock> {
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .ok()
            .map(|lock| FileLock { _lock: lock })
    }

    /// Locks `file`, waiting while another holds it.
    pub fn exclusive(file: File) -> io::Result<FileLock> {
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map(|lock| FileLock { _lock: lock })
            .map_err(|(_, errno)| io::Error::from(errno))
    }
}

/// Closes every descriptor above 2 but `keep`: a process forked from a
/// long-lived one takes none of its files along (its lock, its listening
/// socket), which would otherwise stay open for as long as the copy lives.
/// For a fresh copy, whose owned descriptors are never dropped.
pub fn close_all_but(keep: &[std::os::fd::RawFd]) -> io::Result<()> {
    let open: Vec<std::os::fd::RawFd> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in open.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
        // SAFETY: closing a descriptor this process holds; the copy's
        // owners of it never run their destructors.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Returns the heap's free pages to the system (glibc keeps them
/// otherwise, however long the process lives).
pub fn return_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases memory malloc holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The width of the terminal standard output is, if it is one.
pub fn terminal_width() -> Option<usize> {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize; fd 1 may be anything, and a
    // failure is just "not a terminal".
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col as usize)
}

/// Puts a pipe end into non-blocking mode.
pub fn make_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// What a non-blocking read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// This many bytes were read.
    Data(usize),
    /// Nothing to read now.
    Empty,
    /// The writer closed its end.
    Closed,
}

/// Reads what is available from a non-blocking reader.
pub fn read_available(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<Readiness> {
    loop {
        match reader.read(buf) {
            Ok(0) => return Ok(Readiness::Closed),
            Ok(n) => return Ok(Readiness::Data(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Readiness::Empty),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Waits until one of `fds` is readable (or closed) or `timeout` passes.
/// Returns which are ready, in order.
pub fn wait_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut polls: Vec<PollFd<'_>> = fds.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)).collect();
    let timeout = match timeout {
        None => PollTimeout::NONE,
        // Round up, so a wait never ends just before its deadline.
        Some(t) => PollTimeout::try_from(t.as_millis().saturating_add(1).min(i32::MAX as u128) as u32)
            .unwrap_or(PollTimeout::MAX),
    };
    match nix::poll::poll(&mut polls, timeout) {
        Ok(_) | Err(Errno::EINTR) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(polls
        .iter()
        .map(|p| p.revents().is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)))
        .collect())
}

/// Turns signals into bytes on a socket, so the shepherd's poll loop sees
/// them like any other input (the self-pipe trick, via signal-hook).
pub struct SignalPipe {
    read: UnixStream,
}

impl SignalPipe {
    /// Routes `signals` (e.g. `libc::SIGCHLD`) to a new pipe.
    pub fn new(signals: &[i32]) -> io::Result<SignalPipe> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        for &sig in signals {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(SignalPipe { read })
    }

    /// Empties the pipe; true if any signal had arrived.
    pub fn drain(&mut self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        while let Ok(Readiness::Data(_)) = read_available(&mut self.read, &mut buf) {
            any = true;
        }
        any
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }
}

/// Connects to the UNIX socket at `path` without waiting: a listener that
/// is stopped and whose queue is full answers `WouldBlock` at once, where a
/// plain connect would wait for ever. The stream is blocking once made.
pub fn connect_now(path: &std::path::Path) -> io::Result<UnixStream> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC, None)?;
    let address = UnixAddr::new(path)?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &address)?;
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// Keeps descriptor `fd` open across an `exec` (`keep`), or closes it there
/// (the default for every descriptor Corral opens).
pub fn keep_across_exec(fd: BorrowedFd<'_>, keep: bool) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let flags = if keep { FdFlag::empty() } else { FdFlag::FD_CLOEXEC };
    fcntl(fd, FcntlArg::F_SETFD(flags))?;
    Ok(())
}

/// Takes ownership of descriptor `raw`, inherited across an `exec` from
/// the process this one was; an error if no such descriptor is open.
pub fn adopt_inherited(raw: std::os::fd::RawFd) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    if raw <= 2 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("descriptor {raw} is a standard stream")));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; it fails for a
    // descriptor that is not open.
    if unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open, and nothing else in this process owns
    // it: it was inherited, and is adopted once, at the program's start.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) })
}

/// Replaces this process's program with `program`, given `args` (the first
/// is its name); returns only if that fails.
pub fn exec(program: &std::path::Path, args: &[std::ffi::OsString]) -> io::Error {
    use std::os::unix::ffi::OsStrExt;
    let cstring = |s: &std::ffi::OsStr| std::ffi::CString::new(s.as_bytes());
    let program = match cstring(program.as_os_str()) {
        Ok(p) => p,
        Err(e) => return io::Error::new(io::ErrorKind::InvalidInput, e),
    };
    let args: Result<Vec<std::ffi::CString>, _> = args.iter().map(|a| cstring(a)).collect();
    match args {
        Ok(args) => match nix::unistd::execv(&program, &args) {
            Err(e) => e.into(),
        },
        Err(e) => io::Error::new(io::ErrorKind::InvalidInput, e),
    }
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`), which an `Instant`
/// reads too: the same in every process, so a deadline outlives an `exec`.
pub fn monotonic_now() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map(Duration::from).unwrap_or_default()
}
