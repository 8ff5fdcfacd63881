//! Truth where agents orchestrate agents: one regression test per repro of
//! "runs stuck, falsely lost or unlaunchable", each named after it. The
//! model-based random test in `model.rs` hunts for the rest of the class.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use common::signal_pid;
use common::{eventually, fake_agent, output_within, stream, Env};
use corral::process::Sig;
use corral::RunStatus;
use serde_json::Value;

/// Long enough for any of these on a loaded machine; a deadlock never ends.
const LIMIT: Duration = Duration::from_secs(30);

fn exit_code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

/// One slot, held by a `slow` run `a` until the file `release` exists, and
/// a `quick` run `b` launched behind it.
fn one_slot_taken() -> (Env, std::path::PathBuf, String, String) {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let a = env.launch("slow", "first");
    let b = env.launch("quick", "second");
    (env, release, a, b)
}

/// One slot, held by a `slow` run at work until the file `release`
/// exists (a `quick` preset beside it): the run as `show` said it running.
fn one_slot_at_work() -> (Env, std::path::PathBuf, String, Value) {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let a = env.launch("slow", "first");
    let run = env.wait_run(&a, LIMIT, |r| r["status"] == "running");
    (env, release, a, run)
}

fn status_in_store(env: &Env, id: &str) -> RunStatus {
    env.store().run(id).unwrap().status
}

#[test]
fn a_claude_preset_with_allowed_tools_and_a_dash_task_gets_its_task() {
    let env = Env::new();
    env.agent_preset("rc", "claude", "args: [--allowedTools, \"Bash(corral launch:*)\", --add-dir, /tmp]\n");
    env.agent_preset("rx", "codex", "args: [--full-auto]\n");
    env.agent_preset("rp", "pi", "args: [--unknown-flag]\n");
    let task = "--verbose please, and @file too";
    for preset in ["rc", "rx", "rp"] {
        let args_file = env.project.join(format!("{preset}.args"));
        // `--` ends Corral's own options, as the README says.
        let mut cmd = env.command(&["launch", preset, "--", task]);
        cmd.env("FAKE_STREAM", stream("claude-2.1-read-tool-success.jsonl")).env("FAKE_ARGS", &args_file);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        env.wait_end(&id);
        let args = std::fs::read_to_string(&args_file).unwrap();
        let args: Vec<&str> = args.lines().collect();
        let stdin = std::fs::read_to_string(format!("{}.stdin", args_file.display())).unwrap();
        // On stdin, whole, for every agent: no option can take it (pi's
        // unknown flag, Claude's variadic --allowedTools) and no other
        // local user can read it in /proc.
        assert!(stdin.ends_with(task), "{preset} gets its task on stdin: {stdin:?}");
        assert!(!args.iter().any(|a| a.contains("please")), "{preset}: the task is in argv: {args:?}");
    }
}

#[test]
fn a_run_waiting_in_its_own_turn_gives_its_slot_to_its_child() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.command_preset("orch", &["sh", "-c", "id=$(corral launch quick x) && corral wait \"$id\""]);
    let out = output_within(env.command(&["launch", "orch", "go", "--wait", "--json"]), LIMIT)
        .expect("launch --wait of a parent that waits in its turn must return, not deadlock");
    assert_eq!(exit_code(&out), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["status"], "completed");
    let child = env.show(run["children"][0].as_str().unwrap());
    assert_eq!(child["status"], "completed");
}

