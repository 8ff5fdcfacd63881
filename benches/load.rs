//! Load benchmark (a long soak: several minutes): prints figures and checks
//! that nothing was lost.
//!
//! `cargo bench --bench load`:
//! 1. 100 concurrent fake pi agents, each streaming 100 tool results a
//!    second for 30 s: every line in its transcript, every run completed;
//!    machine CPU, shepherd CPU and peak RSS, database size, and the time
//!    from the last terminal line to the last `completed_at`.
//! 2. 1,000 runs queued behind `max_parallel = 8`: all complete, in launch
//!    order.
//!
//! CORRAL_LOAD_RUNS, CORRAL_LOAD_SECONDS and CORRAL_QUEUE_RUNS scale it down.

mod harness;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use corral::RunStatus;
use harness::{fake_agent, Bench, AGENT_MODE};

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    if std::env::var_os(AGENT_MODE).is_some() {
        fake_agent();
        return;
    }
    concurrent(env_or("CORRAL_LOAD_RUNS", 100), env_or("CORRAL_LOAD_SECONDS", 30), 100);
    queue(env_or("CORRAL_QUEUE_RUNS", 1000));
}

/// Busy and total jiffies of the whole machine.
fn machine_cpu() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<u64> =
        stat.lines().next().unwrap().split_whitespace().skip(1).map(|f| f.parse().unwrap()).collect();
    let idle = fields[3] + fields[4];
    (fields.iter().sum::<u64>() - idle, fields.iter().sum())
}

/// (utime + stime ticks, VmHWM kB) of a live process.
fn sample(pid: i32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    let ticks = fields[11].parse::<u64>().ok()? + fields[12].parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status.lines().find(|l| l.starts_with("VmHWM"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some((ticks, hwm))
}

fn concurrent(runs: u64, seconds: u64, rate: u64) {
    let bench = Bench::with_config(&format!("max_parallel = {}\nexit_grace = \"300ms\"\n", runs + 8));
    let mut store = bench.store();
    let (busy0, total0) = machine_cpu();
    let started = Instant::now();
    let ids: Vec<String> = (0..runs)
        .map(|_| bench.launch(&mut store, &[("BENCH_RATE", rate.to_string()), ("BENCH_SECONDS", seconds.to_string())]))
        .collect();
    // Sample every shepherd until it exits: its last sample is its total.
    let mut last: HashMap<String, (u64, u64)> = HashMap::new();
    while ids.iter().any(|id| store.run(id).unwrap().exited_at.is_none()) {
        for id in &ids {
            let run = store.run(id).unwrap();
            if let Some(found) = run.shepherd_pid.and_then(sample) {
                last.insert(id.clone(), found);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let wall = started.elapsed().as_secs_f64();
    let (busy1, total1) = machine_cpu();
    let expected = rate * seconds;
    let mut last_written = 0u128;
    let mut last_completed = 0i64;
    for id in &ids {
        let run = store.run(id).unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{run:?}");
        let events = store.event_count(id).unwrap() as u64;
        // The paced tool results, plus the final message's text and usage.
        assert_eq!(events, expected + 2, "every line of {id} is in its transcript");
        let (_, written) = Bench::read_mark(&bench.mark(id));
        last_written = last_written.max(written);
        let completed = corral::text::time::parse(run.completed_at.as_deref().unwrap()).unwrap();
        last_completed = last_completed.max(completed.timestamp_micros());
    }
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let shepherd_cpu: f64 = last.values().map(|(t, _)| *t as f64 / hz).sum();
    let peak_rss = last.values().map(|(_, kb)| *kb).max().unwrap_or(0);
    let db = std::fs::metadata(bench.home.database()).map(|m| m.len()).unwrap_or(0);
    let wal = std::fs::metadata(bench.home.database().with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
    println!(
        "load: {runs} agents x {rate} lines/s x {seconds} s = {} lines, all in their transcripts, all completed",
        runs * expected
    );
    println!(
        "  wall time {wall:.1} s; machine CPU busy {:.0}% of 2 cores",
        100.0 * (busy1 - busy0) as f64 / (total1 - total0) as f64
    );
    println!(
        "  shepherds: {shepherd_cpu:.1} s CPU in all ({:.2} s each), peak RSS {:.1} MB",
        shepherd_cpu / runs as f64,
        peak_rss as f64 / 1024.0
    );
    println!(
        "  database: {:.1} MB ({:.0} bytes per line, full-text index included); WAL {:.1} MB",
        db as f64 / 1e6,
        db as f64 / (runs * expected) as f64,
        wal as f64 / 1e6
    );
    println!(
        "  last terminal line -> last completed_at: {:.1} ms",
        (last_completed as f64 - last_written as f64) / 1000.0
    );
}

fn queue(runs: u64) {
    let bench = Bench::with_config("max_parallel = 8\nexit_grace = \"100ms\"\n");
    let mut store = bench.store();
    let started = Instant::now();
    // Each run takes 100 ms, so the queue builds up while launching.
    let mut ids = Vec::new();
    let mut most_queued = 0;
    for i in 0..runs {
        ids.push(bench.launch(&mut store, &[("BENCH_DELAY_MS", "100".into())]));
        if i % 50 == 0 {
            let queued = corral::store::RunFilter { status: Some(RunStatus::Queued), ..Default::default() };
            most_queued = most_queued.max(store.runs(&queued).unwrap().len());
        }
    }
    let launched = started.elapsed().as_secs_f64();
    let mut most_active = 0;
    let mut samples = 0;
    loop {
        // In launch order, the runs still queued always come after every
        // run that got a slot: nothing jumps the queue.
        let statuses: Vec<RunStatus> = ids.iter().map(|id| store.run(id).unwrap().status).collect();
        let first_queued = statuses.iter().position(|s| *s == RunStatus::Queued).unwrap_or(statuses.len());
        assert!(
            statuses[first_queued..].iter().all(|s| *s == RunStatus::Queued),
            "a later run started before an earlier one"
        );
        let holding = statuses.iter().filter(|s| matches!(s, RunStatus::Starting | RunStatus::Running)).count();
        most_active = most_active.max(holding);
        samples += 1;
        if statuses.iter().all(|s| s.is_terminal()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = started.elapsed().as_secs_f64();
    for id in &ids {
        assert_eq!(store.run(id).unwrap().status, RunStatus::Completed, "{id}");
    }
    assert!(most_active <= 8, "{most_active} runs held a slot at once");
    println!("queue: {runs} runs behind max_parallel = 8: all completed, started in launch order ({samples} samples)");
    println!(
        "  launched in {launched:.1} s (up to {most_queued} queued); all done in {wall:.1} s ({:.1} runs/s); at most {most_active} held a slot at once",
        runs as f64 / wall
    );
}
