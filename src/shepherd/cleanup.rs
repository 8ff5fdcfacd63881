//! The stop sequence, and the log of every signal sent.
//!
//! After an outcome: a grace for the agent to exit by itself, then SIGTERM
//! (with SIGCONT, so a stopped process can act on it) to its group, then,
//! after the stop grace, every process of the run is killed: its cgroup at
//! once (`cgroup.kill`; the kernel says when it is empty), or without one
//! SIGKILL to the group and to every other descendant — including `setsid`
//! escapees, which the shepherd inherits as subreaper, and anything
//! carrying the run's id in its environment — repeated until none is left,
//! or until [`KILL_GIVE_UP`] says some cannot be killed
//! (another user's process, one stuck in the kernel): those are named in
//! `signals.log` and the run moves on, so its slot is never held forever.
//!
//! The cgroup is the first net, not the only one: a process can leave it
//! (`systemd-run --user --scope`, tmux, a container runtime move themselves
//! to a group of their own), so the process tree is swept behind it. Only
//! the shepherds of this store's other runs (its child runs, or runs one of
//! its processes started from the queue), as the store records them (pid
//! and start time), are not the run's: no environment variable exempts a
//! process, whatever installation it names.
//!
//! The group is signalled only while it is still the run's: once the agent
//! (the group's leader) is reaped and no process of the run is in the
//! group, its id may be reused by a stranger's group, which must never get
//! the run's signals.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cost::resources::Resources;
use crate::home::{self, Home};
use crate::process::cgroup::RunCgroup;
use crate::process::{self, ProcessId, Sig};
use crate::run::env::{RUN_ID_ENV, SHEPHERD_ENV};
use crate::store::Store;
use crate::text::time;

/// The first pause between SIGKILL sweeps; it doubles up to [`KILL_SWEEP_MAX`]
/// (each sweep reads all of `/proc`).
const KILL_SWEEP: Duration = Duration::from_millis(20);
/// The longest pause between SIGKILL sweeps.
const KILL_SWEEP_MAX: Duration = Duration::from_millis(500);
/// How long SIGKILL sweeps go on before the survivors are declared
/// unkillable and the run moves on without them.
pub(super) const KILL_GIVE_UP: Duration = Duration::from_secs(10);

/// Where the sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing asked yet.
    Idle,
    /// The outcome is in; the agent may still exit by itself until then.
    Grace { until: Instant },
    /// The group was asked to stop; SIGKILL comes at `until`.
    Terminated { until: Instant },
    /// Everything left is being killed; next sweep at `next`, after a
    /// pause of `pause`; given up at `until`.
    Killing { next: Instant, pause: Duration, until: Instant },
    /// SIGKILL did not end every process: the run moves on without them.
    GaveUp,
}

/// Drives the stop sequence of one run.
pub(super) struct Cleanup {
    stage: Stage,
    run_id: String,
    shepherd: i32,
    /// The agent: its pid is the group's id (`None` before it started).
    leader: Option<ProcessId>,
    /// The run's cgroup: the exact list of its processes, where one could
    /// be made; else the process tree and the environment are followed.
    cgroup: Option<RunCgroup>,
    exit_grace: Duration,
    stop_grace: Duration,
    /// The first signal of a stop: SIGTERM, or SIGINT for agents that stop
    /// cleanly on it.
    first: Sig,
    log: SignalsLog,
    /// The installation, to tell its runs' shepherds apart.
    home: Home,
    /// A connection of its own, opened the first time a process that says
    /// it is a shepherd is met (runtime state).
    store: Option<Store>,
    /// CPU time, in microseconds, of other runs' shepherds this one reaped
    /// (adopted as subreaper): theirs, not this run's (runtime state).
    spared_micros: u64,
}

/// `signals.log`, made at its first signal (or failure to stop): a run
/// whose agent ends by itself with nothing left behind has none, and a
/// file made for every run is an inode each launch pays for. What the run
/// did before (its agents' starts and ends) is held until then, so the
/// file tells the whole story (runtime state).
struct SignalsLog {
    path: PathBuf,
    file: Option<File>,
    /// Lines said before the file was made, stamped when said: at most
    /// [`HELD_LINES`], the latest.
    held: std::collections::VecDeque<String>,
}

