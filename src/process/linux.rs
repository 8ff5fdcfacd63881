//! Linux specifics: the child-subreaper flag, and `/proc` reads (process
//! start times, parentage, environments).

use std::fs;

/// A process identity that survives pid reuse: pid plus its start time in
/// clock ticks since boot (field 22 of `/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    /// The pid.
    pub pid: i32,
    /// Its start time, clock ticks since boot.
    pub start: u64,
}

impl ProcessId {
    /// The identity of a live process, if it exists.
    pub fn of(pid: i32) -> Option<ProcessId> {
        start_time(pid).map(|start| ProcessId { pid, start })
    }

    /// True if this very process (not a reuse of its pid) is alive.
    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start) && !is_zombie(self.pid)
    }

    /// True if this very process still holds its pid: alive, or a zombie
    /// not yet reaped (its pid cannot be reused until it is).
    pub fn is_alive_or_zombie(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// A file of `/proc` (or of a cgroup), read whole in as few reads as it
/// takes: its size says 0, so a plain read starts at 32 bytes and doubles,
/// and each read of another process's `environ` locks that process's
/// memory (a launch reads every ancestor's).
pub(crate) fn read_proc(path: impl AsRef<std::path::Path>) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(8192);
    fs::File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// As [`read_proc`], as text.
pub(crate) fn read_proc_text(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    String::from_utf8(read_proc(path)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Fields of `/proc/<pid>/stat` after the command name, which may itself
/// contain spaces and parentheses.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = read_proc_text(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    Some(after_comm.split_whitespace().map(str::to_string).collect())
}

/// The start time of `pid` in clock ticks since boot.
pub fn start_time(pid: i32) -> Option<u64> {
    // Field 22 overall; after the command name, state is field 3 (index 0).
    stat_fields(pid)?.get(22 - 3)?.parse().ok()
}

/// How long ago `pid` started (to the kernel's clock tick, 10 ms here).
pub fn age(pid: i32) -> Option<std::time::Duration> {
    let started = start_time(pid)?;
    let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().filter(|t| *t > 0)? as u64;
    // The start time counts from boot, suspend included.
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let now_ticks = now.tv_sec() as u64 * tick + now.tv_nsec() as u64 * tick / 1_000_000_000;
    Some(std::time::Duration::from_millis(now_ticks.saturating_sub(started) * 1000 / tick))
}

fn is_zombie(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s == "Z" || s == "X"))
}

fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// `pid` and its ancestors, nearest first, up to (not including) pid 1.
/// One read of `/proc/<pid>/stat` each gives both who it is and its parent.
pub fn ancestry(pid: i32) -> Vec<ProcessId> {
    let mut chain = Vec::new();
    let mut current = pid;
    // A loop in /proc cannot happen, but a bound costs nothing.
    while current > 1 && chain.len() < 256 {
        let Some(fields) = stat_fields(current) else { break };
        // After the command name: the state (index 0), the parent (1), the
        // start time (field 22 overall).
        let Some(start) = fields.get(22 - 3).and_then(|s| s.parse().ok()) else { break };
        chain.push(ProcessId { pid: current, start });
        match fields.get(1).and_then(|p| p.parse().ok()) {
            Some(parent) => current = parent,
            None => break,
        }
    }
    chain
}

/// The executable `pid` runs, if it can be read (this user's processes).
pub fn exe_of(pid: i32) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The process group of `pid`.
pub fn group_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

/// The session of `pid`.
pub fn session_of(pid: i32) -> Option<i32> {
    // Field 6 overall.
    stat_fields(pid)?.get(6 - 3)?.parse().ok()
}

/// Live processes in the process group `pgid` started no earlier than
/// `since` (clock ticks since boot), in a group an agent leads or led: a
/// group whose members are in a session of the group's own id was made by
/// `setsid` (an agent, a group leader, can make none), so it is a
/// stranger's that took the id again.
pub fn group_members(pgid: i32, since: u64) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            group_of(pid) == Some(pgid)
                && session_of(pid) != Some(pgid)
                && start_time(pid).is_some_and(|s| s >= since)
                && !is_zombie(pid)
        })
        .collect()
}

/// The state letter of `pid` (`R`, `S`, `D`, `Z`, ...), for diagnostics.
pub fn state_of(pid: i32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

/// True if `pid` exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    start_time(pid).is_some() && !is_zombie(pid)
}

/// Every numeric entry of `/proc`.
fn all_pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(Result::ok).filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect()
}