#[test]
fn more_waiting_parents_than_slots_all_finish() {
    let env = Env::new();
    env.config("max_parallel = 2\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.command_preset(
        "lead",
        &["sh", "-c", "a=$(corral launch quick a) && b=$(corral launch quick b) && corral wait \"$a\" \"$b\""],
    );
    let ids: Vec<String> = (0..5).map(|i| env.launch("lead", &format!("lead {i}"))).collect();
    let mut args = vec!["wait"];
    args.extend(ids.iter().map(String::as_str));
    let out = output_within(env.command(&args), LIMIT).expect("five waiting parents on two slots must not deadlock");
    assert_eq!(exit_code(&out), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_run_queued_for_minutes_is_not_lost_when_it_starts() {
    let (env, release, a, b) = one_slot_taken();
    assert_eq!(env.show(&b)["status"], "queued");
    // As if B had waited in the queue for five minutes.
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    db.execute("UPDATE runs SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-5 minutes') WHERE id = ?1", [&b])
        .unwrap();
    let waiter = std::thread::spawn({
        let cmd = env.command(&["wait", &b]);
        move || output_within(cmd, LIMIT)
    });
    assert!(eventually(Duration::from_secs(10), || status_in_store(&env, &a) == RunStatus::Running));
    std::fs::write(&release, "").unwrap();
    let out = waiter.join().unwrap().expect("wait must return");
    let run = env.show(&b);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(exit_code(&out), Some(0));
}

#[test]
fn a_waiting_parent_learns_at_once_that_its_childs_shepherd_died() {
    let env = Env::new();
    env.config("children_timeout = \"none\"\n");
    env.use_fake("pi", "parent");
    env.agent_preset("lead", "pi", "");
    env.command_preset("hang", &[&fake_agent("child"), "never"]);
    let never = env.project.join("never-created");
    let parent = env.launch_env(
        "lead",
        "coordinate",
        &[
            ("PARENT_CHILDREN", "hang"),
            ("PARENT_EXPECT", "lost"),
            ("PARENT_LOG", env.project.join("parent.log").to_str().unwrap()),
            ("CHILD_RELEASE", never.to_str().unwrap()),
        ],
    );
    let waiting = env.wait_run(&parent, Duration::from_secs(10), |r| r["status"] == "waiting");
    let child = waiting["children"][0].as_str().unwrap().to_string();
    let child_run = env.wait_run(&child, Duration::from_secs(10), |r| r["status"] == "running");
    let shepherd = child_run["shepherd_pid"].as_i64().unwrap() as i32;
    signal_pid(shepherd, Sig::Kill).unwrap();
    // Only the store is read from here: no Corral command heals it, only
    // the parent's shepherd can.
    let ended = eventually(Duration::from_secs(5), || status_in_store(&env, &parent).is_terminal());
    assert!(ended, "parent still {:?}, child {:?}", status_in_store(&env, &parent), status_in_store(&env, &child));
    assert_eq!(status_in_store(&env, &child), RunStatus::Lost);
    let run = env.show(&parent);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "Combined: lost");
}

#[test]
fn the_queue_moves_when_a_shepherd_dies_while_only_a_wait_is_alive() {
    let (env, _release, a, b) = one_slot_taken();
    let a_run = env.wait_run(&a, Duration::from_secs(10), |r| r["status"] == "running");
    let mut waiter = env.command(&["wait", &b]).spawn().unwrap();
    // Past its start (which heals too), into its loop: the database open,
    // and asleep for a while.
    let pid = waiter.id() as i32;
    let db = env.home.join("corral.db");
    let mut asleep_since = None;
    let settled = eventually(Duration::from_secs(10), || {
        let has_db = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == db));
        if !(has_db && corral::process::state_of(pid) == Some('S')) {
            asleep_since = None;
            return false;
        }
        asleep_since.get_or_insert_with(std::time::Instant::now).elapsed() > Duration::from_millis(300)
    });
    assert!(settled, "corral wait never settled into its loop");
    assert_eq!(status_in_store(&env, &b), RunStatus::Queued);
    signal_pid(a_run["shepherd_pid"].as_i64().unwrap() as i32, Sig::Kill).unwrap();
    let ended = eventually(LIMIT, || waiter.try_wait().unwrap().is_some());
    if !ended {
        let _ = waiter.kill();
    }
    assert!(ended, "the wait must see B start and end; B is {:?}", status_in_store(&env, &b));
    assert_eq!(waiter.wait().unwrap().code(), Some(0));
    assert_eq!(env.show(&a)["status"], "lost");
    assert_eq!(env.show(&b)["status"], "completed");
}

#[test]
fn a_queued_run_starts_with_its_launchers_environment() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("envcheck", &["sh", "-c", "echo \"FOO=$FOO PATH=$PATH\""]);
    let a = env.launch("slow", "first");
    let mut cmd = env.command(&["launch", "envcheck", "x"]);
    cmd.env("FOO", "from-the-launcher").env("CORRAL_SECRET_TOKEN", "sekrit-4711");
    let out = cmd.output().unwrap();
    let b = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(env.show(&b)["status"], "queued");
    env.wait_run(&a, Duration::from_secs(10), |r| r["status"] == "running");
    // A's shepherd starts B: it has never seen FOO.
    std::fs::write(&release, "").unwrap();
    let run = env.wait_end(&b);
    assert_eq!(run["status"], "completed");
    let text = run["final_text"].as_str().unwrap();
    assert!(text.contains("FOO=from-the-launcher"), "{text}");
    assert!(text.contains(env.bin.to_str().unwrap()), "the launcher's PATH: {text}");

    // Kept with the run, privately, and nowhere else.
    let kept = env.run_dir(&b).join("env");
    assert_eq!(std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read(&kept).unwrap().windows(11).any(|w| w == b"sekrit-4711"));
    let db = std::fs::read(env.home.join("corral.db")).unwrap();
    assert!(!db.windows(11).any(|w| w == b"sekrit-4711"), "no secret in the database");
    assert_eq!(env.json(&["search", "sekrit-4711"]), serde_json::json!([]));
}