/// The most lines held for a `signals.log` not made yet: a run of many
/// turns with nothing to stop keeps only its latest.
const HELD_LINES: usize = 64;

impl Cleanup {
    pub(super) fn new(
        home: &Home,
        run_id: &str,
        shepherd: i32,
        cgroup: Option<RunCgroup>,
        (exit_grace, stop_grace): (Duration, Duration),
        first: Sig,
        log: PathBuf,
    ) -> Cleanup {
        Cleanup {
            stage: Stage::Idle,
            run_id: run_id.to_string(),
            shepherd,
            leader: None,
            cgroup,
            exit_grace,
            stop_grace,
            first,
            log: SignalsLog { path: log, file: None, held: Default::default() },
            home: home.clone(),
            store: None,
            spared_micros: 0,
        }
    }

    /// A new agent process (the first, or a continuation turn's) leads the
    /// run's process group now.
    pub(super) fn restart(&mut self, leader: ProcessId) {
        self.stage = Stage::Idle;
        self.leader = Some(leader);
    }

    /// The run's cgroup, if it has one.
    pub(super) fn cgroup(&self) -> Option<&RunCgroup> {
        self.cgroup.as_ref()
    }

    /// True once no process of the run is left. With a cgroup, the kernel
    /// says so. Without one, a scan of `/proc` can miss a process that was
    /// forked while it read (its parent exited and it was adopted by the
    /// shepherd after the scan): so the tree is empty only when a scan
    /// finds nothing, nothing was left to reap, and a second scan agrees.
    pub(super) fn is_empty(&mut self) -> bool {
        if let Some(group) = &self.cgroup {
            return !group.is_populated() && self.escaped().is_empty();
        }
        if !self.own_processes().is_empty() {
            return false;
        }
        match process::reap_any() {
            Ok(Some(_)) => false,
            _ => self.own_processes().is_empty(),
        }
    }

    /// Kills every process of a run whose agent never started (setup's,
    /// say) and reaps them: returns once none is left, or after
    /// [`KILL_GIVE_UP`] (naming the survivors in `signals.log`).
    pub(super) fn sweep(&mut self, why: &str) {
        let deadline = Instant::now() + KILL_GIVE_UP;
        let mut noted = false;
        loop {
            while let Ok(Some(reaped)) = process::reap_any() {
                self.reaped_other(reaped);
            }
            if self.is_empty() {
                return;
            }
            if !noted {
                self.note(&format!("stopping what is left of the run: {why}"));
                noted = true;
            }
            if Instant::now() >= deadline {
                return self.give_up();
            }
            self.kill_all();
            std::thread::sleep(KILL_SWEEP / 4);
        }
    }

    /// What the run's processes used: from its cgroup, else the CPU time
    /// of the processes this shepherd reaped, less other runs' shepherds it
    /// adopted (peak memory is not known).
    pub(super) fn resources(&self) -> Resources {
        match &self.cgroup {
            Some(group) => group.usage(),
            None => {
                let cpu_seconds = (process::children_cpu_seconds() - self.spared_micros as f64 / 1e6).max(0.0);
                Resources { cpu_seconds, memory_peak_bytes: None }
            }
        }
    }

    /// A process this shepherd reaped that was not its agent: if it was
    /// the shepherd of another run of the store (a child run's, adopted as
    /// subreaper), what it and its agent used was that run's, and is left
    /// out of this run's CPU.
    pub(super) fn reaped_other(&mut self, reaped: process::Reaped) {
        if self.cgroup.is_some() || reaped.cpu_micros == 0 {
            return;
        }
        if self.store.is_none() {
            self.store = Store::open(&self.home).ok();
        }
        let Some(store) = &self.store else { return };
        if store.is_shepherd_of_another(reaped.pid, &self.run_id).unwrap_or(false) {
            self.spared_micros += reaped.cpu_micros;
        }
    }

