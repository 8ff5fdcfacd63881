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