#[test]
fn a_child_launched_with_a_scrubbed_environment_is_still_its_parents() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    // Like Codex starting an MCP server: no CORRAL_RUN_ID in sight.
    env.command_preset("scrubbed", &["sh", "-c", "env -u CORRAL_RUN_ID corral launch quick x && sleep 0.2"]);
    let id = env.launch("scrubbed", "go");
    let run = env.wait_end(&id);
    let children = run["children"].as_array().unwrap();
    assert_eq!(children.len(), 1, "{run:#}");
    assert_eq!(env.show(children[0].as_str().unwrap())["parent_id"], id.as_str());
    // Outside any run, a stale id in the environment makes no parent.
    let mut cmd = env.command(&["launch", "quick", "y", "--json"]);
    cmd.env("CORRAL_RUN_ID", "nosuchrun");
    let top: Value = serde_json::from_slice(&cmd.output().unwrap().stdout).unwrap();
    assert!(top["parent_id"].is_null());
}

#[test]
fn a_last_line_without_newline_counts_though_a_grandchild_holds_stdout() {
    let env = Env::new();
    env.command_preset("words", &["sh", "-c", "sleep 30 & printf 'first line\\nlast words'"]);
    let id = env.launch("words", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert!(run["final_text"].as_str().unwrap().ends_with("last words"), "{run:#}");
}

#[test]
fn a_continuations_timeout_does_not_count_the_time_spent_waiting() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "parent");
    env.agent_preset("lead", "pi", "timeout: 2s\n");
    env.command_preset("late", &[&fake_agent("child"), "late-result"]);
    let release = env.project.join("release");
    let parent = env.launch_env(
        "lead",
        "coordinate",
        &[
            ("PARENT_CHILDREN", "late"),
            ("PARENT_EXPECT", "late-result"),
            ("PARENT_LOG", env.project.join("parent.log").to_str().unwrap()),
            ("CHILD_RELEASE", release.to_str().unwrap()),
            // The continuation works a little: long enough to be timed.
            ("PARENT_CONTINUATION_SECS", "0.5"),
        ],
    );
    let waiting = env.wait_run(&parent, Duration::from_secs(10), |r| r["status"] == "waiting");
    let waited_from = std::time::Instant::now();
    // Waiting longer than the whole timeout is not work.
    let child = waiting["children"][0].as_str().unwrap().to_string();
    while waited_from.elapsed() < Duration::from_millis(2500) {
        assert_eq!(status_in_store(&env, &parent), RunStatus::Waiting);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&release, "").unwrap();
    env.wait_end(&child);
    let run = env.wait_end(&parent);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "Combined: late-result");
}

#[test]
fn the_kill_sweep_gives_up_on_processes_that_keep_coming_back() {
    // Without a cgroup, a process carrying the run's id is taken for one of
    // the run's (one that left its tree); with one, only the kernel's list
    // counts (see `a_stranger_carrying_a_runs_id_is_not_the_runs_with_a_cgroup`).
    let env = Env::new();
    env.config("cgroups = false\n");
    let started = env.project.join("respawner-started");
    // The run ends once something outside its tree has started to keep
    // starting processes that carry the run's id: SIGKILL sweeps can never
    // leave none.
    let wait_for_it = format!("while [ ! -e '{}' ]; do sleep 0.02; done", started.display());
    env.command_preset("quick", &["sh", "-c", &wait_for_it]);
    let id = env.launch("quick", "x");
    // Four loops, each starting the next carrier the moment the last one
    // is killed, so one is nearly always there.
    let loops = "for n in 1 2 3 4; do (while :; do CORRAL_RUN_ID=\"$1\" sleep 5; done) & done; \
                 sleep 0.2; touch \"$2\"; wait";
    let mut respawner = std::process::Command::new("sh")
        .args(["-c", loops, "sh", &id])
        .arg(&started)
        .env_remove("CORRAL_RUN_ID")
        .process_group(0)
        .spawn()
        .unwrap();
    let run = env.wait_run(&id, Duration::from_secs(30), |r| !r["exited_at"].is_null());
    let _ = corral::process::signal_group(respawner.id() as i32, Sig::Kill);
    let _ = respawner.wait();
    assert_eq!(run["status"], "completed", "the outcome stands");
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
    assert!(signals.contains("giving up after"), "{signals}");
    for pid in common::processes_of_run(&id) {
        let _ = signal_pid(pid, Sig::Kill);
    }
}