    /// Freezes (or thaws) every process of the run: its cgroup, waiting (at
    /// most a second) until the kernel says all are frozen; else SIGSTOP (or
    /// SIGCONT) to the agent's group and each process found.
    pub(super) fn freeze(&mut self, frozen: bool) {
        if let Some(group) = &self.cgroup {
            let result = group.freeze(frozen);
            let deadline = Instant::now() + Duration::from_secs(1);
            while frozen && result.is_ok() && !group.is_frozen() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let dir = group.dir().display().to_string();
            let what = if frozen { "frozen" } else { "thawed" };
            let failed = result.err().map(|e| format!(" (failed: {e})")).unwrap_or_default();
            self.note(&format!("cgroup {dir} {what}{failed}"));
        } else {
            self.signal_group(if frozen { Sig::Stop } else { Sig::Cont });
        }
        // Those that left the group are stopped one by one.
        let sig = if frozen { Sig::Stop } else { Sig::Cont };
        for process in self.escaped() {
            let _ = process.signal(sig);
        }
    }

    /// How many of the run's processes the OOM killer ended.
    pub(super) fn oom_kills(&self) -> u64 {
        self.cgroup.as_ref().map_or(0, RunCgroup::oom_kills)
    }

    /// Removes the run's cgroup once it is empty (an error is noted in
    /// `signals.log`; an empty group left behind holds nothing).
    pub(super) fn remove_cgroup(&mut self) {
        let Some(group) = &self.cgroup else { return };
        if let Err(e) = group.remove() {
            let dir = group.dir().display().to_string();
            self.note(&format!("cannot remove the run's cgroup {dir}: {e}"));
        }
    }

    /// True once SIGKILL sweeps gave up on processes that would not die.
    pub(super) fn gave_up(&self) -> bool {
        self.stage == Stage::GaveUp
    }

    /// The agent's turn is over: give its processes their exit grace.
    pub(super) fn after_outcome(&mut self, now: Instant) {
        if self.stage == Stage::Idle {
            self.stage = Stage::Grace { until: now + self.exit_grace };
        }
    }

    /// Stop now: signal the group (SIGTERM or SIGINT, then SIGCONT so a
    /// stopped process can act on it), then SIGKILL after the stop grace.
    /// Does nothing if the sequence is already past this point.
    pub(super) fn stop(&mut self, now: Instant, why: &str) {
        if matches!(self.stage, Stage::Idle | Stage::Grace { .. }) {
            self.note(&format!("stopping: {why}"));
            self.signal_group(self.first);
            self.signal_group(Sig::Cont);
            self.stage = Stage::Terminated { until: now + self.stop_grace };
        }
    }

