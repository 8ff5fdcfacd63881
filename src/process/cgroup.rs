//! A cgroup per run: the kernel's own list of a run's processes.
//!
//! Every process of a run (its `setup`, its agent, and whatever they start,
//! in any session, with any environment) is in the run's cgroup v2 group
//! `…/corral/<run id>`, made under this process's own group where Corral
//! may write (root, or a delegated subtree). Membership is `cgroup.procs`,
//! stop is `cgroup.kill`, the run is over when `cgroup.events` says it is
//! no longer populated, pause is `cgroup.freeze`, and CPU time is
//! `cpu.stat`. Nothing can fork its way out, and nothing is missed after a
//! shepherd dies: the group outlives it, and whoever heals the store
//! empties it.
//!
//! Limits (memory, CPU, tasks) go to the v2 group's controllers where they
//! are enabled, else to the v1 hierarchy of the same controller where one
//! is mounted (a hybrid system), else they are said not to apply. Where no
//! v2 group can be made, the caller falls back to the process tree (see
//! `shepherd::cleanup`) and says so.
//!
//! It is one file, past 500 lines, because it is one thing: every file of
//! the cgroup tree Corral reads or writes (making, joining, limiting,
//! freezing, killing, measuring and removing a run's group, on v2 and on
//! v1's freezer), and the mounts it finds them under. Split, the rules
//! of one kernel interface would be spread over several rooms.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::cost::resources::{human_bytes, Containment, ResourceLimits, Resources};

/// The folder, under the group Corral starts in, that holds the runs'
/// groups (and `shepherds`, where a child run's shepherd moves out of its
/// parent's group).
const CORRAL_DIR: &str = "corral";
/// Where shepherds started from inside a run go, so their parent run's
/// stop does not kill them.
const SHEPHERDS_DIR: &str = "shepherds";

/// A run's cgroup: the v2 group, and the v1 groups holding limits the v2
/// group cannot (on a hybrid system).
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    v1: Vec<V1Group>,
    /// The groups, open for a new process to join (none for a group
    /// opened from a record).
    joins: Option<JoinFiles>,
}

#[derive(Debug, Clone)]
struct V1Group {
    controller: String,
    dir: PathBuf,
    /// True when the group holds a limit (not only measures).
    limits: bool,
}

/// The open files behind a [`Join`].
#[derive(Debug)]
struct JoinFiles {
    into: File,
    v2_procs: File,
    v1_procs: Vec<(File, bool)>,
}

/// How a new process enters a run's groups: descriptors owned by the
/// [`RunCgroup`], which outlives every process started with them.
#[derive(Debug, Clone, Default)]
pub struct Join {
    /// The v2 group's folder, to start a process in (`clone3` with
    /// `CLONE_INTO_CGROUP`: no move, so no wait for the kernel).
    pub into: Option<RawFd>,
    /// The v2 group's `cgroup.procs`, written from the child where it
    /// could not be started in the group.
    pub v2_procs: Option<RawFd>,
    /// `cgroup.procs` of the v1 groups holding a limit: written from the
    /// child before exec, so the limit holds from its first instruction.
    pub v1_limits: Vec<RawFd>,
    /// `cgroup.procs` of the v1 groups that only measure (peak memory
    /// without a limit): written with the pid once the process started.
    pub v1_measuring: Vec<RawFd>,
}

