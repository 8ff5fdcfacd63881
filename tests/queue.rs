//! The queue: `max_parallel` runs at once, the rest `queued` and started in
//! launch order by the shepherds that free their slots — with no CLI or app
//! involved.

mod common;

use std::time::Duration;

use common::{eventually, fake_agent, Env};
use corral::{Home, RunStatus, Store};

#[test]
fn runs_beyond_max_parallel_wait_and_start_in_launch_order() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), "max_parallel = 2\nexit_grace = \"100ms\"\n").unwrap();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);

    let ids: Vec<String> = (0..5).map(|i| env.launch("slow", &format!("job {i}"))).collect();
    let store = Store::open(&Home::at(&env.home)).unwrap();
    let status = |id: &str| store.run(id).unwrap().status;
    assert!(eventually(Duration::from_secs(10), || ids[..2].iter().all(|id| status(id) == RunStatus::Running)));
    for id in &ids[2..] {
        assert_eq!(status(id), RunStatus::Queued, "{id}");
    }

    // Aborting a queued run ends it at once, without a shepherd.
    let aborted = env.json(&["abort", &ids[4]]);
    assert_eq!(aborted[0]["status"], "aborted");
    assert!(aborted[0]["shepherd_pid"].is_null());

    // From here on, only the store is read: no CLI runs to move the queue.
    // In launch order, queued runs always come after those that got a slot.
    std::fs::write(&release, "").unwrap();
    let all_done = eventually(Duration::from_secs(20), || {
        let statuses: Vec<RunStatus> = ids[..4].iter().map(|id| status(id)).collect();
        let first_queued = statuses.iter().position(|s| *s == RunStatus::Queued).unwrap_or(4);
        assert!(statuses[first_queued..].iter().all(|s| *s == RunStatus::Queued), "out of order: {statuses:?}");
        assert!(
            statuses.iter().filter(|s| !s.is_terminal() && **s != RunStatus::Queued).count() <= 2,
            "over max_parallel"
        );
        statuses.iter().all(|s| *s == RunStatus::Completed)
    });
    assert!(all_done, "{:?}", ids.iter().map(|id| status(id)).collect::<Vec<_>>());
}

/// `corral abort` of a running run and the runs queued behind it aborts
/// them all before the slot the first frees can start one: no queued
/// run's agent starts only to be killed (and to spend meanwhile); and an
/// unknown id among them aborts none.
#[test]
fn aborting_runs_together_never_starts_the_queued_ones_among_them() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let config = "max_parallel = 1\nexit_grace = \"100ms\"\nstop_grace = \"300ms\"\n";
    std::fs::write(env.home.join("config.toml"), config).unwrap();
    let marks = env.project.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    // It ignores SIGTERM: its slot frees while the abort waits it out.
    let script = format!("trap '' TERM; echo started > {}/\"$CORRAL_TASK\"; sleep 30", marks.display());
    env.command_preset("mark", &["sh", "-c", &script]);
    let ids: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|task| env.launch("mark", task)).collect();
    let store = Store::open(&Home::at(&env.home)).unwrap();
    assert!(eventually(Duration::from_secs(10), || marks.join("a").exists()));

    let out = env.corral(&["abort", &ids[0], "no-such-run", &ids[1]]);
    assert!(!out.status.success(), "an unknown id was passed over");
    assert_eq!(
        store.run(&ids[0]).unwrap().status,
        RunStatus::Running,
        "a run was aborted before the unknown id was found"
    );

    let mut args = vec!["abort"];
    args.extend(ids.iter().map(String::as_str));
    let aborted = env.json(&args);
    assert!(aborted.as_array().unwrap().iter().all(|r| r["status"] == "aborted"), "{aborted:#}");
    for id in &ids[1..] {
        let run = store.run(id).unwrap();
        assert!(run.started_at.is_none() && run.agent_pid.is_none(), "queued run {id} was started: {run:?}");
    }
    for task in ["b", "c", "d", "e"] {
        assert!(!marks.join(task).exists(), "queued run {task}'s agent ran");
    }
}
