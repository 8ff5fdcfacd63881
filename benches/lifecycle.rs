//! Lifecycle benchmark: prints figures, asserts nothing.
//!
//! `cargo bench --bench lifecycle` measures, against real shepherds and a
//! fake pi agent (this same binary, run as `pi` in agent mode):
//! - terminal line written → outcome visible to a reader, and → `completed_at`
//! - terminal line written → `corral wait` returns
//! - abort → last process reaped, for an agent that ignores SIGTERM and has
//!   an escaped `setsid` grandchild
//! - shepherd peak RSS and CPU per 10k stream lines
//! - ingestion throughput and database bytes per 10k pi deltas
//!
//! Set CORRAL_BENCH_RUNS to change the number of latency samples (200),
//! CORRAL_BENCH_ONLY=completion to measure the completion latencies alone.

mod harness;

use std::process::Command;
use std::time::Duration;

use corral::RunStatus;
use harness::{fake_agent, now_us, report, Bench, AGENT_MODE};

/// Runs `corral wait ID` to its end.
fn corral_wait(id: &str) {
    let status =
        Command::new(env!("CARGO_BIN_EXE_corral")).args(["wait", id]).stdout(std::process::Stdio::null()).status();
    status.unwrap();
}

fn main() {
    if std::env::var_os(AGENT_MODE).is_some() {
        fake_agent();
        return;
    }
    let bench = Bench::new();
    let samples: usize = std::env::var("CORRAL_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    println!(
        "Corral lifecycle benchmark ({} cores, {samples} samples)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    bench.completion_latency(samples, false);
    bench.completion_latency(samples / 10, true);
    if std::env::var("CORRAL_BENCH_ONLY").is_ok_and(|only| only == "completion") {
        return;
    }
    bench.wait_latency(samples / 2);
    bench.abort_latency(10);
    bench.ingestion(100_000, "deltas");
    bench.ingestion(100_000, "tools");
    bench.database_bytes(10_000);
    bench.parent_wake(samples / 10);
}

impl Bench {
    /// `linger`: the agent's process stays after its last line (until the
    /// exit grace ends it), as real agents' often do.
    fn completion_latency(&self, n: usize, linger: bool) {
        let mut store = self.store();
        let (mut seen, mut committed) = (Vec::new(), Vec::new());
        let then = if linger { "linger" } else { "exit" };
        for _ in 0..n {
            let id = self.launch(&mut store, &[("BENCH_DELAY_MS", "30".into()), ("BENCH_THEN", then.into())]);
            let saw = Self::until_terminal(&store, &id);
            let (_, written) = Self::read_mark(&self.mark(&id));
            let run = store.run(&id).unwrap();
            assert_eq!(run.status, RunStatus::Completed, "{run:?}");
            let completed = corral::text::time::parse(run.completed_at.as_deref().unwrap()).unwrap();
            seen.push((saw.saturating_sub(written)) as f64 / 1000.0);
            committed.push((completed.timestamp_micros() as f64 - written as f64) / 1000.0);
            Self::until_exited(&store, &id);
        }
        let agent = if linger { "agent lingering" } else { "agent exiting" };
        report(&format!("terminal line -> visible to a reader ({agent}, ms)"), &mut seen);
        report(&format!("terminal line -> completed_at ({agent}, ms, stored at 1 ms resolution)"), &mut committed);
    }

    fn wait_latency(&self, n: usize) {
        let mut store = self.store();
        let mut waits = Vec::new();
        for _ in 0..n {
            let id = self.launch(&mut store, &[("BENCH_DELAY_MS", "300".into())]);
            corral_wait(&id);
            let returned = now_us();
            let (_, written) = Self::read_mark(&self.mark(&id));
            waits.push(returned.saturating_sub(written) as f64 / 1000.0);
            Self::until_exited(&store, &id);
        }
        report("terminal line -> `corral wait` returns (ms)", &mut waits);
    }

    fn abort_latency(&self, n: usize) {
        let mut store = self.store();
        let mut reaped = Vec::new();
        for _ in 0..n {
            let id = self.launch(&mut store, &[("BENCH_DELAY_MS", "600000".into()), ("BENCH_IGNORE_TERM", "1".into())]);
            while store.run(&id).unwrap().status != RunStatus::Running {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(50));
            let start = corral::text::time::now();
            corral::verbs::abort::abort(&mut store, &id, Duration::from_secs(10), &self.shepherd).unwrap();
            Self::until_exited(&store, &id);
            let exited = corral::text::time::parse(store.run(&id).unwrap().exited_at.as_deref().unwrap()).unwrap();
            let survivors = corral::process::processes_with_env("CORRAL_RUN_ID", &id);
            assert!(survivors.is_empty(), "survivors {survivors:?}");
            reaped.push((exited - start).num_milliseconds() as f64);
        }
        report("abort -> last process reaped (ms; stop grace 1000 ms, agent ignores SIGTERM)", &mut reaped);
    }

    /// `kind`: `deltas` (pi message_update lines, never parsed nor stored) or
    /// `tools` (tool results: each parsed and stored as one event row).
    fn ingestion(&self, lines: usize, kind: &str) {
        let mut store = self.store();
        let vars = [("BENCH_LINES", lines.to_string()), ("BENCH_THEN", "linger".into()), ("BENCH_KIND", kind.into())];
        let id = self.launch(&mut store, &vars);
        Self::until_terminal(&store, &id);
        let run = store.run(&id).unwrap();
        let (start, _) = Self::read_mark(&self.mark(&id));
        let completed =
            corral::text::time::parse(run.completed_at.as_deref().unwrap()).unwrap().timestamp_micros() as u128;
        let secs = (completed - start) as f64 / 1e6;
        let pid = run.shepherd_pid.unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let hwm = status.lines().find(|l| l.starts_with("VmHWM")).unwrap_or("VmHWM: ?").to_string();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let rss = hwm.split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
        println!(
            "ingestion of {lines} pi {kind} lines: {secs:.3} s = {:.0} lines/s; shepherd peak RSS {rss}; CPU {:.1} ms per 10k lines",
            lines as f64 / secs,
            ticks / hz * 1000.0 / (lines as f64 / 10_000.0)
        );
        Self::until_exited(&store, &id);
    }

    fn database_bytes(&self, lines: usize) {
        let mut store = self.store();
        let id = self.launch(&mut store, &[("BENCH_LINES", lines.to_string())]);
        Self::until_exited(&store, &id);
        let db = rusqlite::Connection::open(self.home.database()).unwrap();
        let (rows, bytes): (i64, i64) = db
            .query_row(
                "SELECT count(*), coalesce(sum(length(text) + coalesce(length(json), 0) + length(kind) + length(at)), 0)
                 FROM events WHERE run_id = ?1",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        println!("database: {rows} event rows, {bytes} bytes of event data per {lines} pi deltas");
    }
}

impl Bench {
    /// A parent launches two children and ends its turn; measures from the
    /// last child's completion to the parent's continuation turn starting,
    /// and to `corral wait PARENT` returning.
    fn parent_wake(&self, n: usize) {
        let mut store = self.store();
        let (mut wake, mut waited) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let id = self.launch(
                &mut store,
                &[("BENCH_ROLE", "parent".into()), ("BENCH_CORRAL", env!("CARGO_BIN_EXE_corral").into())],
            );
            corral_wait(&id);
            let returned = corral::text::time::now();
            let run = store.run(&id).unwrap();
            assert_eq!(run.status, RunStatus::Completed, "{run:?}");
            let last_child = run
                .children
                .iter()
                .map(|c| corral::text::time::parse(store.run(c).unwrap().completed_at.as_deref().unwrap()).unwrap())
                .max()
                .unwrap();
            let events = store.events_after(&id, 0, 1000).unwrap();
            let continuation = events.iter().find(|e| e.text.starts_with("continuation turn")).expect("a continuation");
            let resumed = corral::text::time::parse(&continuation.at).unwrap();
            wake.push((resumed - last_child).num_milliseconds() as f64);
            waited.push((returned - last_child).num_milliseconds() as f64);
            Self::until_exited(&store, &id);
        }
        report("last child completed -> parent's continuation turn starts (ms)", &mut wake);
        report(
            "last child completed -> `corral wait PARENT` returns (ms, includes the continuation turn)",
            &mut waited,
        );
    }
}
