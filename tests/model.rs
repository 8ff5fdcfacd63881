//! A model-based random test of the store's truth where agents orchestrate
//! agents.
//!
//! A seeded generator picks operations — launch (with a `setup` that leaves
//! a process behind, or without), launch as a child, launch a child in the
//! background and end at once, wait in the agent's own turn on its
//! children, a wait cut short by its timeout, end, `kill -9` of a
//! shepherd, abort, a reply (a new turn of a run that ended, or one kept for
//! a run's next turn), restart of a watching process — against real shepherds
//! running a scripted fake agent (`tests/fake-agents/worker`, as pi), with `max_parallel`
//! from 1 to 3. After every step, reading only the store and `/proc`, it
//! checks within a bounded time that:
//! - no run is active without a live shepherd;
//! - no run is queued while a slot is free;
//! - no parent is `waiting` on children that all ended while a slot is free
//!   for it to go on;
//! - no process of an ended run is alive (by its id, and in its cgroup), and
//!   its exit is recorded;
//! - no run completed while a child of its was still active;
//!
//! and at every look, that at most `max_parallel` runs work. At the end,
//! every run must reach a terminal status. A failure prints the seed and
//! the operations; `scripts/soak.sh MINUTES` runs new seeds.

mod common;

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{output_within, Env};
use corral::process::{processes_with_env, ProcessId, Sig};
use corral::{Run, RunStatus, Store};

/// Seeds run by the test command; new ones come from `scripts/soak.sh`.
const SEEDS: &[u64] = &[1, 2, 3, 4, 5, 6];
/// Operations per sequence.
const OPS: usize = 24;
/// How long the store may take to become true again after a step.
const SETTLE: Duration = Duration::from_secs(8);

#[test]
fn random_sequences_keep_the_store_true() {
    for &seed in SEEDS {
        Sequence::new(seed).run(OPS);
    }
}

