//! What both benchmarks share: a temporary installation whose `pi` is the
//! benchmark binary itself in agent mode, launching through the library,
//! and reading what the fake agent recorded.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::launch::{launch, LaunchRequest};
use corral::{Home, Store};

/// Set in the environment of the benchmark binary run as the fake agent.
pub const AGENT_MODE: &str = "CORRAL_BENCH_AGENT";

/// Microseconds since the epoch.
pub fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()
}

/// The fake pi: prints `BENCH_LINES` deltas, then (after `BENCH_DELAY_MS`)
/// the final message and `agent_settled`, recording in its run folder when
/// it started and when it wrote the terminal line; then lingers or exits as `BENCH_THEN` says.
pub fn fake_agent() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let lines: usize = var("BENCH_LINES").parse().unwrap_or(0);
    let delay: u64 = var("BENCH_DELAY_MS").parse().unwrap_or(0);
    if var("BENCH_IGNORE_TERM") == "1" {
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
        // An escaped grandchild, on purpose: never waited for here, it is
        // the shepherd's to find and kill.
        #[allow(clippy::zombie_processes)]
        Command::new("setsid").args(["sleep", "300"]).spawn().unwrap();
    }
    // As a parent: launch two child runs through the CLI and end the turn.
    let prompt = std::env::args().next_back().unwrap_or_default();
    if var("BENCH_ROLE") == "parent" && !prompt.starts_with("The background agent runs") {
        for _ in 0..2 {
            let out = Command::new(var("BENCH_CORRAL"))
                .args(["launch", "bench", "child work"])
                .env("BENCH_ROLE", "child")
                .env("BENCH_DELAY_MS", "200")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    writeln!(out, r#"{{"type":"session","version":3,"id":"bench"}}"#).unwrap();
    let start = now_us();
    let tools = var("BENCH_KIND") == "tools";
    // Paced mode: BENCH_RATE tool results per second for BENCH_SECONDS.
    let rate: u64 = var("BENCH_RATE").parse().unwrap_or(0);
    if rate > 0 {
        let total = rate * var("BENCH_SECONDS").parse::<u64>().unwrap_or(1);
        let begun = Instant::now();
        for i in 0..total {
            let due = begun + Duration::from_micros(i * 1_000_000 / rate);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            writeln!(out, r#"{{"type":"tool_execution_end","toolCallId":"t{i}","toolName":"read","result":{{"content":[{{"type":"text","text":"paced line {i}"}}]}},"isError":false}}"#).unwrap();
            out.flush().unwrap();
        }
    }
    for i in 0..lines {
        if tools {
            writeln!(out, r#"{{"type":"tool_execution_end","toolCallId":"t{i}","toolName":"read","result":{{"content":[{{"type":"text","text":"line {i} of the file"}}]}},"isError":false}}"#).unwrap();
        } else {
            writeln!(out, r#"{{"type":"message_update","assistantMessageEvent":{{"type":"text_delta","contentIndex":0,"delta":"token{i} "}}}}"#).unwrap();
        }
    }
    out.flush().unwrap();
    std::thread::sleep(Duration::from_millis(delay));
    writeln!(out, r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"bench answer"}}],"model":"bench-model","usage":{{"input":10,"output":20,"cost":{{"total":0.001}}}},"stopReason":"stop"}}}}"#).unwrap();
    writeln!(out, r#"{{"type":"agent_end","messages":[]}}"#).unwrap();
    out.flush().unwrap();
    let written = now_us();
    writeln!(out, r#"{{"type":"agent_settled"}}"#).unwrap();
    out.flush().unwrap();
    let mark = Path::new(&var("CORRAL_HOME")).join("runs").join(var("CORRAL_RUN_ID")).join("bench-mark");
    std::fs::write(mark, format!("{start} {written}")).unwrap();
    if var("BENCH_THEN") == "linger" {
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

pub struct Bench {
    _root: tempfile::TempDir,
    pub home: Home,
    pub project: PathBuf,
    pub shepherd: ShepherdCommand,
}

impl Bench {
    pub fn new() -> Bench {
        Bench::with_config("max_parallel = 64\nexit_grace = \"300ms\"\nstop_grace = \"1s\"\n")
    }

    /// An installation with this `config.toml`.
    pub fn with_config(config: &str) -> Bench {
        let root = tempfile::tempdir().unwrap();
        let home_dir = root.path().join("home");
        let project = root.path().join("project");
        let bin = root.path().join("bin");
        for dir in [&home_dir, &project, &bin, &project.join(".corral/presets")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(std::env::current_exe().unwrap(), bin.join("pi")).unwrap();
        std::fs::write(
            project.join(".corral/presets/bench.md"),
            "---\nname: bench\ndescription: benchmark agent\nagent: pi\n---\n",
        )
        .unwrap();
        std::fs::write(home_dir.join("config.toml"), config).unwrap();
        // SAFETY: single-threaded; the environment is read only by children.
        unsafe {
            std::env::set_var("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()));
            std::env::set_var("CORRAL_HOME", &home_dir);
            std::env::set_var(AGENT_MODE, "1");
        }
        let shepherd = ShepherdCommand::program(PathBuf::from(env!("CARGO_BIN_EXE_corral")));
        Bench { _root: root, home: Home::at(home_dir), project, shepherd }
    }

    pub fn store(&self) -> Store {
        Store::open(&self.home).unwrap()
    }

    pub fn launch(&self, store: &mut Store, vars: &[(&str, String)]) -> String {
        for key in [
            "BENCH_LINES",
            "BENCH_DELAY_MS",
            "BENCH_THEN",
            "BENCH_IGNORE_TERM",
            "BENCH_KIND",
            "BENCH_ROLE",
            "BENCH_RATE",
            "BENCH_SECONDS",
        ] {
            unsafe { std::env::remove_var(key) };
        }
        for (k, v) in vars {
            unsafe { std::env::set_var(k, v) };
        }
        let request = LaunchRequest {
            preset: "bench".into(),
            task: "benchmark".into(),
            cwd: self.project.clone(),
            model: None,
            parent: None,
            env: None,
            worktree: None,
            base: None,
            budget: None,
            fire: None,
            request: None,
            scope_own: false,
        };
        launch(store, &request, &self.shepherd).unwrap().id
    }

    pub fn mark(&self, id: &str) -> PathBuf {
        self.home.run_dir(id).join("bench-mark")
    }

    pub fn read_mark(path: &Path) -> (u128, u128) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(path) {
                let mut parts = text.split_whitespace().map(|p| p.parse::<u128>().unwrap());
                if let (Some(a), Some(b)) = (parts.next(), parts.next()) {
                    return (a, b);
                }
            }
            assert!(Instant::now() < deadline, "no mark at {}", path.display());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits, polling `data_version` every 100 µs, until `id` is terminal;
    /// returns when it saw it.
    pub fn until_terminal(store: &Store, id: &str) -> u128 {
        let mut version = -1;
        loop {
            let now = store.data_version().unwrap();
            if now != version {
                version = now;
                if store.run(id).unwrap().status.is_terminal() {
                    return now_us();
                }
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    pub fn until_exited(store: &Store, id: &str) {
        while store.run(id).unwrap().exited_at.is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

pub fn report(what: &str, samples: &mut [f64]) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{what}: p50 {:.2}  p99 {:.2}  max {:.2}  (n={})",
        pct(0.5),
        pct(0.99),
        samples[samples.len() - 1],
        samples.len()
    );
}