/// Every live (non-zombie) descendant of `root`, at any depth, leaving out
/// each process for which `prune` is true together with its whole subtree.
pub fn descendants(root: i32, prune: impl Fn(i32) -> bool) -> Vec<i32> {
    // Each process's own list of its children, where the kernel keeps one:
    // a walk of the tree alone, not a read of every process of the machine.
    static CHILDREN_LISTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let listed = *CHILDREN_LISTED
        .get_or_init(|| std::path::Path::new(&format!("/proc/self/task/{}/children", nix::unistd::gettid())).exists());
    if listed {
        let mut found = Vec::new();
        let mut frontier = vec![root];
        while let Some(parent) = frontier.pop() {
            for pid in children_of(parent) {
                if !found.contains(&pid) && !prune(pid) {
                    found.push(pid);
                    frontier.push(pid);
                }
            }
        }
        return found;
    }
    let parents: Vec<(i32, i32)> = all_pids().into_iter().filter_map(|pid| Some((pid, parent_of(pid)?))).collect();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid) in &parents {
            if ppid == parent && !found.contains(&pid) && !prune(pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found.retain(|&pid| !is_zombie(pid));
    found
}

/// The children of `pid` (of every thread of it), ended or not.
fn every_child_of(pid: i32) -> Vec<i32> {
    let Ok(threads) = fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    threads
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|c| c.parse().ok()).collect::<Vec<i32>>())
        .collect()
}

/// The live children of `pid` (of every thread of it).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut children: Vec<i32> = every_child_of(pid).into_iter().filter(|&c| !is_zombie(c)).collect();
    children.sort_unstable();
    children.dedup();
    children
}

/// How many times `pid` was switched to so far (its voluntary and
/// involuntary context switches): unchanged across two looks, it did not
/// run between them, so what they read of it is one moment.
pub fn switches(pid: i32) -> Option<u64> {
    let status = read_proc_text(format!("/proc/{pid}/status")).ok()?;
    let count = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse::<u64>().ok());
    Some(count("voluntary_ctxt_switches:")? + count("nonvoluntary_ctxt_switches:")?)
}

/// Whether `pid` has a child that ended and is not reaped yet.
pub fn has_unreaped_child(pid: i32) -> bool {
    every_child_of(pid).into_iter().any(is_zombie)
}

/// Whether `pid` sleeps waiting for a child to end (in `wait(2)`, or in
/// `sigsuspend(2)` for SIGCHLD as a shell's `wait` does): `Some(true)` if so,
/// `Some(false)` if not, `None` if this kernel does not say (no `wchan`).
pub fn waits_for_a_child(pid: i32) -> Option<bool> {
    let wchan = fs::read_to_string(format!("/proc/{pid}/wchan")).ok()?;
    let wchan = wchan.trim();
    // `wait(2)`; or `sigsuspend(2)`, where dash's `wait` builtin sleeps
    // until SIGCHLD says a job ended.
    let waiting = matches!(wchan, "do_wait" | "kernel_wait4" | "kernel_waitid" | "__do_sys_wait4")
        || wchan.starts_with("sigsuspend")
        || wchan.starts_with("do_sigsuspend");
    if waiting {
        return Some(true);
    }
    // A sleeping process with no wait channel shown: the kernel hides it.
    let sleeping = state_of(pid).is_some_and(|s| s == 'S' || s == 'D');
    if (wchan.is_empty() || wchan == "0") && sleeping {
        return None;
    }
    Some(false)
}

/// The value of the variable `key` in `pid`'s environment (as it started).
pub fn env_var_of(pid: i32, key: &str) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = format!("{key}=").into_bytes();
    let env = read_proc(format!("/proc/{pid}/environ")).ok()?;
    let var = env.split(|&b| b == 0).find(|var| var.starts_with(&prefix))?;
    Some(std::ffi::OsStr::from_bytes(&var[prefix.len()..]).to_os_string())
}

/// True if `pid`'s environment has the variable `key` (any value).
pub fn has_env_var(pid: i32, key: &str) -> bool {
    has_any_env_var(pid, &[key])
}

/// True if `pid`'s environment has any of the variables `keys` (any
/// value): one read of it, whatever their number.
pub fn has_any_env_var(pid: i32, keys: &[&str]) -> bool {
    let prefixes: Vec<Vec<u8>> = keys.iter().map(|key| format!("{key}=").into_bytes()).collect();
    read_proc(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|var| prefixes.iter().any(|p| var.starts_with(p))))
}

/// Live processes of this user whose environment holds `key=value`: how a
/// run's escaped descendants are found after their parents are gone.
pub fn processes_with_env(key: &str, value: &str) -> Vec<ProcessId> {
    let needle = format!("{key}={value}").into_bytes();
    let me = std::process::id() as i32;
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        // Who it is is read before what it carries: a pid taken by a
        // later process between the two is a process of another start.
        .filter_map(ProcessId::of)
        .filter(|process| {
            read_proc(format!("/proc/{}/environ", process.pid))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_slice()))
        })
        .filter(|process| process.is_alive())
        .collect()
}

/// Whether this process has one thread (its threads in `/proc/self/task`).
pub(super) fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