/// New seeds for as long as `CORRAL_SOAK_MINUTES` says (see `scripts/soak.sh`).
#[test]
#[ignore = "a soak run; see scripts/soak.sh"]
fn soak() {
    let minutes: f64 = std::env::var("CORRAL_SOAK_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(1.0);
    let until = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let mut seed = std::env::var("CORRAL_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs());
    let (mut sequences, mut ops) = (0, 0);
    let started = Instant::now();
    while Instant::now() < until {
        ops += Sequence::new(seed).run(OPS);
        sequences += 1;
        seed += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!("soak: {sequences} sequences clean, {ops} operations in {secs:.0} s ({:.1} ops/s)", ops as f64 / secs);
}

/// What the model knows of a run.
struct ModelRun {
    id: String,
    /// Commands written to its agent so far.
    commands: usize,
    /// Its agent was told to end, wait or was killed: no more launches.
    told_to_end: bool,
}

struct Sequence {
    seed: u64,
    rng: fastrand::Rng,
    env: Env,
    max_parallel: usize,
    ctl: PathBuf,
    runs: Vec<ModelRun>,
    log: Vec<String>,
    watcher: Option<Child>,
}

impl Sequence {
    fn new(seed: u64) -> Sequence {
        let mut rng = fastrand::Rng::with_seed(seed);
        let env = Env::new();
        let max_parallel = rng.usize(1..=3);
        // The default exit grace: a background launch has that long to be
        // recorded before its parent's turn is judged.
        std::fs::create_dir_all(&env.home).unwrap();
        let config = format!(
            "max_parallel = {max_parallel}\nchildren_timeout = \"none\"\nexit_grace = \"1s\"\nstop_grace = \"300ms\"\n"
        );
        std::fs::write(env.home.join("config.toml"), config).unwrap();
        // As pi: an agent that resumes its session, so runs can be replied to.
        env.agent_preset("worker", "pi", "");
        // Its setup leaves a process behind, which must end with the run.
        env.agent_preset("setup-worker", "pi", "setup: [sh, -c, \"sleep 300 >/dev/null 2>&1 &\"]\n");
        env.use_fake("pi", "worker");
        let ctl = env.project.join("ctl");
        std::fs::create_dir_all(&ctl).unwrap();
        let log = vec![format!("seed {seed}: max_parallel = {max_parallel}")];
        Sequence { seed, rng, env, max_parallel, ctl, runs: Vec::new(), log, watcher: None }
    }

    /// Runs `ops` random operations, then ends everything; returns how many
    /// operations ran.
    fn run(mut self, ops: usize) -> usize {
        for _ in 0..ops {
            self.step();
            self.check();
        }
        self.finish();
        if std::env::var_os("CORRAL_MODEL_VERBOSE").is_some() {
            println!("{}", self.log.join("\n  "));
        }
        ops
    }

    fn fail(&self, what: &str) -> ! {
        let runs: Vec<String> = self
            .store()
            .runs(&corral::store::RunFilter { include_dismissed: true, ..Default::default() })
            .unwrap_or_default()
            .iter()
            .map(|r| format!("{} {} parent={:?} children={:?}", r.id, r.status, r.parent_id, r.children))
            .collect();
        panic!(
            "model test failed: {what}\nreplay: CORRAL_SOAK_SEED={} scripts/soak.sh\noperations:\n  {}\nruns:\n  {}",
            self.seed,
            self.log.join("\n  "),
            runs.join("\n  ")
        );
    }

    fn store(&self) -> Store {
        self.env.store()
    }

    fn all_runs(&self) -> Vec<Run> {
        self.runs.iter().map(|r| self.store().run(&r.id).unwrap()).collect()
    }

    /// Writes the agent's next command; returns its number.
    fn command(&mut self, index: usize, text: &str) -> usize {
        let run = &mut self.runs[index];
        let dir = self.ctl.join(&run.id);
        std::fs::create_dir_all(&dir).unwrap();
        let n = run.commands;
        let tmp = dir.join(format!("{n}.tmp"));
        std::fs::write(&tmp, format!("{text}\n")).unwrap();
        std::fs::rename(tmp, dir.join(n.to_string())).unwrap();
        run.commands += 1;
        n
    }

    fn launch(&mut self) {
        let preset = if self.rng.u8(0..4) == 0 { "setup-worker" } else { "worker" };
        let mut cmd = self.env.command(&["launch", preset, "top"]);
        cmd.env("MODEL_CTL", &self.ctl);
        let out = cmd.output().unwrap();
        if !out.status.success() {
            self.fail(&format!("launch failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        self.log.push(format!("launch {preset} -> {id}"));
        self.runs.push(ModelRun { id, commands: 0, told_to_end: false });
    }

    /// Indexes of runs whose agent is running and may be told something:
    /// idle in its turn (a command queued behind `end` would run in a later
    /// turn, out of the model's sight).
    fn running_agents(&self) -> Vec<usize> {
        let store = self.store();
        (0..self.runs.len())
            .filter(|&i| !self.runs[i].told_to_end && self.idle(i))
            .filter(|&i| store.run(&self.runs[i].id).is_ok_and(|r| r.status == RunStatus::Running))
            .collect()
    }

    fn step(&mut self) {
        let running = self.running_agents();
        let active: Vec<usize> = (0..self.runs.len())
            .filter(|&i| self.store().run(&self.runs[i].id).is_ok_and(|r| r.status.is_active()))
            .collect();
        let roll = self.rng.u32(0..100);
        match roll {
            _ if self.runs.is_empty() || (roll < 20 && self.runs.len() < 14) => self.launch(),
            20..=44 if !running.is_empty() && self.runs.len() < 14 => {
                let i = running[self.rng.usize(..running.len())];
                let n = self.command(i, "launch worker");
                let id = self.runs[i].id.clone();
                let done = self.ctl.join(&id).join(format!("{n}.done"));
                // The agent launches at once; if it died meanwhile, so be it.
                let started = Instant::now();
                while !done.exists() && started.elapsed() < SETTLE {
                    if self.store().run(&id).unwrap().status.is_terminal() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let out = std::fs::read_to_string(self.ctl.join(&id).join(format!("{n}.out"))).unwrap_or_default();
                let child = out.trim().to_string();
                self.log.push(format!("{id} launches a child -> {child:?}"));
                if !child.is_empty() {
                    self.runs.push(ModelRun { id: child, commands: 0, told_to_end: false });
                }
            }
            45..=48 if !running.is_empty() && self.runs.len() < 14 => {
                let i = running[self.rng.usize(..running.len())];
                let n = self.command(i, "bglaunch worker");
                self.command(i, "end 0");
                self.runs[i].told_to_end = true;
                let id = self.runs[i].id.clone();
                let out = self.ctl.join(&id).join(format!("{n}.out"));
                // The launch is recorded in the agent's turn, before its end
                // is judged; the model learns the child's id once it is.
                let started = Instant::now();
                let child = loop {
                    let text = std::fs::read_to_string(&out).unwrap_or_default();
                    if !text.trim().is_empty() || started.elapsed() >= SETTLE {
                        break text.trim().to_string();
                    }
                    if self.store().run(&id).unwrap().status.is_terminal() && started.elapsed() > Duration::from_secs(2)
                    {
                        break String::new();
                    }
                    std::thread::sleep(Duration::from_millis(10));
                };
                self.log.push(format!("{id} launches a child in the background and ends -> {child:?}"));
                if !child.is_empty() {
                    self.runs.push(ModelRun { id: child, commands: 0, told_to_end: false });
                }
            }
            49..=51 if !running.is_empty() => {
                let i = running[self.rng.usize(..running.len())];
                self.command(i, "waitshort");
                self.log.push(format!("{} waits on its children, cut short, and works on", self.runs[i].id));
            }
            52..=54 if !running.is_empty() => {
                let i = running[self.rng.usize(..running.len())];
                self.command(i, "wait");
                // After the wait it ends, so the sequence keeps moving.
                self.command(i, "end 0");
                self.runs[i].told_to_end = true;
                self.log.push(format!("{} waits in its turn on its children, then ends", self.runs[i].id));
            }
            55..=74 if !running.is_empty() => {
                let i = running[self.rng.usize(..running.len())];
                let code = if self.rng.bool() { 0 } else { 1 };
                self.command(i, &format!("end {code}"));
                self.runs[i].told_to_end = true;
                self.log.push(format!("{} ends with {code}", self.runs[i].id));
            }
            75..=83 if !active.is_empty() => {
                let i = active[self.rng.usize(..active.len())];
                let run = self.store().run(&self.runs[i].id).unwrap();
                if let (Some(pid), Some(start)) = (run.shepherd_pid, run.shepherd_start) {
                    if (ProcessId { pid, start }).is_alive() {
                        (ProcessId { pid, start }).signal(Sig::Kill).unwrap();
                        self.runs[i].told_to_end = true;
                        self.log.push(format!("kill -9 shepherd of {} ({})", run.id, run.status));
                    }
                }
            }
            84..=88 if !active.is_empty() => {
                let i = active[self.rng.usize(..active.len())];
                let id = self.runs[i].id.clone();
                self.log.push(format!("abort {id}"));
                self.runs[i].told_to_end = true;
                if output_within(self.env.command(&["abort", &id]), SETTLE).is_none() {
                    self.fail(&format!("abort {id} did not return"));
                }
            }
            89..=94 => self.reply(),
            _ => self.restart_watcher(),
        }
    }

    /// Replies to a run: an ended one starts a new turn, an active one gets
    /// it when its turn ends. Either way its agent takes commands again.
    fn reply(&mut self) {
        if self.runs.is_empty() {
            return self.restart_watcher();
        }
        let i = self.rng.usize(..self.runs.len());
        let id = self.runs[i].id.clone();
        let status = self.store().run(&id).unwrap().status;
        let Some(out) = output_within(self.env.command(&["reply", &id, "go on"]), SETTLE) else {
            self.fail(&format!("reply to {id} did not return"));
        };
        if !out.status.success() {
            self.fail(&format!("reply to {id} ({status}) failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        self.runs[i].told_to_end = false;
        self.log.push(format!("reply to {id} ({status})"));
    }

    /// A process that watches the store (as the app's watcher or a user's
    /// `corral wait` does) dies and another starts.
    fn restart_watcher(&mut self) {
        if let Some(mut old) = self.watcher.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        let ids: Vec<String> = self.all_runs().into_iter().filter(|r| r.status.is_active()).map(|r| r.id).collect();
        if ids.is_empty() {
            self.log.push("watcher restarted: nothing to watch".into());
            return;
        }
        let mut args = vec!["wait"];
        args.extend(ids.iter().map(String::as_str));
        let child = self.env.command(&args).stdout(std::process::Stdio::null()).spawn().unwrap();
        self.watcher = Some(child);
        self.log.push(format!("watcher restarted on {} runs", ids.len()));
    }

    /// Every live Corral process that heals the store: shepherds of active
    /// runs, registered waits, the watcher.
    fn any_healer_alive(&mut self, runs: &[Run]) -> bool {
        let shepherd = runs.iter().any(|r| {
            r.status.is_active()
                && r.shepherd_pid.zip(r.shepherd_start).is_some_and(|(pid, start)| ProcessId { pid, start }.is_alive())
        });
        let waits = self.store().blocked_processes().unwrap().iter().any(|w| w.process.is_alive());
        let watcher = self.watcher.as_mut().is_some_and(|w| w.try_wait().unwrap().is_none());
        shepherd || waits || watcher
    }

    /// What is false about the store now (eventual invariants), or panics if
    /// more than `max_parallel` runs work.
    fn untrue(&self, runs: &[Run]) -> Option<String> {
        let store = self.store();
        let slots = store.slots().unwrap();
        if slots.working > self.max_parallel {
            self.fail(&format!("{} runs work, max_parallel is {}", slots.working, self.max_parallel));
        }
        if slots.queued > 0 && slots.working + slots.wanted < self.max_parallel {
            return Some(format!("queue stuck: {slots:?} with max_parallel {}", self.max_parallel));
        }
        for run in runs {
            match run.status {
                RunStatus::Starting | RunStatus::Running | RunStatus::Waiting => {
                    let alive = run
                        .shepherd_pid
                        .zip(run.shepherd_start)
                        .is_some_and(|(pid, start)| ProcessId { pid, start }.is_alive());
                    if !alive {
                        return Some(format!("{} is {} without a live shepherd", run.id, run.status));
                    }
                    if run.status == RunStatus::Waiting {
                        let kids: Vec<Run> = run.children.iter().map(|c| store.run(c).unwrap()).collect();
                        // It goes on once a slot is free: every slot may be
                        // held by agents the model keeps idle.
                        if kids.iter().all(|k| k.status.is_terminal()) && slots.working < self.max_parallel {
                            return Some(format!("{} waits on children that all ended, with a slot free", run.id));
                        }
                    }
                }
                status if status.is_terminal() && run.exited_at.is_none() => {
                    let alive = run
                        .shepherd_pid
                        .zip(run.shepherd_start)
                        .is_some_and(|(pid, start)| ProcessId { pid, start }.is_alive());
                    if !alive {
                        return Some(format!("{} ended ({status}) but its exit was never recorded", run.id));
                    }
                }
                status if status.is_terminal() => {
                    let left: Vec<i32> = processes_with_env("CORRAL_RUN_ID", &run.id).iter().map(|p| p.pid).collect();
                    if !left.is_empty() {
                        return Some(format!("{} ended ({status}) but processes {left:?} are alive", run.id));
                    }
                    let group = run.containment.as_ref().and_then(|c| c.cgroup.as_deref());
                    if let Some(dir) = group.filter(|dir| std::path::Path::new(dir).exists()) {
                        return Some(format!("{} ended ({status}) but its cgroup {dir} is left", run.id));
                    }
                    if status == RunStatus::Completed {
                        let kids: Vec<Run> = run.children.iter().map(|c| store.run(c).unwrap()).collect();
                        if let Some(kid) = kids.iter().find(|k| k.status.is_active()) {
                            return Some(format!("{} completed while its child {} is {}", run.id, kid.id, kid.status));
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Waits until the store is true, running one Corral command if no
    /// Corral process is alive to heal it (as the next command would).
    fn check(&mut self) {
        let started = Instant::now();
        let mut nudged = Instant::now();
        loop {
            let runs = self.all_runs();
            let Some(problem) = self.untrue(&runs) else { return };
            if started.elapsed() >= SETTLE {
                self.fail(&problem);
            }
            // With nobody alive to heal a lasting problem, the next Corral
            // command does (a run just launched has no shepherd for a few ms).
            if nudged.elapsed() > Duration::from_secs(1) && !self.any_healer_alive(&runs) {
                self.log.push("no Corral process alive: `corral ls`".into());
                self.env.ok(&["ls"]);
                nudged = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True if run `i`'s agent has done every command written so far (it
    /// waits for the next one).
    fn idle(&self, i: usize) -> bool {
        let run = &self.runs[i];
        run.commands == 0 || self.ctl.join(&run.id).join(format!("{}.done", run.commands - 1)).exists()
    }

    /// Tells every agent to end, and checks every run ends. A run with a
    /// reply kept for its next turn runs again: it is told to end again.
    fn finish(&mut self) {
        self.log.push("finish: every agent is told to end".into());
        for i in 0..self.runs.len() {
            if !self.runs[i].told_to_end {
                self.command(i, "end 0");
                self.runs[i].told_to_end = true;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check();
            let runs = self.all_runs();
            for (i, run) in runs.iter().enumerate() {
                if run.status == RunStatus::Running && self.idle(i) {
                    self.log.push(format!("finish: {} runs a new turn: told to end", run.id));
                    self.command(i, "end 0");
                }
            }
            if runs.iter().all(|r| r.status.is_terminal() && r.exited_at.is_some()) {
                break;
            }
            if Instant::now() >= deadline {
                let left: Vec<String> =
                    runs.iter().filter(|r| r.status.is_active()).map(|r| format!("{} {}", r.id, r.status)).collect();
                self.fail(&format!("runs never ended: {left:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(mut watcher) = self.watcher.take() {
            let _ = watcher.kill();
            let _ = watcher.wait();
        }
    }
}
