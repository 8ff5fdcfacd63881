//! Becoming as another process of the user's would have made it: what a
//! template's spare does before it launches for a launcher, so a warm run
//! starts as a cold one would (the launcher's umask, limits, priority and
//! cgroup), or is left to the cold path where that cannot be (another
//! no_new_privs, seccomp filter, CPU affinity, capabilities, scheduling
//! policy or I/O class).

use std::fs;
use std::io;

/// Why this process cannot be made as the other one.
#[derive(Debug, thiserror::Error)]
pub enum Unlike {
    /// It runs in another namespace, which a process cannot join here.
    #[error("it runs in another {0} namespace")]
    Namespace(&'static str),
    /// Its groups differ.
    #[error("its groups differ ({0})")]
    Groups(String),
    /// An attribute this process does not take on differs (it would be
    /// lost: a launch through the template is never looser than cold).
    #[error("its {0} differs")]
    Attribute(&'static str),
    /// Reading or taking on one of its attributes failed.
    #[error("{doing}: {source}")]
    Os { doing: String, source: io::Error },
}

fn os(doing: impl Into<String>) -> impl FnOnce(io::Error) -> Unlike {
    let doing = doing.into();
    move |source| Unlike::Os { doing, source }
}

/// What `pid` has that this process must match, read from `/proc`.
fn status_field(pid: i32, name: &str) -> io::Result<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|line| line.strip_prefix(name).map(|rest| rest.trim().to_string()))
        .ok_or_else(|| io::Error::other(format!("no {name} in /proc/{pid}/status")))
}

/// Takes on process `pid`'s umask, resource limits, priority and cgroups;
/// refuses (with why) where it differs in what this process cannot take
/// on: its namespaces, its groups, a limit above this process's hard one.
pub fn become_like(pid: i32) -> Result<(), Unlike> {
    for ns in ["mnt", "pid", "net", "user", "ipc", "uts", "cgroup"] {
        let theirs =
            fs::read_link(format!("/proc/{pid}/ns/{ns}")).map_err(os(format!("reading its {ns} namespace")))?;
        let ours = fs::read_link(format!("/proc/self/ns/{ns}")).map_err(os(format!("reading our {ns} namespace")))?;
        if theirs != ours {
            return Err(Unlike::Namespace(ns));
        }
    }
    for field in ["Gid:", "Groups:"] {
        let theirs = status_field(pid, field).map_err(os("reading its groups"))?;
        let ours = status_field(std::process::id() as i32, field).map_err(os("reading our groups"))?;
        if theirs != ours {
            return Err(Unlike::Groups(format!("{field} {theirs}")));
        }
    }
    // What a spare cannot take on (no_new_privs is one-way, a seccomp
    // filter is the launcher's own), or does not: the same, or cold.
    for (field, what) in [
        ("NoNewPrivs:", "no_new_privs"),
        ("Seccomp:", "seccomp filter"),
        ("Cpus_allowed_list:", "CPU affinity"),
        ("Mems_allowed_list:", "memory nodes"),
        ("CapInh:", "inheritable capabilities"),
        ("CapBnd:", "capability bounding set"),
        ("CapAmb:", "ambient capabilities"),
    ] {
        let theirs = status_field(pid, field).map_err(os(format!("reading its {what}")))?;
        let ours = status_field(std::process::id() as i32, field).map_err(os(format!("reading our {what}")))?;
        if theirs != ours {
            return Err(Unlike::Attribute(what));
        }
    }
    // SAFETY: sched_getscheduler reads a process's scheduling policy.
    if unsafe { libc::sched_getscheduler(pid) != libc::sched_getscheduler(0) } {
        return Err(Unlike::Attribute("scheduling policy"));
    }
    let umask = status_field(pid, "Umask:").map_err(os("reading its umask"))?;
    let umask = u32::from_str_radix(&umask, 8).map_err(|e| os("reading its umask")(io::Error::other(e)))?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(umask));
    take_limits(pid)?;
    take_priority(pid)?;
    // The I/O class, once the priority it follows by default is taken on.
    // SAFETY: the ioprio_get system call reads a process's I/O priority
    // (1: IOPRIO_WHO_PROCESS; 0: this process).
    if unsafe { libc::syscall(libc::SYS_ioprio_get, 1, pid) != libc::syscall(libc::SYS_ioprio_get, 1, 0) } {
        return Err(Unlike::Attribute("I/O class"));
    }
    super::cgroup::join_groups_of(pid).map_err(os("joining its cgroup"))
}

/// Every resource limit of `pid`, set on this process.
fn take_limits(pid: i32) -> Result<(), Unlike> {
    // RLIMIT_CPU (0) to RLIMIT_RTTIME (15): every limit Linux has.
    for resource in 0..16u32 {
        let mut theirs = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: prlimit reads `pid`'s limit into `theirs`; a null new
        // limit changes nothing.
        if unsafe { libc::prlimit(pid, resource as _, std::ptr::null(), &mut theirs) } != 0 {
            return Err(os(format!("reading its limit {resource}"))(io::Error::last_os_error()));
        }
        // SAFETY: prlimit on this process with a limit read above.
        if unsafe { libc::prlimit(0, resource as _, &theirs, std::ptr::null_mut()) } != 0 {
            return Err(os(format!("taking on its limit {resource}"))(io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// `pid`'s nice value, set on this process.
fn take_priority(pid: i32) -> Result<(), Unlike> {
    nix::errno::Errno::clear();
    // SAFETY: getpriority reads a process's nice value.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(os("reading its priority")(io::Error::last_os_error()));
    }
    // SAFETY: setpriority on this process.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(os(format!("taking on its priority {nice}"))(io::Error::last_os_error()));
    }
    Ok(())
}
