//! What the app relies on in the store: each ended run is claimed for a
//! notification exactly once, even with several app instances claiming at
//! the same time; counts and "Clear finished"; the follower that tells the
//! tray and the window what changed.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{corral_bin, eventually, fake_agent, Env};
use corral::upkeep::queue::ShepherdCommand;
use corral::watch::Follower;
use corral::{Home, Store};

#[test]
fn two_instances_racing_claim_each_run_exactly_once() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let ids: Vec<String> = (0..20).map(|i| env.launch("ok", &format!("run {i}"))).collect();
    for id in &ids {
        env.wait_end(id);
    }
    let home = Home::at(&env.home);
    let barrier = Arc::new(Barrier::new(4));
    let claimers: Vec<_> = (0..4)
        .map(|_| {
            let (home, barrier) = (home.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut store = Store::open(&home).unwrap();
                barrier.wait();
                let mut mine = Vec::new();
                for _ in 0..10 {
                    mine.extend(store.claim_notifications(3).unwrap().into_iter().map(|r| r.id));
                }
                mine
            })
        })
        .collect();
    let claimed: Vec<String> = claimers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let unique: HashSet<&String> = claimed.iter().collect();
    assert_eq!(claimed.len(), 20, "every run claimed once, none twice: {claimed:?}");
    assert_eq!(unique.len(), 20);
    assert!(Store::open(&home).unwrap().claim_notifications(100).unwrap().is_empty(), "nothing left to announce");
}

#[test]
fn counts_follow_runs_and_clear_finished() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    env.command_preset("bad", &[&fake_agent("exit-with"), "1"]);
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let ok = env.launch("ok", "a");
    let bad = env.launch("bad", "b");
    let slow = env.launch("slow", "c");
    env.wait_end(&ok);
    env.wait_end(&bad);
    let mut store = Store::open(&Home::at(&env.home)).unwrap();
    let counts = store.counts().unwrap();
    assert_eq!((counts.running, counts.total, counts.unseen_failures), (1, 3, 1));
    // A summary's click lists the runs that ended since its first.
    let since = store.run(&ok).unwrap().completed_at.unwrap().min(store.run(&bad).unwrap().completed_at.unwrap());
    let ended = store.runs(&corral::store::RunFilter { ended_since: Some(since), ..Default::default() }).unwrap();
    let mut ids: Vec<&str> = ended.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    let mut want = [ok.as_str(), bad.as_str()];
    want.sort();
    assert_eq!(ids, want, "the ended runs, not the running one");
    store.mark_seen(&bad).unwrap();
    assert_eq!(store.counts().unwrap().unseen_failures, 0);
    assert_eq!(store.dismiss_finished().unwrap(), 2);
    let counts = store.counts().unwrap();
    assert_eq!((counts.running, counts.total), (1, 1), "cleared runs leave the total; the running one stays");
    std::fs::write(&release, "").unwrap();
    env.wait_end(&slow);
    assert_eq!(env.json(&["ls"]).as_array().unwrap().len(), 1);
    assert_eq!(env.json(&["ls", "--all"]).as_array().unwrap().len(), 3);
}

#[test]
fn the_status_version_moves_with_statuses_not_with_transcript_lines() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    let release = env.project.join("release");
    // Prints a line every 10 ms until released.
    let script = format!("while [ ! -e '{}' ]; do echo tick; sleep 0.01; done", release.display());
    env.command_preset("ticker", &["sh", "-c", &script]);
    let id = env.launch("ticker", "x");
    let store = Store::open(&Home::at(&env.home)).unwrap();
    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    let (status, data) = (store.status_version().unwrap(), store.data_version().unwrap());
    assert!(eventually(Duration::from_secs(10), || store.event_count(&id).unwrap() > 20), "lines flow");
    assert_ne!(store.data_version().unwrap(), data, "every batch of lines is a commit");
    assert_eq!(store.status_version().unwrap(), status, "but not a status change");
    std::fs::write(&release, "").unwrap();
    env.wait_end(&id);
    assert!(store.status_version().unwrap() > status, "the end is one");
}

