//! Healing benchmark: prints figures, asserts nothing.
//!
//! `cargo bench --bench healing` measures, with `max_parallel = 1`, a run A
//! working and a run B queued behind it, and nothing else of Corral alive
//! but one `corral wait B`: from `kill -9` of A's shepherd to A committed
//! `lost`, and to B started (its promotion, and its agent running). The
//! waiter is told of the death by a pidfd, not by a periodic heal.
//!
//! Set CORRAL_BENCH_RUNS to change the number of samples (30).

mod harness;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral::process::{ProcessId, Sig};
use corral::RunStatus;
use harness::{fake_agent, report, Bench, AGENT_MODE};

fn main() {
    if std::env::var_os(AGENT_MODE).is_some() {
        fake_agent();
        return;
    }
    let bench = Bench::with_config("max_parallel = 1\nexit_grace = \"100ms\"\nstop_grace = \"300ms\"\n");
    let samples: usize = std::env::var("CORRAL_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    println!("Corral healing benchmark ({samples} samples)");
    let mut store = bench.store();
    let (mut lost, mut promoted, mut running) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples {
        let a = bench.launch(&mut store, &[("BENCH_DELAY_MS", "600000".into())]);
        let b = bench.launch(&mut store, &[("BENCH_DELAY_MS", "20".into())]);
        while store.run(&a).unwrap().status != RunStatus::Running {
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut waiter =
            Command::new(env!("CARGO_BIN_EXE_corral")).args(["wait", &b]).stdout(Stdio::null()).spawn().unwrap();
        // Let the wait settle into its loop, past the healing at its start;
        // a random phase, so the kill lands anywhere between two heals.
        std::thread::sleep(Duration::from_millis(400 + fastrand::u64(0..250)));
        assert_eq!(store.run(&b).unwrap().status, RunStatus::Queued);
        let run = store.run(&a).unwrap();
        let shepherd = ProcessId { pid: run.shepherd_pid.unwrap(), start: run.shepherd_start.unwrap() };
        let killed = corral::text::time::now();
        shepherd.signal(Sig::Kill).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.run(&b).unwrap().started_at.is_none() {
            assert!(Instant::now() < deadline, "B never started");
            std::thread::sleep(Duration::from_millis(1));
        }
        let ms = |at: &Option<String>| {
            (corral::text::time::parse(at.as_deref().unwrap()).unwrap() - killed).num_microseconds().unwrap() as f64
                / 1000.0
        };
        let (a_run, b_run) = (store.run(&a).unwrap(), store.run(&b).unwrap());
        assert_eq!(a_run.status, RunStatus::Lost);
        lost.push(ms(&a_run.completed_at));
        promoted.push(ms(&b_run.promoted_at));
        running.push(ms(&b_run.started_at));
        waiter.wait().unwrap();
    }
    report("kill -9 of a working run's shepherd -> run committed lost (ms)", &mut lost);
    report("kill -9 -> the next queued run promoted (ms)", &mut promoted);
    report("kill -9 -> the next queued run's agent running (ms)", &mut running);
}