impl RunCgroup {
    /// Makes the group of run `run_id` with `limits`. Returns the group and
    /// what was said of each limit, or why no group can be made here.
    pub fn create(run_id: &str, limits: &ResourceLimits) -> Result<(RunCgroup, Vec<String>), String> {
        let mount = v2_mount().ok_or("no cgroup v2 hierarchy is mounted")?;
        let own = own_path(None).ok_or("this process is in no cgroup v2 group")?;
        let base = mount.join(corral_base(&own));
        make_dir(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
        for controller in ["memory", "pids", "cpu"] {
            // Best effort: a controller the parent does not offer stays off.
            if read_words(&base.join("cgroup.controllers")).iter().any(|c| c == controller) {
                let _ = fs::write(base.join("cgroup.subtree_control"), format!("+{controller}"));
            }
        }
        let dir = base.join(run_id);
        make_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut group = RunCgroup { dir, v1: Vec::new(), joins: None };
        let notes = group.apply(run_id, limits);
        let open = |path: &Path, write: bool| {
            OpenOptions::new()
                .read(!write)
                .write(write)
                .custom_flags(libc::O_CLOEXEC | if write { 0 } else { libc::O_DIRECTORY })
                .open(path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let mut v1_procs = Vec::new();
        for v1 in &group.v1 {
            v1_procs.push((open(&v1.dir.join("cgroup.procs"), true)?, v1.limits));
        }
        group.joins = Some(JoinFiles {
            into: open(&group.dir, false)?,
            v2_procs: open(&group.dir.join("cgroup.procs"), true)?,
            v1_procs,
        });
        Ok((group, notes))
    }

    /// The group recorded for a run, if its folders still exist.
    pub fn open(containment: &Containment) -> Option<RunCgroup> {
        let dir = PathBuf::from(containment.cgroup.as_ref()?);
        if !dir.is_dir() {
            return None;
        }
        let v1 = containment
            .v1
            .iter()
            .filter(|d| Path::new(d).is_dir())
            .map(|d| V1Group { controller: v1_controller_of(Path::new(d)), dir: PathBuf::from(d), limits: false })
            .collect();
        Some(RunCgroup { dir, v1, joins: None })
    }

    /// The v2 group's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How the run is held, to record with it.
    pub fn containment(&self, notes: Vec<String>) -> Containment {
        Containment {
            cgroup: Some(self.dir.to_string_lossy().into_owned()),
            v1: self.v1.iter().map(|g| g.dir.to_string_lossy().into_owned()).collect(),
            notes,
        }
    }

    /// How a new process joins the run's groups (see `start::start_agent`
    /// and `unix::prepare_agent`); nothing for a group opened from a record.
    pub fn join(&self) -> Join {
        let Some(files) = &self.joins else { return Join::default() };
        let v1 = |limits: bool| {
            files.v1_procs.iter().filter(|(_, l)| *l == limits).map(|(f, _)| f.as_raw_fd()).collect::<Vec<_>>()
        };
        Join {
            into: Some(files.into.as_raw_fd()),
            v2_procs: Some(files.v2_procs.as_raw_fd()),
            v1_limits: v1(true),
            v1_measuring: v1(false),
        }
    }

    /// Applies each limit where a controller takes it; says what happened.
    fn apply(&mut self, run_id: &str, limits: &ResourceLimits) -> Vec<String> {
        let mut notes = Vec::new();
        let v2 = read_words(&self.dir.join("cgroup.controllers"));
        let mut set = |controller: &str,
                       what: String,
                       v2_files: &[(&str, String)],
                       v1_files: &[(&str, String)],
                       this: &mut RunCgroup| {
            if v2.iter().any(|c| c == controller) {
                let written = v2_files.iter().try_for_each(|(file, value)| fs::write(this.dir.join(file), value));
                match written {
                    Ok(()) => return notes.push(format!("{what} (cgroup v2 {controller})")),
                    Err(e) => return notes.push(format!("{what} not applied: cgroup v2 {controller}: {e}")),
                }
            }
            match this.v1_group(controller, run_id, true) {
                Ok(dir) => {
                    let written = v1_files.iter().try_for_each(|(file, value)| fs::write(dir.join(file), value));
                    match written {
                        Ok(()) => notes.push(format!("{what} (cgroup v1 {controller})")),
                        Err(e) => notes.push(format!("{what} not applied: cgroup v1 {controller}: {e}")),
                    }
                }
                Err(why) => notes.push(format!("{what} not applied: {why}")),
            }
        };
        if let Some(bytes) = limits.memory_bytes {
            let what = format!("memory limit {}", human_bytes(bytes));
            set(
                "memory",
                what,
                &[("memory.max", bytes.to_string())],
                &[("memory.limit_in_bytes", bytes.to_string())],
                self,
            );
            // Best effort: swap must not stretch the limit, where swap is
            // accounted at all.
            let _ = fs::write(self.dir.join("memory.swap.max"), "0");
            if let Some(group) = self.v1.iter().find(|g| g.controller == "memory") {
                let _ = fs::write(group.dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
            }
        }
        if let Some(tasks) = limits.tasks {
            let what = format!("tasks limit {tasks}");
            set("pids", what, &[("pids.max", tasks.to_string())], &[("pids.max", tasks.to_string())], self);
        }
        if let Some(percent) = limits.cpu_percent {
            let what = format!("CPU limit {percent}%");
            let period = 100_000u64;
            let quota = period * percent as u64 / 100;
            set(
                "cpu",
                what,
                &[("cpu.max", format!("{quota} {period}"))],
                &[("cpu.cfs_period_us", period.to_string()), ("cpu.cfs_quota_us", quota.to_string())],
                self,
            );
        }
        // Peak memory is measured even without a limit, where it can be.
        if !v2.iter().any(|c| c == "memory") {
            let _ = self.v1_group("memory", run_id, false);
        }
        notes
    }

    /// The run's group in the v1 hierarchy of `controller`, made if needed.
    fn v1_group(&mut self, controller: &str, run_id: &str, limits: bool) -> Result<PathBuf, String> {
        if let Some(group) = self.v1.iter_mut().find(|g| g.controller == controller) {
            group.limits |= limits;
            return Ok(group.dir.clone());
        }
        let mount = v1_mount(controller).ok_or_else(|| format!("no {controller} controller on this system"))?;
        let own = own_path(Some(controller)).ok_or_else(|| format!("this process is in no {controller} group"))?;
        let base = mount.join(corral_base(&own));
        let dir = base.join(run_id);
        make_dir(&base).and_then(|()| make_dir(&dir)).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        if controller == "memory" {
            // Children count toward the limit (the default on most systems).
            let _ = fs::write(dir.join("memory.use_hierarchy"), "1");
        }
        self.v1.push(V1Group { controller: controller.to_string(), dir: dir.clone(), limits });
        Ok(dir)
    }

    /// Every process in the run's group and the groups below it.
    pub fn procs(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
            dirs.extend(sub_groups(&dir));
        }
        pids
    }

    /// True while any process is in the group (or below it). A group whose
    /// folder is gone holds nothing.
    pub fn is_populated(&self) -> bool {
        match fs::read_to_string(self.dir.join("cgroup.events")) {
            Ok(text) => key_value(&text, "populated").is_some_and(|v| v != 0),
            Err(_) => false,
        }
    }

    /// Kills every process of the group at once (`cgroup.kill`); on a
    /// kernel without it, freezes the group, kills each process, thaws.
    pub fn kill(&self) -> io::Result<()> {
        match fs::write(self.dir.join("cgroup.kill"), "1") {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.dir.is_dir() => {
                let _ = self.freeze(true);
                for process in self.procs().into_iter().filter_map(super::ProcessId::of) {
                    let _ = process.signal(super::Sig::Kill);
                }
                self.freeze(false)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Freezes (or thaws) every process of the group.
    pub fn freeze(&self, frozen: bool) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.freeze"), if frozen { "1" } else { "0" })
    }

    /// True once every process of the group is frozen.
    pub fn is_frozen(&self) -> bool {
        fs::read_to_string(self.dir.join("cgroup.events"))
            .ok()
            .and_then(|text| key_value(&text, "frozen"))
            .is_some_and(|v| v == 1)
    }

    /// What the group's processes used so far.
    pub fn usage(&self) -> Resources {
        let cpu_usec = fs::read_to_string(self.dir.join("cpu.stat")).ok().and_then(|t| key_value(&t, "usage_usec"));
        let peak = fs::read_to_string(self.dir.join("memory.peak"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .or_else(|| self.v1_read("memory", "memory.max_usage_in_bytes"))
            // No process charged a byte: the group was never accounted (a
            // cgroup v1 memory hierarchy the run was not in), so nothing
            // was measured, which `0 B` would misstate.
            .filter(|&bytes: &u64| bytes > 0);
        Resources { cpu_seconds: cpu_usec.unwrap_or(0) as f64 / 1e6, memory_peak_bytes: peak }
    }

    /// How many processes of the run the OOM killer ended.
    pub fn oom_kills(&self) -> u64 {
        let v2 = fs::read_to_string(self.dir.join("memory.events")).ok().and_then(|t| key_value(&t, "oom_kill"));
        let v1 = self
            .v1
            .iter()
            .find(|g| g.controller == "memory")
            .and_then(|g| fs::read_to_string(g.dir.join("memory.oom_control")).ok())
            .and_then(|t| key_value(&t, "oom_kill"));
        v2.unwrap_or(0).max(v1.unwrap_or(0))
    }

    fn v1_read(&self, controller: &str, file: &str) -> Option<u64> {
        let group = self.v1.iter().find(|g| g.controller == controller)?;
        fs::read_to_string(group.dir.join(file)).ok()?.trim().parse().ok()
    }

    /// Removes the run's groups, deepest first. Only an empty group can go;
    /// one that cannot is left for the next heal.
    pub fn remove(&self) -> io::Result<()> {
        // Each goes if it can, whatever the others do.
        let mut result = remove_tree(&self.dir);
        for group in &self.v1 {
            result = result.and(remove_tree(&group.dir));
        }
        result
    }
}

/// Moves this process out of a run's group, if it is in one: a shepherd
/// started by a run's agent (a child run) must not be stopped with its
/// parent, nor keep its parent's group populated.
pub fn leave_run_group() -> io::Result<()> {
    // The v2 group, and the v1 groups of a hybrid system's limits.
    let mut result = Ok(());
    if let (Some(mount), Some(own)) = (v2_mount(), own_path(None)) {
        result = leave(&mount, &own);
    }
    for controller in ["memory", "pids", "cpu"] {
        if let (Some(mount), Some(own)) = (v1_mount(controller), own_path(Some(controller))) {
            result = result.and(leave(&mount, &own));
        }
    }
    result
}

/// Moves this process from the run's group `own` of the hierarchy at
/// `mount` to the shepherds' group beside it; nothing if `own` is no run's.
fn leave(mount: &Path, own: &str) -> io::Result<()> {
    let parts: Vec<&str> = own.split('/').filter(|p| !p.is_empty()).collect();
    let Some(at) = parts.iter().position(|p| *p == CORRAL_DIR) else { return Ok(()) };
    if parts.get(at + 1).is_none_or(|p| *p == SHEPHERDS_DIR) {
        return Ok(());
    }
    let shepherds = mount.join(corral_base(own)).join(SHEPHERDS_DIR);
    make_dir(&shepherds)?;
    fs::write(shepherds.join("cgroup.procs"), std::process::id().to_string())
}

/// Moves this process into the groups process `pid` is in (the v2 one,
/// and a hybrid system's v1 ones Corral uses), where they differ: the runs
/// it starts are then made where `pid`'s would be.
pub fn join_groups_of(pid: i32) -> io::Result<()> {
    let hierarchies = [(None, v2_mount())].into_iter().chain(["memory", "pids", "cpu"].map(|c| (Some(c), v1_mount(c))));
    for (controller, mount) in hierarchies {
        let Some(mount) = mount else { continue };
        let (Some(theirs), Some(ours)) = (path_of(&pid.to_string(), controller), own_path(controller)) else {
            continue;
        };
        if theirs != ours {
            let procs = mount.join(theirs.trim_start_matches('/')).join("cgroup.procs");
            fs::write(&procs, std::process::id().to_string())
                .map_err(|e| io::Error::other(format!("{}: {e}", procs.display())))?;
        }
    }
    Ok(())
}

/// The run whose cgroup holds process `pid`, if one does: the kernel's
/// word for which run a process belongs to, whatever its environment says.
pub fn run_of(pid: i32) -> Option<String> {
    let text = super::linux::read_proc_text(format!("/proc/{pid}/cgroup")).ok()?;
    let own = text.lines().find_map(|line| line.strip_prefix("0::"))?;
    let parts: Vec<&str> = own.split('/').filter(|p| !p.is_empty()).collect();
    let at = parts.iter().rposition(|p| *p == CORRAL_DIR)?;
    parts.get(at + 1).filter(|id| **id != SHEPHERDS_DIR).map(|id| id.to_string())
}

/// True if process `pid` is in the v2 group at `dir` or below it.
pub fn is_in(pid: i32, dir: &Path) -> bool {
    let Some(mount) = v2_mount() else { return false };
    let Ok(text) = super::linux::read_proc_text(format!("/proc/{pid}/cgroup")) else { return false };
    let Some(own) = text.lines().find_map(|line| line.strip_prefix("0::")) else { return false };
    mount.join(own.trim_start_matches('/')).starts_with(dir)
}

/// Writes `0` to each `cgroup.procs` of `join`: joins the calling process
/// to every group. Only async-signal-safe calls: it runs between fork and
/// exec.
pub(super) fn join_from_child(join: &Join) -> io::Result<()> {
    let all = join.v2_procs.iter().chain(&join.v1_limits).chain(&join.v1_measuring);
    for &fd in all {
        // SAFETY: write(2) on a descriptor the parent keeps open.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Where the cgroup v2 hierarchy is mounted.
fn v2_mount() -> Option<PathBuf> {
    mounts().iter().find(|m| m.fstype == "cgroup2").map(|m| m.point.clone())
}

/// Where the v1 hierarchy of `controller` is mounted.
fn v1_mount(controller: &str) -> Option<PathBuf> {
    mounts()
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == controller))
        .map(|m| m.point.clone())
}

/// The controller of a v1 group's folder, from its mount.
fn v1_controller_of(dir: &Path) -> String {
    mounts()
        .iter()
        .filter(|m| m.fstype == "cgroup" && dir.starts_with(&m.point))
        .flat_map(|m| m.options.split(','))
        .map(str::to_string)
        .find(|o| ["memory", "pids", "cpu"].contains(&o.as_str()))
        .unwrap_or_default()
}

struct Mount {
    point: PathBuf,
    fstype: String,
    options: String,
}

/// The mount table, read once per process: cgroup hierarchies are mounted
/// at boot, and a run's start asks for them several times.
fn mounts() -> &'static [Mount] {
    static MOUNTS: std::sync::OnceLock<Vec<Mount>> = std::sync::OnceLock::new();
    MOUNTS.get_or_init(read_mounts)
}

fn read_mounts() -> Vec<Mount> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let point = before.split(' ').nth(4)?;
            let mut after = after.split(' ');
            let fstype = after.next()?.to_string();
            let _source = after.next();
            let options = after.next().unwrap_or("").to_string();
            Some(Mount { point: PathBuf::from(point.replace("\\040", " ")), fstype, options })
        })
        .collect()
}

/// This process's group: the v2 one (`None`), or a v1 controller's.
fn own_path(controller: Option<&str>) -> Option<String> {
    path_of("self", controller)
}

/// Process `pid`'s (or `self`'s) group: the v2 one (`None`), or a v1
/// controller's.
fn path_of(pid: &str, controller: Option<&str>) -> Option<String> {
    let text = super::linux::read_proc_text(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let matches = match controller {
            None => controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        matches.then(|| path.to_string())
    })
}

/// `own` up to its `corral` folder (a process of a run is inside it), then
/// `corral`: every run and shepherd of one starting point share one folder.
fn corral_base(own: &str) -> PathBuf {
    let parts: Vec<&str> = own.split('/').filter(|p| !p.is_empty()).collect();
    let end = parts.iter().position(|p| *p == CORRAL_DIR).unwrap_or(parts.len());
    parts[..end].iter().collect::<PathBuf>().join(CORRAL_DIR)
}

fn make_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

fn sub_groups(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(Result::ok).filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()
}

fn remove_tree(dir: &Path) -> io::Result<()> {
    for sub in sub_groups(dir) {
        remove_tree(&sub)?;
    }
    match fs::remove_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn read_words(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// The number after `key` in a flat-keyed cgroup file (`key value` lines).
fn key_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Says why a shepherd cannot use a cgroup here, for tests: `None` if it
/// can.
pub fn unavailable() -> Option<String> {
    probe(&ResourceLimits::default()).err()
}

/// Makes and removes a group as a run launched from this process would get
/// it, with `limits`: what was said of each limit and where the group was,
/// or why no group can be made (`corral doctor`).
pub fn probe(limits: &ResourceLimits) -> Result<(PathBuf, Vec<String>), String> {
    let probe = format!("probe-{}", std::process::id());
    let (group, mut notes) = RunCgroup::create(&probe, limits)?;
    let dir = group.dir().to_path_buf();
    for (file, what) in [("cgroup.kill", "abort kills the whole group at once"), ("cgroup.freeze", "pause freezes it")]
    {
        if !dir.join(file).exists() {
            notes.push(format!("no {file} (a kernel older than 5.14?): {what} one process at a time instead"));
        }
    }
    let _ = group.remove();
    Ok((dir, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_started_from_inside_a_run_share_its_corral_folder() {
        assert_eq!(corral_base("/"), PathBuf::from("corral"));
        assert_eq!(corral_base("/user.slice/app.scope"), PathBuf::from("user.slice/app.scope/corral"));
        assert_eq!(corral_base("/user.slice/app.scope/corral/abc123"), PathBuf::from("user.slice/app.scope/corral"));
        assert_eq!(corral_base("/corral/shepherds"), PathBuf::from("corral"));
    }

    #[test]
    fn reads_flat_keyed_files() {
        let text = "populated 1\nfrozen 0\n";
        assert_eq!(key_value(text, "populated"), Some(1));
        assert_eq!(key_value(text, "frozen"), Some(0));
        assert_eq!(key_value(text, "missing"), None);
    }
}