#[test]
fn a_follower_tells_status_changes_at_once_and_grown_transcripts_when_asked() {
    let env = Env::new();
    let release = env.project.join("release");
    env.command_preset("talk", &[&fake_agent("ticker"), "20", "0.01"]);
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let shepherd = ShepherdCommand::program(corral_bin());
    let home = Home::at(&env.home);
    let mut window = Follower::new(home.clone(), shepherd.clone(), Some(Duration::from_millis(1))).unwrap();
    let mut tray = Follower::new(home, shepherd, None).unwrap();

    // The first round gives the counts to draw from.
    let first = window.round().unwrap();
    assert_eq!(first.counts.map(|c| c.total), Some(0));
    assert_eq!(tray.round().unwrap().counts.map(|c| c.total), Some(0));
    assert!(tray.round().unwrap().is_empty(), "nothing changed, nothing told");

    // A launch is a status change: both are told, with the counts.
    let slow = env.launch("slow", "wait");
    let told = |f: &mut Follower| {
        let mut seen = None;
        eventually(Duration::from_secs(10), || {
            seen = f.round().unwrap().counts;
            seen.is_some_and(|c| c.running == 1)
        });
        seen
    };
    assert_eq!(told(&mut tray).map(|c| (c.running, c.total)), Some((1, 1)));
    assert_eq!(told(&mut window).map(|c| (c.running, c.total)), Some((1, 1)));

    // A transcript that grows is told to the window (which follows them),
    // never to the tray, and is no status change.
    let talk = env.launch("talk", "lines");
    let mut grown = Vec::new();
    assert!(eventually(Duration::from_secs(10), || {
        grown.extend(window.round().unwrap().transcripts);
        grown.contains(&talk)
    }));
    env.wait_end(&talk);
    assert!(eventually(Duration::from_secs(5), || tray.round().unwrap().counts.is_some_and(|c| c.total == 2)));
    for _ in 0..5 {
        assert!(tray.round().unwrap().transcripts.is_empty(), "the tray does not follow transcripts");
    }
    std::fs::write(&release, "").unwrap();
    env.wait_end(&slow);
    assert!(eventually(Duration::from_secs(5), || tray.round().unwrap().counts.is_some_and(|c| c.running == 0)));
}

#[test]
fn a_follower_reports_a_broken_config_and_recovers_once_fixed() {
    let env = Env::new();
    let shepherd = ShepherdCommand::program(corral_bin());
    let mut follower = Follower::new(Home::at(&env.home), shepherd, None).unwrap();
    assert!(follower.round().unwrap().counts.is_some());
    let config = env.home.join("config.toml");
    let good = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(&config, format!("{good}max_paralel = 3\n")).unwrap();
    let mut error = None;
    assert!(eventually(Duration::from_secs(5), || {
        error = follower.round().err();
        error.is_some()
    }));
    assert!(error.unwrap().to_string().contains("config.toml"), "says where the problem is");
    std::fs::write(&config, good).unwrap();
    let mut again = None;
    assert!(
        eventually(Duration::from_secs(5), || {
            again = follower.round().ok().and_then(|c| c.counts);
            again.is_some()
        }),
        "the counts again, to redraw what the problem hid"
    );
}

/// What a worktree run changed is measured at its end, after its status
/// was recorded: that measure (and a merge of it) moves the status version
/// too, or a list the tray or the window drew at the run's end stays
/// without its +N −M and its box to review it together.
#[test]
fn a_runs_measured_changes_and_its_merge_move_the_status_version() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    common::git(&env.project, &["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join("a.txt"), "a\n").unwrap();
    common::git(&env.project, &["add", "."]);
    common::git(&env.project, &["commit", "-qm", "init"]);
    let release = env.project.join("release");
    let script = format!("echo changed > b.txt; while [ ! -e '{}' ]; do sleep 0.01; done", release.display());
    env.command_preset_with("edits", &["sh", "-c", &script], "worktree: true\n");
    let id = env.launch("edits", "x");
    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    let mut store = Store::open(&Home::at(&env.home)).unwrap();
    let before = store.status_version().unwrap();
    store.record_changes(&id, corral::worktree::ChangeCount { files: 1, added: 1, removed: 0 }).unwrap();
    assert!(store.status_version().unwrap() > before, "the measure is a change the views show");
    let before = store.status_version().unwrap();
    store.record_changes(&id, corral::worktree::ChangeCount { files: 1, added: 1, removed: 0 }).unwrap();
    assert_eq!(store.status_version().unwrap(), before, "the same measure again moves nothing");
    std::fs::write(&release, "").unwrap();
    env.wait_end(&id);
    let before = store.status_version().unwrap();
    env.ok(&["merge", &id]);
    assert!(store.status_version().unwrap() > before, "a merge is a change the views show");
}