    /// When the sequence next needs to act.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Idle | Stage::GaveUp => None,
            Stage::Grace { until } | Stage::Terminated { until } => Some(until),
            Stage::Killing { next, .. } => Some(next),
        }
    }

    /// Advances the sequence if its deadline has passed.
    pub(super) fn tick(&mut self, now: Instant) {
        match self.stage {
            Stage::Grace { until } if now >= until => {
                self.stop(now, "exit grace is over and processes remain");
            }
            Stage::Terminated { until } if now >= until => {
                self.note("stop grace is over");
                self.kill_all();
                self.stage = Stage::Killing { next: now + KILL_SWEEP, pause: KILL_SWEEP, until: now + KILL_GIVE_UP };
            }
            Stage::Killing { until, .. } if now >= until => self.give_up(),
            Stage::Killing { next, pause, until } if now >= next => {
                self.kill_all();
                let pause = (pause * 2).min(KILL_SWEEP_MAX);
                self.stage = Stage::Killing { next: now + pause, pause, until };
            }
            _ => {}
        }
    }

    /// Every live process of this run other than the shepherd: its cgroup's
    /// and those that left it; without a cgroup, its descendants (orphans
    /// included, adopted as subreaper) and anything carrying the run's id.
    /// The shepherds of this store's other runs are not this run's, nor
    /// their trees.
    /// Each is known by its identity as found: signalled later, a pid
    /// another process took meanwhile is not.
    pub(super) fn own_processes(&mut self) -> Vec<ProcessId> {
        let mut found: Vec<ProcessId> = match &self.cgroup {
            Some(group) => group.procs().into_iter().filter_map(ProcessId::of).collect(),
            None => Vec::new(),
        };
        for process in self.escaped() {
            if !found.iter().any(|p| p.pid == process.pid) {
                found.push(process);
            }
        }
        found
    }

    /// The run's processes outside its cgroup: with one, the descendants
    /// that moved to another group; without, every process of the run.
    /// The environment is read only without a cgroup: with one, a stranger
    /// carrying the run's id (a stale terminal) is not the run's.
    fn escaped(&mut self) -> Vec<ProcessId> {
        let group = self.cgroup.as_ref().map(|g| g.dir().to_path_buf());
        let mut found: Vec<ProcessId> = self
            .tree()
            .into_iter()
            .filter(|&pid| !group.as_ref().is_some_and(|dir| process::cgroup::is_in(pid, dir)))
            .filter_map(ProcessId::of)
            .collect();
        if group.is_none() {
            for process in process::processes_with_env(RUN_ID_ENV, &self.run_id) {
                if !found.iter().any(|p| p.pid == process.pid) {
                    found.push(process);
                }
            }
        }
        found
    }

    /// The shepherd's live descendants, leaving out the shepherds of this
    /// store's other runs and their trees. A process that merely says it is
    /// a shepherd (`CORRAL_SHEPHERD`) is checked against the store.
    fn tree(&mut self) -> Vec<i32> {
        let me = self.shepherd;
        let mut found = Vec::new();
        let mut roots = vec![me];
        let mut children: Option<Vec<ProcessId>> = None;
        while let Some(root) = roots.pop() {
            let claimers = std::cell::RefCell::new(Vec::new());
            found.extend(process::descendants(root, |pid| {
                let claims = process::has_env_var(pid, SHEPHERD_ENV);
                if claims {
                    claimers.borrow_mut().push(pid);
                }
                claims
            }));
            for pid in claimers.into_inner() {
                let children = children.get_or_insert_with(|| self.store_shepherds());
                let real = ProcessId::of(pid).is_some_and(|p| children.contains(&p));
                if !real && !found.contains(&pid) && process::state_of(pid).is_some_and(|s| s != 'Z') {
                    found.push(pid);
                    roots.push(pid);
                }
            }
        }
        found
    }

    /// The shepherds of this store's unexited runs (this run's children,
    /// or runs a process of this run promoted from the queue), by pid and
    /// start time as each recorded itself.
    fn store_shepherds(&mut self) -> Vec<ProcessId> {
        if self.store.is_none() {
            match Store::open(&self.home) {
                Ok(store) => self.store = Some(store),
                Err(e) => {
                    self.note(&format!("cannot read the store to spare other runs' shepherds: {e}"));
                    return Vec::new();
                }
            }
        }
        let Some(store) = &self.store else { return Vec::new() };
        let me = self.shepherd;
        store.unexited_shepherds().unwrap_or_default().into_iter().filter(|p| p.pid != me).collect()
    }

    /// SIGKILL to every process of the run: its cgroup at once, else the
    /// agent's group and every other process found.
    pub(super) fn kill_all(&mut self) {
        if let Some(group) = &self.cgroup {
            let result = match group.kill() {
                Ok(()) => String::new(),
                Err(e) => format!(" (failed: {e})"),
            };
            let dir = group.dir().display().to_string();
            self.note(&format!("SIGKILL -> cgroup {dir}{result}"));
        } else {
            self.signal_group(Sig::Kill);
        }
        let others = if self.cgroup.is_some() { self.escaped() } else { self.own_processes() };
        if !others.is_empty() {
            let list: Vec<String> = others.iter().map(|p| p.pid.to_string()).collect();
            self.note(&format!("SIGKILL -> pids {}", list.join(" ")));
            for process in others {
                let _ = process.signal(Sig::Kill);
            }
        }
    }

    /// Kills and reaps every process of the run, for at most `patience`:
    /// the shepherd is failing, and no process may outlive the run.
    pub(super) fn kill_and_reap_all(&mut self, patience: Duration) {
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            self.kill_all();
            match process::reap_any() {
                Err(_) => break,
                Ok(Some(_)) => continue,
                Ok(None) if self.is_empty() => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// Appends a timestamped line to `signals.log`, making it (with the
    /// lines held for it) if it is not made yet.
    pub(super) fn note(&mut self, what: &str) {
        // Losing a log line must never disturb supervision.
        let log = &mut self.log;
        if log.file.is_none() {
            log.file = home::open_private_append(&log.path).ok();
        }
        if let Some(file) = &mut log.file {
            let mut lines: String = log.held.drain(..).collect();
            lines.push_str(&format!("{} {what}\n", time::format(time::now())));
            let _ = file.write_all(lines.as_bytes());
        }
    }

    /// A line of what the run did (an agent started or ended, its outcome),
    /// for `signals.log` if it is made: written now if it is, else held
    /// until a signal makes it.
    pub(super) fn context(&mut self, what: &str) {
        if self.log.file.is_some() {
            return self.note(what);
        }
        let held = &mut self.log.held;
        if held.len() == HELD_LINES {
            held.pop_front();
        }
        held.push_back(format!("{} {what}\n", time::format(time::now())));
    }

    /// SIGKILL did not end every process in time: name them and move on.
    fn give_up(&mut self) {
        let left: Vec<String> = self
            .own_processes()
            .iter()
            .map(|p| format!("{} (state {})", p.pid, process::state_of(p.pid).unwrap_or('?')))
            .collect();
        self.note(&format!(
            "giving up after {}: processes that SIGKILL did not end: {}",
            humantime::format_duration(KILL_GIVE_UP),
            if left.is_empty() { "none left".to_string() } else { left.join(", ") }
        ));
        self.stage = Stage::GaveUp;
    }

    /// Signals the agent's process group, if it is still the run's: its
    /// leader is this very agent (unreaped), or a process of the run is in
    /// it. Otherwise the id may belong to a stranger now.
    fn signal_group(&mut self, sig: Sig) {
        let Some(leader) = self.leader else { return };
        let pgid = leader.pid;
        let ours =
            leader.is_alive_or_zombie() || self.own_processes().iter().any(|p| process::group_of(p.pid) == Some(pgid));
        if !ours {
            self.note(&format!("{} -> group {pgid}: skipped, no process of the run is left in it", sig.name()));
            return;
        }
        let suffix = match process::signal_group(pgid, sig) {
            Ok(()) => String::new(),
            Err(e) => format!(" (failed: {e})"),
        };
        self.note(&format!("{} -> group {pgid}{suffix}", sig.name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn test_home() -> Home {
        Home::at(std::env::temp_dir().join("corral-cleanup-test-home"))
    }

    #[test]
    fn a_stranger_that_reused_the_agents_group_id_gets_no_signal() {
        // A stranger leads its own process group; the agent that once had
        // its pid (a different start time) is long gone.
        let mut stranger = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pid = stranger.id() as i32;
        let real = ProcessId::of(pid).unwrap();
        let old_agent = ProcessId { pid, start: real.start.saturating_sub(1) };
        // A shepherd with no descendants (the stranger is this test's child,
        // not the shepherd's).
        let mut shepherd = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let shepherd_pid = shepherd.id() as i32;
        let logs = tempfile::tempdir().unwrap();
        let log = logs.path().join("signals.log");
        let grace = (Duration::ZERO, Duration::ZERO);
        let mut cleanup = Cleanup::new(&test_home(), "no-such-run", shepherd_pid, None, grace, Sig::Term, log.clone());
        cleanup.restart(old_agent);
        cleanup.stop(Instant::now(), "test");
        cleanup.kill_all();
        assert!(real.is_alive(), "the stranger's group was signalled");

        // The very agent (same start time) is signalled as ever.
        let mut cleanup = Cleanup::new(&test_home(), "no-such-run", shepherd_pid, None, grace, Sig::Term, log.clone());
        cleanup.restart(real);
        cleanup.stop(Instant::now(), "test");
        let status = stranger.wait().unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGTERM));
        let said = std::fs::read_to_string(&log).unwrap();
        assert!(said.contains("SIGTERM -> group"), "the signal is in signals.log, made at its first line: {said}");
        let _ = shepherd.kill();
        let _ = shepherd.wait();
    }
}