#[test]
fn a_continuation_takes_a_slot_and_gets_it_before_the_queue() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    env.use_fake("pi", "parent");
    env.agent_preset("lead", "pi", "");
    env.command_preset("alpha", &[&fake_agent("child"), "alpha-result"]);
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let release = env.project.join("release");
    let parent = env.launch_env(
        "lead",
        "coordinate",
        &[
            ("PARENT_CHILDREN", "alpha"),
            ("PARENT_EXPECT", "alpha-result"),
            ("PARENT_LOG", env.project.join("parent.log").to_str().unwrap()),
            ("CHILD_RELEASE", release.to_str().unwrap()),
            ("PARENT_CONTINUATION_SECS", "0.3"),
        ],
    );
    // The parent's turn ended: waiting holds no slot, so its child runs.
    let waiting = env.wait_run(&parent, Duration::from_secs(10), |r| r["status"] == "waiting");
    let child = waiting["children"][0].as_str().unwrap().to_string();
    env.wait_run(&child, Duration::from_secs(10), |r| r["status"] == "running");
    let queued = env.launch("quick", "behind the parent");
    assert_eq!(env.show(&queued)["status"], "queued");
    std::fs::write(&release, "").unwrap();
    let store = env.store();
    let all_done = eventually(LIMIT, || {
        let working = store.slots().unwrap().working;
        assert!(working <= 1, "{working} runs work with max_parallel = 1");
        store.run(&queued).unwrap().status.is_terminal()
    });
    assert!(all_done);
    let p = env.wait_end(&parent);
    let q = env.wait_end(&queued);
    assert_eq!(p["final_text"], "Combined: alpha-result", "{p:#}");
    assert!(
        q["started_at"].as_str() >= p["completed_at"].as_str(),
        "the continuation had the slot first: parent completed {}, queued run started {}",
        p["completed_at"],
        q["started_at"]
    );
}

