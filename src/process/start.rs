//! Starting an agent inside its run's cgroup from its first instruction.
//!
//! Moving a process into a cgroup (a write to `cgroup.procs`) waits for an
//! RCU grace period, about 10 ms, unless another move happened just
//! before: measured here, fork + join + exec of `true` took 11.5 ms against
//! 1.1 ms without the join. `clone3(CLONE_INTO_CGROUP)` (Linux 5.7) makes
//! the process in the group instead, with no move and no wait (1.2 ms).
//! std's `Command` cannot ask for it, so the agent's fork and exec are
//! written out here; where `clone3` or the flag is refused (an old kernel,
//! a seccomp filter), a plain fork joins by writing, as before.
//!
//! Between fork and exec the child makes only async-signal-safe system
//! calls on memory prepared beforehand: no allocation, no lock.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::cgroup::Join;

/// Sets up a command of a run started with std's `Command` (its `setup:`;
/// the agent starts with `start::start_agent`): the run's groups (joined by
/// writing, before it can start anything), its own process group (so
/// signals reach its whole tree at once), PDEATHSIG (so it dies with its
/// shepherd), and a clean signal mask. The descriptors must stay open
/// until the command is spawned.
pub fn prepare_run_command(command: &mut std::process::Command, join: Join) {
    let shepherd = std::process::id() as libc::pid_t;
    command.process_group(0);
    // SAFETY: only async-signal-safe calls (write, prctl, getppid,
    // sigprocmask, _exit) run between fork and exec.
    unsafe {
        command.pre_exec(move || {
            super::cgroup::join_from_child(&join)?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(io::Error::last_os_error());
            }
            // The shepherd may have died between fork and prctl.
            if libc::getppid() != shepherd {
                libc::_exit(137);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// `CLONE_INTO_CGROUP`, as `clone_args.flags` takes it.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// What to start: a program, its arguments and whole environment, in a
/// folder, reading `stdin` (nothing when `None`).
#[derive(Debug)]
pub struct AgentStart<'a> {
    /// The program, looked up on the environment's `PATH` if it has no slash.
    pub program: &'a OsStr,
    /// Its arguments.
    pub args: &'a [OsString],
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its working folder.
    pub cwd: &'a Path,
    /// Its standard input (`/dev/null` when `None`).
    pub stdin: Option<File>,
    /// The run's groups to start it in.
    pub join: &'a Join,
    /// Descriptors it is handed besides its standard three (a sandbox's
    /// pinned places), at their numbers.
    pub handed: Option<&'a super::Handed>,
}

/// A started agent: its pid (its own process group) and the read ends of
/// its stdout and stderr.
#[derive(Debug)]
pub struct StartedAgent {
    /// Its pid, also its process group's id.
    pub pid: i32,
    /// Its standard output.
    pub stdout: File,
    /// Its standard error.
    pub stderr: File,
}

/// Starts `start` in its own process group, in the run's groups, dying with
/// this process (PDEATHSIG), with an empty signal mask and SIGPIPE at its
/// default. A program that cannot be executed is an error of the usual
/// kind (`NotFound`, `PermissionDenied`), as with `Command::spawn`.
pub fn start_agent(start: AgentStart<'_>) -> io::Result<StartedAgent> {
    let prepared = Prepared::new(&start)?;
    let stdin = match start.stdin {
        Some(file) => OwnedFd::from(file),
        None => OwnedFd::from(File::open("/dev/null")?),
    };
    let (out_read, out_write) = pipe()?;
    let (err_read, err_write) = pipe()?;
    let (report_read, report_write) = pipe()?;
    let child = ChildFds {
        stdin: stdin.as_raw_fd(),
        stdout: out_write.as_raw_fd(),
        stderr: err_write.as_raw_fd(),
        report: report_write.as_raw_fd(),
    };
    let shepherd = std::process::id() as libc::pid_t;
    let join = start.join;
    let handed = start.handed;

    // SAFETY: clone3 without CLONE_VM is a fork; the child runs only
    // `exec_child`, which makes async-signal-safe calls on `prepared`,
    // built above, and never returns.
    let pid = match join.into.map(|dir| unsafe { clone_into(dir) }) {
        Some(Ok(0)) => unsafe { exec_child(&prepared, &child, join, false, shepherd, handed) },
        Some(Ok(pid)) => pid,
        // Refused: fork, and join by writing.
        Some(Err(_)) | None => match unsafe { libc::fork() } {
            -1 => return Err(io::Error::last_os_error()),
            0 => unsafe { exec_child(&prepared, &child, join, true, shepherd, handed) },
            pid => pid,
        },
    };
    drop((stdin, out_write, err_write, report_write));
    if let Some(errno) = read_report(&report_read)? {
        // It never ran: reap it here, so no one else sees it end.
        let _ = waitpid(Pid::from_raw(pid), None);
        return Err(io::Error::from_raw_os_error(errno));
    }
    // Groups that only measure are joined now, the start not waiting for
    // the move; whatever the agent started before is measured with the
    // shepherd's group (a CLI's first milliseconds start nothing).
    let pid_text = pid.to_string();
    for &fd in &join.v1_measuring {
        // SAFETY: write(2) of a live buffer to a descriptor the cgroup owns.
        if unsafe { libc::write(fd, pid_text.as_ptr().cast(), pid_text.len()) } == -1 {
            tracing::debug!("cannot move the agent into a measuring v1 group: {}", io::Error::last_os_error());
        }
    }
    Ok(StartedAgent { pid, stdout: File::from(out_read), stderr: File::from(err_read) })
}

/// The program's candidate paths, arguments and environment as C strings,
/// and pointer arrays onto them, made before the fork.
struct Prepared {
    candidates: Vec<CString>,
    cwd: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const libc::c_char>,
}

impl Prepared {
    fn new(start: &AgentStart<'_>) -> io::Result<Prepared> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command"))
        };
        let path = start.env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_os_str());
        let candidates = candidates(start.program, path).iter().map(|p| c(p.as_bytes())).collect::<Result<_, _>>()?;
        let argv: Vec<CString> = std::iter::once(start.program)
            .chain(start.args.iter().map(OsString::as_os_str))
            .map(|a| c(a.as_bytes()))
            .collect::<Result<_, _>>()?;
        let envp: Vec<CString> =
            start.env.iter().map(|(k, v)| c(&[k.as_bytes(), b"=", v.as_bytes()].concat())).collect::<Result<_, _>>()?;
        let pointers =
            |strings: &[CString]| strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        Ok(Prepared {
            candidates,
            cwd: c(start.cwd.as_os_str().as_bytes())?,
            argv_ptrs: pointers(&argv),
            envp_ptrs: pointers(&envp),
            _argv: argv,
            _envp: envp,
        })
    }
}

/// Where `program` may be: itself when it has a slash, else each folder of
/// `path` (the shell's default when unset), in order, as `execvp` looks.
fn candidates(program: &OsStr, path: Option<&OsStr>) -> Vec<OsString> {
    if program.as_bytes().contains(&b'/') {
        return vec![OsString::from(program)];
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(path)
        .map(|dir| if dir.as_os_str().is_empty() { Path::new(".").join(program) } else { dir.join(program) })
        .map(OsString::from)
        .collect()
}

/// The descriptors the child puts in place.
struct ChildFds {
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    report: RawFd,
}

/// clone3 into the cgroup folder `dir`: the child's 0, the parent's pid.
///
/// # Safety
/// As `fork`: the child may make only async-signal-safe calls.
unsafe fn clone_into(dir: RawFd) -> io::Result<libc::pid_t> {
    // SAFETY: a zeroed clone_args is a valid "fork" request; the fields set
    // below are plain integers.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = libc::SIGCHLD as u64;
    args.cgroup = dir as u64;
    // SAFETY: clone3 with a valid argument block and its size.
    let pid =
        unsafe { libc::syscall(libc::SYS_clone3, &mut args as *mut libc::clone_args, size_of::<libc::clone_args>()) };
    if pid == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pid as libc::pid_t)
    }
}

