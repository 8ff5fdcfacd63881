//! Shared test harness: an isolated Corral installation in temporary
//! folders, the real `corral` binary, and waiting on conditions with
//! deadlines (never fixed sleeps).

#![allow(dead_code)]

pub mod http;
pub mod mcp;
pub mod ntfy;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `corral` binary under test.
pub fn corral_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corral"))
}

/// A fake agent program from `tests/fake-agents/`.
pub fn fake_agent(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-agents").join(name);
    assert!(path.is_file(), "no fake agent {}", path.display());
    path.to_string_lossy().into_owned()
}

/// An isolated installation: its own CORRAL_HOME, HOME and project folder.
pub struct Env {
    _root: tempfile::TempDir,
    /// CORRAL_HOME.
    pub home: PathBuf,
    /// The user's home folder ($HOME).
    pub user_home: PathBuf,
    /// A project folder to launch from.
    pub project: PathBuf,
    /// Put first on PATH: `pi`, `claude`, `codex`, `gemini` and `opencode`
    /// are the fake agent `replay` here.
    pub bin: PathBuf,
}

impl Env {
    /// The pid of this installation's launch template, while one runs.
    pub fn template_pid(&self) -> Option<i32> {
        template_pid(&self.home)
    }

    pub fn new() -> Env {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("corral-home");
        let user_home = root.path().join("home");
        let project = root.path().join("project");
        std::fs::create_dir_all(&user_home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for agent in ["pi", "claude", "codex", "gemini", "opencode"] {
            std::os::unix::fs::symlink(fake_agent("replay"), bin.join(agent)).unwrap();
        }
        // Agents that launch runs call `corral` by name.
        std::os::unix::fs::symlink(corral_bin(), bin.join("corral")).unwrap();
        Env { _root: root, home, user_home, project, bin }
    }

    /// Writes `config.toml` with short graces, so stop sequences finish
    /// quickly in tests.
    pub fn short_graces(&self, exit_grace: &str, stop_grace: &str) {
        std::fs::create_dir_all(&self.home).unwrap();
        let text = format!("exit_grace = \"{exit_grace}\"\nstop_grace = \"{stop_grace}\"\n");
        std::fs::write(self.home.join("config.toml"), text).unwrap();
    }

    /// Writes `config.toml`: short graces, then `extra` lines.
    pub fn config(&self, extra: &str) {
        std::fs::create_dir_all(&self.home).unwrap();
        let text = format!("exit_grace = \"100ms\"\nstop_grace = \"300ms\"\n{extra}");
        std::fs::write(self.home.join("config.toml"), text).unwrap();
    }

    /// The store of this installation, for reading what a user would see
    /// without running a Corral command (which would heal it).
    pub fn store(&self) -> corral::Store {
        corral::Store::open(&corral::Home::at(&self.home)).unwrap()
    }

    /// A `corral` command in this installation, run from the project folder.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(corral_bin());
        cmd.args(args)
            .current_dir(&self.project)
            .env("CORRAL_HOME", &self.home)
            .env("HOME", &self.user_home)
            .env("PATH", format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap_or_default()))
            .env_remove("CORRAL_RUN_ID")
            .env_remove("CORRAL_LOG");
        cmd
    }

    /// Runs `corral ARGS` to completion.
    pub fn corral(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run corral")
    }

    /// Runs `corral ARGS`, asserts success, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.corral(args);
        assert!(
            out.status.success(),
            "corral {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs `corral ARGS --json` and parses the document.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let text = self.ok(&args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}\n{text}"))
    }

    /// Writes a preset file `NAME.md` into `dir` (relative to the project
    /// folder, or absolute) with the given frontmatter lines and body.
    /// A project's presets that run code run only once trusted: the tests'
    /// own are trusted as written (`corral presets trust`).
    pub fn preset_file(&self, dir: impl AsRef<Path>, file: &str, text: &str) -> PathBuf {
        let path = self.untrusted_preset_file(dir, file, text);
        let project = path.ancestors().nth(3).unwrap().to_path_buf();
        if project.starts_with(&self.project) {
            self.ok(&["presets", "trust", project.to_str().unwrap()]);
        }
        path
    }

    /// Writes a preset file as a cloned repository brings it: not trusted.
    pub fn untrusted_preset_file(&self, dir: impl AsRef<Path>, file: &str, text: &str) -> PathBuf {
        let dir = self.project.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A project preset running `argv` with agent `command`.
    pub fn command_preset(&self, name: &str, argv: &[&str]) {
        self.command_preset_with(name, argv, "");
    }

    /// A project preset running `argv`, with extra frontmatter lines.
    pub fn command_preset_with(&self, name: &str, argv: &[&str], extra: &str) {
        let argv = serde_json::to_string(argv).unwrap();
        let text = format!(
            "---\nname: {name}\ndescription: test preset {name}\nagent: command\ncommand: {argv}\n{extra}---\n"
        );
        self.preset_file(".corral/presets", &format!("{name}.md"), &text);
    }

    /// A project preset for agent `agent` (pi, claude, ...), extra
    /// frontmatter lines, and a body.
    pub fn agent_preset(&self, name: &str, agent: &str, extra: &str) {
        let text =
            format!("---\nname: {name}\ndescription: test {agent} preset\nagent: {agent}\n{extra}---\nBe brief.\n");
        self.preset_file(".corral/presets", &format!("{name}.md"), &text);
    }

    /// Makes `agent` (pi, claude, ...) run the fake agent program `fake`.
    pub fn use_fake(&self, agent: &str, fake: &str) {
        let link = self.bin.join(agent);
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(fake_agent(fake), link).unwrap();
    }

    /// Launches with extra environment (for the fake agents) and returns the id.
    pub fn launch_env(&self, preset: &str, task: &str, vars: &[(&str, &str)]) -> String {
        let mut cmd = self.command(&["launch", preset, task]);
        cmd.envs(vars.iter().copied());
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "launch failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Launches and returns the run id.
    pub fn launch(&self, preset: &str, task: &str) -> String {
        self.ok(&["launch", preset, task]).trim().to_string()
    }

    /// `corral show ID --json`.
    pub fn show(&self, id: &str) -> Value {
        self.json(&["show", id])
    }

    /// Waits until run `id` satisfies `cond`, or panics after `limit`.
    pub fn wait_run(&self, id: &str, limit: Duration, cond: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let found = eventually(limit, || {
            last = self.show(id);
            cond(&last)
        });
        assert!(found, "run {id} did not reach the condition within {limit:?}; last:\n{last:#}");
        last
    }

    /// Waits until run `id` is terminal and its processes are reaped.
    pub fn wait_end(&self, id: &str) -> Value {
        self.wait_run(id, Duration::from_secs(20), |r| !r["exited_at"].is_null() && is_terminal(r))
    }

    /// The run's folder.
    pub fn run_dir(&self, id: &str) -> PathBuf {
        self.home.join("runs").join(id)
    }

    /// What run `id`'s transcript says, event by event.
    pub fn said(&self, id: &str) -> Vec<String> {
        let text = self.ok(&["tail", id, "--json", "-n", "1000"]);
        let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        events.iter().map(|e| e["text"].as_str().unwrap_or("").to_string()).collect()
    }

    /// Runs `script` (Python, with `json`, `os`, `subprocess` and `sys`
    /// imported) as preset `name`'s sandboxed command agent, its sandbox
    /// `sandbox` (the YAML after `sandbox: `) and `extra` preset lines;
    /// waits for its end: its id, its run, what it said.
    pub fn run_python_sandboxed(
        &self,
        name: &str,
        sandbox: &str,
        extra: &str,
        script: &str,
    ) -> (String, Value, Vec<String>) {
        let script = format!("import json, os, subprocess, sys\n{script}");
        self.command_preset_with(name, &["python3", "-c", &script], &format!("{extra}sandbox: {sandbox}\n"));
        let id = self.launch(name, "go");
        let run = self.wait_end(&id);
        let said = self.said(&id);
        (id, run, said)
    }
}

impl Drop for Env {
    /// A test that failed half-way must not leave its runs behind: abort
    /// whatever is still active in this installation.
    fn drop(&mut self) {
        let Ok(out) = self.command(&["ls", "--all", "--json"]).output() else { return };
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let active: Vec<&str> = runs
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| !is_terminal(r))
            .filter_map(|r| r["id"].as_str())
            .collect();
        if !active.is_empty() {
            let mut args = vec!["abort"];
            args.extend(active);
            let _ = self.command(&args).output();
        }
        // Nor its launch template, which would wait ten idle minutes in a
        // folder that is gone.
        end_template(&self.home);
    }
}