#[test]
fn a_run_whose_promoter_died_before_starting_it_goes_back_to_the_queue() {
    let (env, release, a, b) = one_slot_taken();
    // As if a process gave B its slot and was killed before it could start
    // B's shepherd: B is `starting`, with no shepherd, its promoter dead.
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    db.execute(
        "UPDATE runs SET status = 'starting', promoter_pid = 999999999, promoter_start = 1,
           promoted_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 seconds') WHERE id = ?1",
        [&b],
    )
    .unwrap();
    std::fs::write(&release, "").unwrap();
    let out = output_within(env.command(&["wait", &a, &b]), LIMIT).expect("wait must return");
    assert_eq!(exit_code(&out), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let run = env.show(&b);
    assert_eq!(run["status"], "completed", "{run:#}");
}

#[test]
fn a_wait_in_the_background_holds_the_slot_until_the_agent_really_waits() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    // The agent starts `corral wait CHILD &` and goes on working (its
    // shell runs `sleep`, which is not the wait), then waits for real.
    let script = "child=$(corral launch quick y); echo \"child $child\"; corral wait \"$child\" >/dev/null & \
                  i=0; while [ $i -lt 20 ]; do i=$((i+1)); echo \"working $i\"; sleep 0.05; done; wait; echo done";
    env.command_preset("lead", &["sh", "-c", script]);
    let lead = env.launch("lead", "x");
    let store = env.store();
    let tail = || env.ok(&["tail", "-n", "all", &lead]);
    assert!(eventually(LIMIT, || store.blocked_processes().unwrap().len() == 1), "the wait was never registered");
    assert!(eventually(LIMIT, || tail().contains("working 20")), "{}", tail());
    let child = env.show(&lead)["children"][0].as_str().expect("a child").to_string();
    let slots = store.slots().unwrap();
    assert_eq!(
        status_in_store(&env, &child),
        RunStatus::Queued,
        "the child started beside its working parent with max_parallel = 1 ({slots:?})"
    );
    assert!(slots.working <= 1, "{slots:?}");
    // Once the shell waits for it, the slot goes to the child, and both end.
    let run = env.wait_run(&lead, LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(env.show(&child)["status"], "completed");
}

/// However long the shell goes on working beside its `corral wait &` (a
/// loop of short `sleep`s, each one a moment where the shell sleeps in
/// `wait(2)` with a child just ended), the slot is never given up while it
/// works: one look that found it waiting is not kept for ever, and a
/// shell with a child just ended is about to work, not blocked.
#[test]
fn a_shell_working_in_a_sleep_loop_beside_its_background_wait_keeps_its_slot() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let script = "child=$(corral launch quick y); corral wait \"$child\" >/dev/null & \
                  i=0; while [ $i -lt 3000 ]; do i=$((i+1)); sleep 0.001; done; echo looped; wait; echo done";
    env.command_preset("lead", &["sh", "-c", script]);
    let lead = env.launch("lead", "x");
    let store = env.store();
    let tail = || env.ok(&["tail", "-n", "all", &lead]);
    assert!(eventually(LIMIT, || store.blocked_processes().unwrap().len() == 1), "the wait was never registered");
    let child = env.show(&lead)["children"][0].as_str().expect("a child").to_string();
    let mut started_beside = None;
    let looped = eventually(LIMIT, || {
        let done = tail().contains("looped");
        if !done && status_in_store(&env, &child) != RunStatus::Queued && started_beside.is_none() {
            started_beside = Some(store.slots().unwrap());
        }
        done
    });
    assert!(looped, "{}", tail());
    assert!(started_beside.is_none(), "the child started beside its working parent: {started_beside:?}");
    let run = env.wait_run(&lead, LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(env.show(&child)["status"], "completed");
}

/// A launch heals nothing on its own account, yet a slot held by a run
/// whose shepherd died is not kept from it: the launch that finds no slot
/// free heals, and starts at once into the slot the lost run held.
#[test]
fn a_launch_finding_the_slot_held_by_a_dead_shepherd_starts_at_once() {
    let (env, _release, a, a_run) = one_slot_at_work();
    signal_pid(a_run["shepherd_pid"].as_i64().unwrap() as i32, Sig::Kill).unwrap();
    // Nothing else looks at the store: no wait, no tray, no shepherd at work.
    let out = env.ok(&["launch", "quick", "second", "--json"]);
    let b: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(b["status"], "starting", "the launch was left in the queue behind a lost run: {b:#}");
    assert_eq!(status_in_store(&env, &a), RunStatus::Lost);
    let b = env.wait_run(b["id"].as_str().unwrap(), LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(b["status"], "completed", "{b:#}");
}

/// A wait whose process died no longer frees its run's slot for a launch:
/// the launch sees the dead waiter and heals before it counts the slots,
/// so it never starts beside `max_parallel` working runs.
#[test]
fn a_launch_does_not_take_the_slot_a_dead_waiter_seemed_to_free() {
    let (env, release, a, _) = one_slot_at_work();
    // As if A's agent blocked in a `corral wait` that was then killed: its
    // wait still says A holds no slot.
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    db.execute("INSERT INTO waits (run_id, pid, start, since, blocks) VALUES (?1, 999999999, 1, 'now', 2)", [&a])
        .unwrap();
    db.execute("INSERT INTO wait_targets (wait_id, run_id) VALUES (last_insert_rowid(), ?1)", [&a]).unwrap();
    drop(db);
    let out = env.ok(&["launch", "quick", "second", "--json"]);
    let b: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(b["status"], "queued", "started beside a working run with max_parallel = 1: {b:#}");
    std::fs::write(&release, "").unwrap();
    let b = env.wait_run(b["id"].as_str().unwrap(), LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(b["status"], "completed", "{b:#}");
}

/// What an agent left running after its run's shepherd died launches
/// nothing, and gets no answer from any door: its command heals first,
/// finds its run lost, and stops with it, as every other process of it.
/// Without cgroups too, and without the run's id in its environment: it is
/// in the agent's process group. The queue moves on first: the run queued
/// behind the lost one starts.
#[test]
fn an_agent_of_a_run_whose_shepherd_died_launches_nothing() {
    let configs = ["max_parallel = 1\n", "max_parallel = 1\ncgroups = false\n"];
    let commands = ["launch quick child", "launch quick child --parent OTHER", "wait nosuch", "wait OTHER"];
    for (config, command) in configs.iter().flat_map(|c| commands.iter().map(move |k| (c, k))) {
        let env = Env::new();
        env.config(config);
        let go = env.project.join("go");
        let after = env.project.join("after");
        env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
        let other = env.launch("quick", "another tree's");
        env.wait_end(&other);
        let command = command.replace("OTHER", &other);
        let script = format!(
            "(while [ ! -e {go} ]; do sleep 0.01; done; env -u CORRAL_RUN_ID corral {command}; \
             echo $? > {after}) & wait",
            go = go.display(),
            after = after.display()
        );
        env.command_preset("lead", &["sh", "-c", &script]);
        let lead = env.launch("lead", "x");
        let run = env.wait_run(&lead, LIMIT, |r| r["status"] == "running");
        let queued = env.launch("quick", "behind the lead");
        let said = format!("{config}, {command}");
        assert_eq!(status_in_store(&env, &queued), RunStatus::Queued, "{said}");
        signal_pid(run["shepherd_pid"].as_i64().unwrap() as i32, Sig::Kill).unwrap();
        std::fs::write(&go, "").unwrap();
        // Read without healing: only the agent's own command can find it
        // lost, and start the queue.
        assert!(eventually(LIMIT, || status_in_store(&env, &lead) == RunStatus::Lost), "{said}: no heal");
        let done = || status_in_store(&env, &queued) == RunStatus::Completed;
        assert!(eventually(LIMIT, done), "{said}: the queue stood still: {:?}", status_in_store(&env, &queued));
        let runs: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
        assert_eq!(runs.as_array().unwrap().len(), 3, "{said}: a run was launched by a lost run's agent: {runs:#}");
        let went_on = std::fs::read_to_string(&after);
        assert!(went_on.is_err(), "{said}: the lost run's agent went on after its command: {went_on:?}");
    }
}

/// A wait heals at its first look, even when the runs it waits on are
/// over: a run whose shepherd died is shown lost at once, its signals.log
/// saying when its agent started (the store says, as its shepherd held it).
#[test]
fn a_wait_on_ended_runs_still_ends_a_run_whose_shepherd_died() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let done = env.launch("quick", "done");
    env.wait_end(&done);
    // Its agent dies with its shepherd; what it started is left to kill.
    env.command_preset("leaves", &["sh", "-c", "sleep 300 & wait"]);
    let a = env.launch("leaves", "held");
    let run = env.wait_run(&a, LIMIT, |r| r["status"] == "running");
    assert!(eventually(LIMIT, || common::processes_of_run(&a).len() >= 2), "the agent and its sleep");
    signal_pid(run["shepherd_pid"].as_i64().unwrap() as i32, Sig::Kill).unwrap();
    env.ok(&["wait", &done]);
    assert_eq!(status_in_store(&env, &a), RunStatus::Lost);
    let signals = std::fs::read_to_string(env.run_dir(&a).join("signals.log")).unwrap();
    let started = signals.find("agent started").unwrap_or(usize::MAX);
    let killed = signals.find("its shepherd is gone").unwrap_or(0);
    assert!(started < killed, "{signals}");
}

/// A parent never ends before its children: what an ended run left
/// running (in the grace its shepherd gives leftovers) launches nothing,
/// and is told why.
#[test]
fn what_an_ended_run_left_running_launches_nothing() {
    let env = Env::new();
    env.short_graces("10s", "1s");
    let go = env.project.join("go");
    let after = env.project.join("after");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let script = format!(
        "(while [ ! -e {go} ]; do sleep 0.01; done; corral launch quick child 2>&1; echo \"exit $?\") > {after} & \
         echo parent-done",
        go = go.display(),
        after = after.display()
    );
    env.command_preset("lead", &["sh", "-c", &script]);
    let lead = env.launch("lead", "x");
    // Completed, its leftover still in its grace.
    env.wait_run(&lead, LIMIT, |r| r["status"] == "completed");
    std::fs::write(&go, "").unwrap();
    let said = || std::fs::read_to_string(&after).unwrap_or_default();
    assert!(eventually(LIMIT, || said().contains("exit ")), "{}", said());
    assert!(said().contains("has ended (completed)") && said().contains("exit 2"), "{}", said());
    let runs: Value = serde_json::from_str(&env.ok(&["ls", "--json"])).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    env.ok(&["abort", &lead]);
}