/// The child's side: descriptors in place, the folder, a process group,
/// the groups, PDEATHSIG, signals, then exec; on failure the errno goes to
/// the report pipe and the child exits 127.
///
/// # Safety
/// Only between fork and exec, with `prepared` and `fds` made before the fork.
unsafe fn exec_child(
    prepared: &Prepared,
    fds: &ChildFds,
    join: &Join,
    write_v2: bool,
    shepherd: libc::pid_t,
    handed: Option<&super::Handed>,
) -> ! {
    let fail = |fds: &ChildFds| -> ! {
        let errno = io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        // SAFETY: write(2) and _exit(2) are async-signal-safe.
        unsafe {
            libc::write(fds.report, errno.to_ne_bytes().as_ptr().cast(), 4);
            libc::_exit(127)
        }
    };
    // SAFETY: async-signal-safe calls on descriptors and C strings made
    // before the fork.
    unsafe {
        for (from, to) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2)] {
            if libc::dup2(from, to) == -1 {
                fail(fds);
            }
        }
        if libc::chdir(prepared.cwd.as_ptr()) == -1 || libc::setpgid(0, 0) == -1 {
            fail(fds);
        }
        let v2 = if write_v2 { join.v2_procs } else { None };
        for fd in v2.into_iter().chain(join.v1_limits.iter().copied()) {
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                fail(fds);
            }
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
            fail(fds);
        }
        // The shepherd may have died between fork and prctl.
        if libc::getppid() != shepherd {
            libc::_exit(137);
        }
        // Nothing but its standard three: a descriptor the launcher held
        // (a folder, a terminal, a socket) is no door for the agent.
        close_above_stderr();
        // Those it is handed, open across the exec (dup2 clears the mark).
        if let Some(handed) = handed {
            if !handed.put_in_place() {
                fail(fds);
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // As execvp: the first candidate that runs; "permission denied"
        // wins over "not found" when some candidate exists but cannot run.
        let mut denied = false;
        for candidate in &prepared.candidates {
            libc::execve(candidate.as_ptr(), prepared.argv_ptrs.as_ptr(), prepared.envp_ptrs.as_ptr());
            denied |= io::Error::last_os_error().raw_os_error() == Some(libc::EACCES);
        }
        if denied {
            *libc::__errno_location() = libc::EACCES;
        }
        fail(fds)
    }
}