/// Makes this process the reaper of its orphaned descendants (or stops it),
/// so a `setsid` grandchild whose parent died is still ours to find, kill
/// and reap.
pub fn set_child_subreaper(on: bool) -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(on).map_err(std::io::Error::from)
}

/// CPU seconds (user and system) of every child this process reaped, and
/// of their reaped descendants.
pub fn children_cpu_seconds() -> f64 {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
        Ok(usage) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            secs(usage.user_time()) + secs(usage.system_time())
        }
        Err(_) => 0.0,
    }
}

/// Bytes available to unprivileged writers on the filesystem holding `path`.
pub fn disk_free(path: &std::path::Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    Some(stat.blocks_available() as u64 * stat.fragment_size() as u64)
}

/// Whether a process of this user can make a user namespace (what the
/// agents' sandboxes need): tried in a forked child, so this process is
/// unchanged. The error says why not.
pub fn try_user_namespace() -> Result<(), std::io::Error> {
    // SAFETY: the child only calls unshare(2) and _exit(2), both
    // async-signal-safe, so forking while other threads run is sound.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => unsafe {
            let code = if libc::unshare(libc::CLONE_NEWUSER) == 0 { 0 } else { *libc::__errno_location() };
            libc::_exit(code.clamp(0, 255))
        },
        child => {
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            let waited = unsafe { libc::waitpid(child, &mut status, 0) };
            if waited != child || !libc::WIFEXITED(status) {
                return Err(std::io::Error::other("the test process did not exit"));
            }
            match libc::WEXITSTATUS(status) {
                0 => Ok(()),
                errno => Err(std::io::Error::from_raw_os_error(errno)),
            }
        }
    }
}

/// The TCP and UDP ports something listens on (or is bound to) on this
/// machine now, from `/proc/net`: any address, IPv4 and IPv6.
pub fn listening_ports() -> std::collections::HashSet<u16> {
    let mut ports = std::collections::HashSet::new();
    for (table, state) in [("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/net/{table}")) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(st)) = (fields.get(1), fields.get(3)) else { continue };
            if *st != state {
                continue;
            }
            if let Some(port) = local.rsplit(':').next().and_then(|hex| u16::from_str_radix(hex, 16).ok()) {
                ports.insert(port);
            }
        }
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group an agent leads is counted with its members; a group of the
    /// same shape made by `setsid` (a stranger's session, whose id may be a
    /// dead agent's taken again) is never an agent's.
    #[test]
    fn a_group_made_by_setsid_is_no_agents() {
        use std::os::unix::process::CommandExt;
        let mut led = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let mut stranger = std::process::Command::new("setsid").args(["sleep", "30"]).spawn().unwrap();
        let (led_pid, stranger_pid) = (led.id() as i32, stranger.id() as i32);
        // `setsid` forks when it leads a group already; its own child leads.
        let leader = |pid: i32| {
            (0..500).find_map(|_| {
                let found = [pid].into_iter().chain(children_of(pid)).find(|&p| session_of(p) == Some(p));
                found.or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    None
                })
            })
        };
        let session = leader(stranger_pid).expect("setsid made a session");
        assert_eq!(group_members(led_pid, 0), vec![led_pid]);
        assert!(group_members(session, 0).is_empty(), "a session's group counted as an agent's");
        for child in [&mut led, &mut stranger] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(session), nix::sys::signal::Signal::SIGKILL);
    }

    /// One read each gives who a process is and its parent, as the kernel
    /// says them apart.
    #[test]
    fn ancestry_starts_with_this_process_then_its_parent() {
        let chain = ancestry(std::process::id() as i32);
        assert_eq!(chain[0], ProcessId::of(std::process::id() as i32).unwrap());
        let parent = nix::unistd::getppid().as_raw();
        if parent > 1 {
            assert_eq!(chain[1], ProcessId::of(parent).unwrap());
        }
        assert!(chain.iter().all(|p| p.pid > 1));
    }

    #[test]
    fn knows_its_own_identity() {
        let me = ProcessId::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        let reused = ProcessId { start: me.start + 1, ..me };
        assert!(!reused.is_alive(), "a different start time is a different process");
    }

    /// A pid that another process holds now (a later start) is never
    /// signalled by the identity of the one that held it before; the one
    /// it names now is, and one that is gone is no error.
    #[test]
    fn signals_by_identity_never_by_the_number_alone() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let now = ProcessId::of(child.id() as i32).unwrap();
        let before = ProcessId { start: now.start.saturating_sub(1), ..now };
        before.signal(crate::process::Sig::Kill).unwrap();
        assert!(child.try_wait().unwrap().is_none(), "a process that took the pid was killed");
        now.signal(crate::process::Sig::Kill).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
        now.signal(crate::process::Sig::Kill).unwrap();
    }
}