/// The pid of the launch template of the Corral home `home`, while one
/// runs (the one its lock names, still a template: not a reused pid).
pub fn template_pid(home: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(home.join("corral.template.lock")).ok()?.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    cmdline.split(|&b| b == 0).any(|arg| arg == b"template").then_some(pid)
}

/// Ends the launch template of `home`, if one runs.
pub fn end_template(home: &Path) {
    if let Some(pid) = template_pid(home) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM);
    }
}

/// True if a run object has a terminal status.
/// Runs git in `dir` with a fixed identity; its stdout (panics on failure).
#[allow(dead_code)] // not every test binary uses it
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub fn is_terminal(run: &Value) -> bool {
    matches!(run["status"].as_str(), Some("completed" | "failed" | "aborted" | "lost"))
}

/// Polls `cond` every few ms until it holds (true) or `limit` passes (false).
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` until it exits, or kills it after `limit` and returns None.
pub fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    use std::process::Stdio;
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id() as i32;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output().expect("wait");
        let _ = done_tx.send(());
        out
    });
    if done_rx.recv_timeout(limit).is_ok() {
        return Some(waiter.join().unwrap());
    }
    if let Some(child) = corral::process::ProcessId::of(pid) {
        let _ = child.signal(corral::process::Sig::Kill);
    }
    let _ = waiter.join();
    None
}

/// Sends `sig` to the process `pid` names now (a test's own view of it).
pub fn signal_pid(pid: i32, sig: corral::process::Sig) -> std::io::Result<()> {
    corral::process::ProcessId::of(pid).map_or(Ok(()), |p| p.signal(sig))
}

/// Live processes whose environment carries `CORRAL_RUN_ID=<id>`.
pub fn processes_of_run(id: &str) -> Vec<i32> {
    corral::process::processes_with_env("CORRAL_RUN_ID", id).iter().map(|p| p.pid).collect()
}

/// True if `pid` is alive (not a zombie).
pub fn alive(pid: i32) -> bool {
    corral::process::is_alive(pid)
}

/// A stream file from `tests/streams/` or a capture from `tests/captures/`.
pub fn stream(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let path = [root.join("streams").join(name), root.join("captures").join(name)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no stream {name}"));
    path.to_string_lossy().into_owned()
}

/// Milliseconds between two RFC 3339 timestamps of a run object.
pub fn millis_between(run: &Value, from: &str, to: &str) -> i64 {
    let at = |key: &str| chrono::DateTime::parse_from_rfc3339(run[key].as_str().unwrap()).unwrap();
    (at(to) - at(from)).num_milliseconds()
}