/// Marks every descriptor above 2 close-on-exec (`close_range`, Linux
/// 5.11; else one by one up to the limit): the report pipe stays open
/// until the exec it reports on.
///
/// # Safety
/// Only between fork and exec: async-signal-safe calls only.
unsafe fn close_above_stderr() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range, getrlimit and fcntl are async-signal-safe
    // system calls on descriptor numbers.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 { limit.rlim_cur.min(65536) } else { 4096 };
        for fd in 3..max as libc::c_int {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// A pipe whose both ends close on exec (`dup2` clears it on the copies).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors this function then owns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just made and are owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The errno the child reported, or `None` once the pipe closed on exec.
fn read_report(report: &OwnedFd) -> io::Result<Option<i32>> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        // SAFETY: read(2) into the rest of a live buffer.
        let n = unsafe { libc::read(report.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 4 - got) };
        match n {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a partial report from the agent's start")),
            -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            -1 => return Err(io::Error::last_os_error()),
            n => got += n as usize,
        }
    }
    Ok(Some(i32::from_ne_bytes(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_looked_up_on_path_in_order() {
        let found = candidates(OsStr::new("pi"), Some(OsStr::new("/a:/b")));
        assert_eq!(found, vec![OsString::from("/a/pi"), OsString::from("/b/pi")]);
        assert_eq!(candidates(OsStr::new("./x/pi"), Some(OsStr::new("/a"))), vec![OsString::from("./x/pi")]);
    }

    fn started(program: &str) -> io::Result<(StartedAgent, String)> {
        let join = Join::default();
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let args = ["-c".into(), "echo out; echo err >&2; echo $$".into()];
        let start = AgentStart {
            program: OsStr::new(program),
            args: &args,
            env,
            cwd: Path::new("/"),
            stdin: None,
            join: &join,
            handed: None,
        };
        let agent = start_agent(start)?;
        let mut out = String::new();
        io::Read::read_to_string(&mut &agent.stdout, &mut out)?;
        Ok((agent, out))
    }

    #[test]
    fn an_agent_runs_in_its_own_group_with_its_pipes() {
        let (agent, out) = started("sh").unwrap();
        let mut err = String::new();
        io::Read::read_to_string(&mut &agent.stderr, &mut err).unwrap();
        let _ = waitpid(Pid::from_raw(agent.pid), None);
        assert_eq!(out, format!("out\n{}\n", agent.pid));
        assert_eq!(err, "err\n");
    }

    #[test]
    fn a_missing_or_unrunnable_program_is_said_as_std_says_it() {
        assert_eq!(started("no-such-agent-anywhere").unwrap_err().kind(), io::ErrorKind::NotFound);
        let plain = std::env::temp_dir().join(format!("corral-not-executable-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let denied = started(plain.to_str().unwrap()).unwrap_err().kind();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(denied, io::ErrorKind::PermissionDenied);
    }
}
