//! Schedules as a user meets them through the CLI: each slot fired exactly
//! once however many firers race for it, a missed slot caught up once and
//! said late, overlap, prechecks and their items, the bounds, pausing
//! (by hand and by failures), `keep`, and daylight-saving jumps.
//!
//! The schedules' clock is moved with `CORRAL_SCHEDULE_CLOCK_OFFSET` (whole
//! seconds): slots hours apart are fired without waiting for them.

mod common;

use std::collections::HashSet;
use std::os::unix::ffi::OsStringExt;
use std::process::Command;
use std::time::Duration;

use common::{eventually, fake_agent, Env};
use serde_json::Value;

/// `corral ARGS` with the schedules' clock moved by `offset` seconds.
fn at(env: &Env, offset: i64, args: &[&str]) -> Command {
    let mut cmd = env.command(args);
    cmd.env("CORRAL_SCHEDULE_CLOCK_OFFSET", offset.to_string());
    cmd
}

fn ok_at(env: &Env, offset: i64, args: &[&str]) -> String {
    let out = at(env, offset, args).output().unwrap();
    assert!(
        out.status.success(),
        "corral {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_at(env: &Env, offset: i64, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    serde_json::from_str(&ok_at(env, offset, &args)).unwrap()
}

/// The schedule's fires, newest first, as `schedule show --json` says.
fn fires(env: &Env, name: &str) -> Vec<Value> {
    let shown = env.json(&["schedule", "show", name, "-n", "1000"]);
    shown["fires"].as_array().unwrap().clone()
}

fn outcomes(env: &Env, name: &str) -> Vec<String> {
    fires(env, name).iter().rev().map(|f| f["outcome"].as_str().unwrap().to_string()).collect()
}

/// Every run of this installation.
fn runs(env: &Env) -> Vec<Value> {
    env.json(&["ls", "--all"]).as_array().unwrap().clone()
}

fn all_runs_ended(env: &Env) -> bool {
    eventually(Duration::from_secs(30), || runs(env).iter().all(|r| !r["exited_at"].is_null()))
}

#[test]
fn each_slot_is_fired_once_however_many_firers_race_for_it() {
    let env = Env::new();
    env.config("max_parallel = 50\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    // Slots 100 s apart on the moved clock: the test's own minute of real
    // time never reaches the next slot.
    env.ok(&["schedule", "add", "tick", "--preset", "quick", "--every", "100s", "--overlap", "allow", "tick"]);

    // Three firers at each slot, let go at the same instant, for 200 slots.
    let slots = 200;
    let corral = common::corral_bin();
    for slot in 1..=slots {
        let offset = slot * 100 + 1;
        let go = env.project.join(format!("go-{slot}"));
        let script = format!("while [ ! -e '{}' ]; do :; done; exec \"$0\" schedule fire tick", go.display());
        let firers: Vec<_> = (0..3)
            .map(|_| {
                let mut firer = at(&env, offset, &[]);
                firer.env("CORRAL_SCHEDULE_CLOCK_OFFSET", offset.to_string());
                let mut sh = Command::new("sh");
                sh.args(["-c", &script]).arg(&corral);
                sh.envs(firer.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))));
                sh.current_dir(&env.project).stdout(std::process::Stdio::null());
                sh.spawn().unwrap()
            })
            .collect();
        std::fs::write(&go, "").unwrap();
        for mut firer in firers {
            assert!(firer.wait().unwrap().success());
        }
    }
    let fired = fires(&env, "tick");
    assert_eq!(fired.len(), slots as usize, "one fire per slot");
    let due: HashSet<&str> = fired.iter().map(|f| f["due_at"].as_str().unwrap()).collect();
    assert_eq!(due.len(), slots as usize, "no slot fired twice");
    assert!(fired.iter().all(|f| f["outcome"] == "launched" && f["runs"].as_array().unwrap().len() == 1));
    assert_eq!(runs(&env).len(), slots as usize, "one run per slot, none twice");
    assert!(all_runs_ended(&env));
}

#[test]
fn three_firers_running_side_by_side_launch_each_slot_once() {
    let env = Env::new();
    env.config("max_parallel = 50\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "tick", "--preset", "quick", "--every", "1s", "--overlap", "allow", "tick"]);
    let mut firers: Vec<_> = (0..3)
        .map(|_| env.command(&["schedule", "run"]).stdout(std::process::Stdio::null()).spawn().unwrap())
        .collect();
    let enough = eventually(Duration::from_secs(30), || fires(&env, "tick").len() >= 5);
    for firer in &mut firers {
        let _ = firer.kill();
        let _ = firer.wait();
    }
    assert!(enough, "the firers fired {} slots in 30 s", fires(&env, "tick").len());
    let fired = fires(&env, "tick");
    let due: HashSet<&str> = fired.iter().map(|f| f["due_at"].as_str().unwrap()).collect();
    assert_eq!(due.len(), fired.len());
    let launched: usize = fired.iter().map(|f| f["runs"].as_array().unwrap().len()).sum();
    assert_eq!(runs(&env).len(), launched, "each slot's run launched once");
    assert!(all_runs_ended(&env));
}

#[test]
fn slots_missed_while_nothing_ran_are_caught_up_once_and_said_late() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "nightly", "--preset", "quick", "--every", "1h", "bump deps"]);
    // Five and a half hours later, the laptop wakes: one fire, the latest slot.
    let woke = 5 * 3600 + 1800;
    let fire = json_at(&env, woke, &["schedule", "fire", "nightly"]);
    assert_eq!(fire["outcome"], "launched");
    let late = fire["late_ms"].as_i64().unwrap();
    assert!((1_800_000..1_810_000).contains(&late), "late by {late} ms");
    // A second firer at the same moment finds nothing due.
    assert_eq!(json_at(&env, woke, &["schedule", "fire", "nightly"]), Value::Null);
    assert_eq!(fires(&env, "nightly").len(), 1);
    let shown = ok_at(&env, woke, &["schedule", "show", "nightly"]);
    assert!(shown.contains("late by 30m"), "{shown}");
    assert!(all_runs_ended(&env));
}

#[test]
fn an_overlapping_fire_is_skipped_or_queued_as_the_schedule_says() {
    let env = Env::new();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.ok(&["schedule", "add", "skipper", "--preset", "slow", "--every", "10s", "work"]);
    env.ok(&["schedule", "add", "queuer", "--preset", "slow", "--every", "10s", "--overlap", "queue", "work"]);
    for name in ["skipper", "queuer"] {
        assert_eq!(json_at(&env, 11, &["schedule", "fire", name])["outcome"], "launched");
    }
    let skipped = json_at(&env, 21, &["schedule", "fire", "skipper"]);
    assert_eq!(skipped["outcome"], "skipped_overlap");
    assert!(skipped["detail"].as_str().unwrap().contains("still run"), "{skipped}");
    assert_eq!(json_at(&env, 21, &["schedule", "fire", "queuer"])["outcome"], "queued");
    // The last fire's run ends: the queued fire goes, once, at the next look.
    std::fs::write(&release, "").unwrap();
    assert!(eventually(Duration::from_secs(20), || runs(&env).iter().all(|r| !r["exited_at"].is_null())));
    let mut firer = at(&env, 22, &["schedule", "run"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    let went = eventually(Duration::from_secs(20), || outcomes(&env, "queuer") == ["launched", "launched"]);
    let _ = firer.kill();
    let _ = firer.wait();
    assert!(went, "{:?}", outcomes(&env, "queuer"));
    assert_eq!(outcomes(&env, "skipper"), ["launched", "skipped_overlap"]);
    assert!(all_runs_ended(&env));
}

#[test]
fn a_precheck_decides_and_each_item_is_worked_on_once() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let list = env.project.join("issues.txt");
    std::fs::write(&list, "12\n15\n19\n").unwrap();
    // A precheck that fails: nothing launched, its words kept.
    env.ok(&[
        "schedule",
        "add",
        "gate",
        "--preset",
        "quick",
        "--every",
        "10s",
        "--precheck",
        "sh -c 'echo no CI failure; exit 3'",
        "fix CI",
    ]);
    let skipped = json_at(&env, 11, &["schedule", "fire", "gate"]);
    assert_eq!(skipped["outcome"], "skipped_precheck");
    assert_eq!(skipped["detail"], "the precheck exited with 3: no CI failure");

    // One run per line, each line once: 3 items, then the same 3 and a new one.
    let precheck = format!("cat {}", list.display());
    env.ok(&[
        "schedule",
        "add",
        "triage",
        "--preset",
        "quick",
        "--every",
        "10s",
        "--precheck",
        &precheck,
        "--each",
        "work on issue {item}",
    ]);
    assert_eq!(json_at(&env, 11, &["schedule", "fire", "triage"])["runs"].as_array().unwrap().len(), 3);
    assert!(all_runs_ended(&env));
    std::fs::write(&list, "12\n15\n19\n23\n").unwrap();
    let second = json_at(&env, 21, &["schedule", "fire", "triage"]);
    assert_eq!(second["runs"].as_array().unwrap().len(), 1);
    assert_eq!(second["runs"][0]["item"], "23");
    assert!(all_runs_ended(&env));
    assert_eq!(json_at(&env, 31, &["schedule", "fire", "triage"])["outcome"], "skipped_nothing_new");
    let tasks: HashSet<String> = runs(&env).iter().map(|r| r["task"].as_str().unwrap().to_string()).collect();
    let expected: HashSet<String> = ["12", "15", "19", "23"].iter().map(|i| format!("work on issue {i}")).collect();
    assert_eq!(tasks, expected, "4 runs in all, not 7");
    assert!(all_runs_ended(&env));
}

#[test]
fn runs_per_hour_are_bounded_and_the_rest_wait_for_a_later_fire() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let list = env.project.join("items.txt");
    std::fs::write(&list, "a\nb\nc\nd\ne\n").unwrap();
    let precheck = format!("cat {}", list.display());
    env.ok(&[
        "schedule",
        "add",
        "bounded",
        "--preset",
        "quick",
        "--every",
        "10m",
        "--precheck",
        &precheck,
        "--each",
        "--max-runs-per-hour",
        "3",
        "item {item}",
    ]);
    let first = json_at(&env, 601, &["schedule", "fire", "bounded"]);
    assert_eq!(first["runs"].as_array().unwrap().len(), 3);
    assert!(first["detail"].as_str().unwrap().contains("2 more items left"), "{first}");
    assert!(all_runs_ended(&env));
    // Within the hour: nothing more.
    assert_eq!(json_at(&env, 1201, &["schedule", "fire", "bounded"])["outcome"], "skipped_limit");
    // An hour on, the two left go.
    let later = json_at(&env, 601 + 3600 + 60, &["schedule", "fire", "bounded"]);
    let items: Vec<&str> = later["runs"].as_array().unwrap().iter().map(|r| r["item"].as_str().unwrap()).collect();
    assert_eq!(items, ["d", "e"]);
    assert!(all_runs_ended(&env));
}

#[test]
fn a_paused_schedule_launches_nothing_until_resumed_and_pauses_itself_after_failures() {
    let env = Env::new();
    env.command_preset("failing", &[&fake_agent("exit-with"), "1"]);
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "held", "--preset", "quick", "--every", "10s", "work"]);
    env.ok(&["schedule", "pause", "held"]);
    let skipped = json_at(&env, 11, &["schedule", "fire", "held"]);
    assert_eq!(skipped["outcome"], "skipped_paused");
    // The user's own word goes, paused or not.
    assert_eq!(json_at(&env, 12, &["schedule", "run-now", "held"])["outcome"], "launched");
    assert!(all_runs_ended(&env));
    env.ok(&["schedule", "resume", "held"]);
    assert_eq!(json_at(&env, 21, &["schedule", "fire", "held"])["outcome"], "launched");

    env.ok(&[
        "schedule",
        "add",
        "flaky",
        "--preset",
        "failing",
        "--every",
        "10s",
        "--pause-after-failures",
        "2",
        "work",
    ]);
    for slot in 1..=2 {
        assert_eq!(json_at(&env, slot * 10 + 1, &["schedule", "fire", "flaky"])["outcome"], "launched");
        assert!(all_runs_ended(&env));
    }
    let paused = json_at(&env, 31, &["schedule", "fire", "flaky"]);
    assert_eq!(paused["outcome"], "skipped_paused");
    assert!(paused["detail"].as_str().unwrap().contains("last 2 fires failed"), "{paused}");
    let listed = env.ok(&["schedule", "ls"]);
    let line = listed.lines().find(|l| l.starts_with("flaky")).unwrap();
    assert!(line.contains("✗✗·") && line.contains("paused (its last 2 fires failed"), "{listed}");
}

#[test]
fn keep_removes_finished_runs_beyond_it() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "kept", "--preset", "quick", "--every", "10s", "--keep-last", "2", "work"]);
    let mut ids = Vec::new();
    for slot in 1..=4 {
        let fire = json_at(&env, slot * 10 + 1, &["schedule", "fire", "kept"]);
        ids.push(fire["runs"][0]["id"].as_str().unwrap().to_string());
        assert!(all_runs_ended(&env));
    }
    // At the fourth fire, the first two were beyond `keep`: gone; the
    // fourth is running or just ended, the third kept.
    let left: HashSet<String> = runs(&env).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert!(!left.contains(&ids[0]) && left.contains(&ids[2]) && left.contains(&ids[3]), "{left:?} of {ids:?}");
    let history = fires(&env, "kept");
    assert_eq!(history.last().unwrap()["runs"][0]["status"], Value::Null, "the history says the run was removed");
}

#[test]
fn a_daylight_saving_jump_fires_once_on_the_day() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let now = chrono::Utc::now().timestamp();
    // 2027-03-14, New York: 02:00 EST jumps to 03:00 EDT; 02:30 never is.
    let offset = |utc: &str| chrono::DateTime::parse_from_rfc3339(utc).unwrap().timestamp() - now;
    let ny = |cmd: &mut Command| {
        cmd.env("TZ", "America/New_York");
    };
    let mut add = at(
        &env,
        offset("2027-03-13T17:00:00Z"),
        &["schedule", "add", "early", "--preset", "quick", "--cron", "30 2 * * *", "work"],
    );
    ny(&mut add);
    assert!(add.output().unwrap().status.success());
    let fire_at = |utc: &str| {
        let mut cmd = at(&env, offset(utc), &["schedule", "fire", "early", "--json"]);
        ny(&mut cmd);
        serde_json::from_slice::<Value>(&cmd.output().unwrap().stdout).unwrap()
    };
    // 04:00 EDT on the day of the jump: the skipped 02:30 is one fire, at
    // the first moment after the gap (03:00 EDT, 07:00 UTC).
    let fire = fire_at("2027-03-14T08:00:00Z");
    assert_eq!(fire["due_at"], "2027-03-14T07:00:00.000Z", "{fire}");
    assert_eq!(fire_at("2027-03-14T08:00:01Z"), Value::Null);
    // The next day: 02:30 EDT (06:30 UTC), once.
    assert_eq!(fire_at("2027-03-15T07:00:00Z")["due_at"], "2027-03-15T06:30:00.000Z");
    // 2027-11-07: 01:30 happens twice (EDT, then EST); it fires once.
    let mut add = at(
        &env,
        offset("2027-11-06T12:00:00Z"),
        &["schedule", "add", "twice", "--preset", "quick", "--cron", "30 1 * * *", "work"],
    );
    ny(&mut add);
    assert!(add.output().unwrap().status.success());
    let fire_twice = |utc: &str| {
        let mut cmd = at(&env, offset(utc), &["schedule", "fire", "twice", "--json"]);
        ny(&mut cmd);
        serde_json::from_slice::<Value>(&cmd.output().unwrap().stdout).unwrap()
    };
    let next_twice = |utc: &str| {
        let mut cmd = at(&env, offset(utc), &["schedule", "show", "twice", "--json"]);
        ny(&mut cmd);
        let shown: Value = serde_json::from_slice(&cmd.output().unwrap().stdout).unwrap();
        shown["next_fire"].as_str().unwrap().to_string()
    };
    // Announced (and written in a timer) for when it fires: the first face.
    assert_eq!(next_twice("2027-11-06T12:00:00Z"), "2027-11-07T05:30:00.000Z");
    assert_eq!(fire_twice("2027-11-07T05:45:00Z")["due_at"], "2027-11-07T05:30:00.000Z");
    // Between the faces, the next fire is the next day's, not the second face.
    assert_eq!(next_twice("2027-11-07T05:45:00Z"), "2027-11-08T06:30:00.000Z");
    assert_eq!(fire_twice("2027-11-07T06:45:00Z"), Value::Null, "01:30 EST is the same slot's second face");
    assert!(all_runs_ended(&env));
}

#[test]
fn bad_schedules_are_refused_with_what_to_write() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let refused = |args: &[&str], says: &str| {
        let out = env.corral(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} said: {err}");
    };
    refused(&["schedule", "add", "x", "--preset", "quick", "--cron", "every day", "t"], "--cron '0 9 * * 1-5'");
    refused(&["schedule", "add", "x", "--preset", "quick", "--every", "soon", "t"], "--every 30m");
    refused(&["schedule", "add", "x", "--preset", "nope", "--every", "1h", "t"], "nope");
    refused(&["schedule", "add", "../x", "--preset", "quick", "--every", "1h", "t"], "cannot name a schedule");
    refused(&["schedule", "add", "x", "--preset", "quick", "t"], "--cron");
    refused(&["schedule", "add", "x", "--preset", "quick", "--every", "10000000y", "t"], "100 years");
    let odd = std::path::PathBuf::from(std::ffi::OsString::from_vec(b"folder-\xff".to_vec()));
    std::fs::create_dir_all(env.project.join(&odd)).unwrap();
    let odd_cwd = env.project.join(&odd);
    let mut add = env.command(&["schedule", "add", "x", "--preset", "quick", "--every", "1h", "--cwd"]);
    add.arg(&odd_cwd).arg("t");
    let out = add.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"), "{out:?}");
    // A day count past the end of time removes nothing, and fires on.
    env.ok(&["schedule", "add", "forever", "--preset", "quick", "--every", "1h", "--keep-days", "4000000000", "t"]);
    assert_eq!(json_at(&env, 3601, &["schedule", "fire", "forever"])["outcome"], "launched");
    assert!(all_runs_ended(&env));
    refused(&["schedule", "fire", "ghost"], "no schedule 'ghost'");
    env.ok(&["schedule", "add", "x", "--preset", "quick", "--every", "1h", "t"]);
    refused(&["schedule", "add", "x", "--preset", "quick", "--every", "1h", "t"], "exists already");
    assert_eq!(runs(&env).len(), 1, "only the fire of `forever`");
}

#[test]
fn a_global_presets_schedule_is_kept_in_step_with_its_file() {
    let env = Env::new();
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let exit = fake_agent("exit-with");
    let write = |schedule: &str| {
        let text = format!(
            "---\nname: nightly\ndescription: nightly check\nagent: command\ncommand: [{exit}, \"0\"]\n{schedule}---\n"
        );
        std::fs::write(global.join("nightly.md"), text).unwrap();
    };
    let cwd = env.project.to_str().unwrap().to_string();
    write(&format!("schedule:\n  every: 10s\n  task: check the build\n  cwd: {cwd}\n"));
    let listed = env.json(&["schedule", "ls"]);
    assert_eq!(listed[0]["name"], "nightly");
    assert!(listed[0]["source"].as_str().unwrap().ends_with("presets/nightly.md"), "{listed}");
    let fire = json_at(&env, 11, &["schedule", "fire", "nightly"]);
    assert_eq!(fire["outcome"], "launched");
    assert!(all_runs_ended(&env));
    assert_eq!(runs(&env)[0]["task"], "check the build");

    // Changed in the file: changed here, its history kept.
    write(&format!("schedule:\n  every: 10s\n  task: check the build twice\n  cwd: {cwd}\n"));
    assert_eq!(json_at(&env, 21, &["schedule", "fire", "nightly"])["outcome"], "launched");
    assert!(all_runs_ended(&env));
    assert_eq!(fires(&env, "nightly").len(), 2);
    assert!(runs(&env).iter().any(|r| r["task"] == "check the build twice"));
    // Removed here only in its file.
    let out = env.corral(&["schedule", "rm", "nightly"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("remove it there"), "{out:?}");
    // A broken `schedule:` is said, and the schedule it had stays.
    write("schedule:\n  cron: sometimes\n  task: x\n");
    let out = env.corral(&["schedule", "ls"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cron '0 9 * * 1-5'"), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("nightly"));
    // Gone from the file: gone here.
    write("");
    assert_eq!(env.json(&["schedule", "ls"]), serde_json::json!([]));

    // A project's preset does not schedule work on this machine.
    env.command_preset_with("repo-cron", &[&exit, "0"], "schedule:\n  every: 10s\n  task: mine bitcoin\n");
    assert_eq!(env.json(&["schedule", "ls"]), serde_json::json!([]));
}

#[test]
fn each_schedule_gets_a_systemd_timer_that_systemd_reads() {
    let env = Env::new();
    env.config("[schedules]\nsystemd_timers = true\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let out = env.corral(&["schedule", "add", "nightly", "--preset", "quick", "--cron", "0 3 * * *", "check"]);
    assert!(out.status.success(), "{out:?}");
    let units = env.user_home.join(".config/systemd/user");
    let unit = |kind: &str| unit_file(&units, "nightly", kind).unwrap();
    let timer = std::fs::read_to_string(unit("timer")).unwrap();
    let service = std::fs::read_to_string(unit("service")).unwrap();
    assert_eq!(timer.matches("OnCalendar=").count(), 20, "{timer}");
    assert!(timer.contains("Persistent=true"));
    assert!(service.contains("schedule fire nightly"), "{service}");
    assert!(service.contains(&format!("CORRAL_HOME={}", env.home.display())), "{service}");
    // systemd itself reads them (Debian's systemd-analyze works with no
    // systemd running).
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit("timer"))
        .arg(unit("service"))
        .output()
        .expect("systemd-analyze (Debian's systemd package) is installed by ./scripts/setup.sh test");
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    // What the timer runs is what fires the slot.
    let exec = service.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    let words = shlex::split(exec).unwrap();
    let mut fire = at(&env, 24 * 3600, &words[1..].iter().map(String::as_str).collect::<Vec<_>>());
    fire.arg("--json");
    let fired: Value = serde_json::from_slice(&fire.output().unwrap().stdout).unwrap();
    assert_eq!(fired["outcome"], "launched");
    // The fire wrote the timer's next slots from its own time.
    assert_eq!(ok_at(&env, 24 * 3600, &["schedule", "timers"]).trim(), "the timers are up to date");
    env.ok(&["schedule", "rm", "nightly"]);
    assert!(unit_file(&units, "nightly", "timer").is_none());
    assert!(all_runs_ended(&env));
}

/// The unit file of kind `kind` for schedule `escaped` (as systemd names
/// it) of whichever installation, if there is one.
fn unit_file(units: &std::path::Path, escaped: &str, kind: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(units).ok()?.flatten().map(|e| e.path()).find(|p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        name.starts_with("corral-schedule-") && name.ends_with(&format!("-{escaped}.{kind}"))
    })
}

/// A schedule's timer is a unit systemd takes whatever the preset's name
/// (`c++fix%h`: escaped, its `%` never a specifier), and two installations
/// (`CORRAL_HOME`) of one user keep each their own timers.
#[test]
fn timers_take_any_name_and_each_installation_keeps_its_own() {
    let first = Env::new();
    first.config("[schedules]\nsystemd_timers = true\n");
    let global = first.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let text = format!(
        "---\nname: c++fix%h\ndescription: t\nagent: command\ncommand: [{}, \"0\"]\nschedule:\n  every: 1h\n  task: t\n  cwd: {}\n---\n",
        fake_agent("exit-with"),
        first.project.display()
    );
    std::fs::write(global.join("c++fix%h.md"), text).unwrap();
    first.ok(&["schedule", "timers"]);
    let units = first.user_home.join(".config/systemd/user");
    let timer = unit_file(&units, "c\\x2b\\x2bfix\\x25h", "timer").expect("an escaped unit name");
    let service = unit_file(&units, "c\\x2b\\x2bfix\\x25h", "service").unwrap();
    let verify = Command::new("systemd-analyze").arg("verify").arg(&timer).arg(&service).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    let exec = std::fs::read_to_string(&service).unwrap();
    assert!(exec.contains("schedule fire \"c++fix%%h\""), "{exec}");
    // Another installation of the same user keeps its timers beside.
    let second = Env::new();
    second.config("[schedules]\nsystemd_timers = true\n");
    second.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let mut add = second.command(&["schedule", "add", "other", "--preset", "quick", "--every", "1h", "t"]);
    assert!(add.env("HOME", &first.user_home).output().unwrap().status.success());
    assert!(timer.exists(), "the second installation removed the first's timer");
    assert!(unit_file(&units, "other", "timer").is_some());
}

#[test]
fn keep_never_takes_a_worktree_holding_unmerged_work() {
    let env = Env::new();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&env.project)
            .args(["-c", "user.name=T", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(env.project.join("README"), "hello\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    env.command_preset_with("edit", &["sh", "-c", "echo work > result.txt"], "worktree: true\n");
    env.ok(&["schedule", "add", "nightly", "--preset", "edit", "--every", "10s", "--keep-last", "1", "work"]);
    let mut worktrees = Vec::new();
    for slot in 1..=2 {
        let fire = json_at(&env, slot * 10 + 1, &["schedule", "fire", "nightly"]);
        let id = fire["runs"][0]["id"].as_str().unwrap().to_string();
        let ended = env.wait_end(&id);
        worktrees.push(std::path::PathBuf::from(ended["worktree"]["path"].as_str().unwrap()));
    }
    // A third fire: of the finished runs, the first is beyond `keep: last
    // 1`; it goes, and its worktree holding unmerged work stays, work and all.
    let third = json_at(&env, 31, &["schedule", "fire", "nightly"]);
    assert!(all_runs_ended(&env));
    // Kept, and listed with the fire that pruned its run.
    let detail = third["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("holding unmerged work") && detail.contains(worktrees[0].to_str().unwrap()), "{third}");
    let shown = ok_at(&env, 31, &["schedule", "show", "nightly"]);
    assert!(shown.contains(worktrees[0].to_str().unwrap()), "{shown}");
    assert_eq!(runs(&env).len(), 2, "the last finished run and the new one");
    assert_eq!(std::fs::read_to_string(worktrees[0].join("result.txt")).unwrap(), "work\n");
    assert!(worktrees[1].exists());
}

#[test]
fn a_schedule_follows_the_time_zone_it_is_fired_in() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let now = chrono::Utc::now().timestamp();
    let offset = |utc: &str| chrono::DateTime::parse_from_rfc3339(utc).unwrap().timestamp() - now;
    let mut add = at(
        &env,
        offset("2027-06-01T00:00:00Z"),
        &["schedule", "add", "morning", "--preset", "quick", "--cron", "0 9 * * *", "work"],
    );
    add.env("TZ", "Europe/Berlin");
    assert!(add.output().unwrap().status.success());
    let fire_in = |tz: &str, utc: &str| {
        let mut cmd = at(&env, offset(utc), &["schedule", "fire", "morning", "--json"]);
        cmd.env("TZ", tz);
        serde_json::from_slice::<Value>(&cmd.output().unwrap().stdout).unwrap()
    };
    // 09:00 in Berlin (CEST) is 07:00 UTC.
    assert_eq!(fire_in("Europe/Berlin", "2027-06-01T07:30:00Z")["due_at"], "2027-06-01T07:00:00.000Z");
    assert!(all_runs_ended(&env));
    // The user moved to New York: 09:00 there (EDT) is 13:00 UTC.
    assert_eq!(fire_in("America/New_York", "2027-06-02T12:30:00Z"), Value::Null, "not yet 09:00 in New York");
    assert_eq!(fire_in("America/New_York", "2027-06-02T13:30:00Z")["due_at"], "2027-06-02T13:00:00.000Z");
    assert!(all_runs_ended(&env));
}

#[test]
fn an_idle_firer_takes_up_a_schedule_written_into_a_preset() {
    let env = Env::new();
    let mut firer = env.command(&["schedule", "run"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    // Nothing runs and nothing is scheduled: the firer looked and sleeps.
    let wchan = format!("/proc/{}/wchan", firer.id());
    let asleep = || std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("poll"));
    assert!(eventually(Duration::from_secs(10), asleep), "the firer never went to sleep");
    // Then a global preset gets `schedule:`, and nothing in the store moves.
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let text = format!(
        "---\nname: tick\ndescription: t\nagent: command\ncommand: [{}, \"0\"]\nschedule:\n  every: 1s\n  task: t\n  cwd: {}\n---\n",
        fake_agent("exit-with"),
        env.project.display()
    );
    std::fs::write(global.join("tick.md"), text).unwrap();
    let fired = eventually(Duration::from_secs(20), || {
        env.store()
            .fires("tick", 10)
            .is_ok_and(|f| f.iter().any(|f| f.firer == "schedule run" && f.outcome == "launched"))
    });
    let _ = firer.kill();
    let _ = firer.wait();
    assert!(fired, "the firer never took up the preset's schedule");
    assert!(all_runs_ended(&env));
}

#[test]
fn a_schedules_budget_per_day_covers_its_fires() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    env.ok(&["schedule", "add", "nightly", "--preset", "spend", "--every", "1h", "--budget-per-day", "$1", "spend"]);
    let fire = json_at(&env, 0, &["schedule", "run-now", "nightly"]);
    assert_eq!(fire["outcome"], "launched", "{fire:#}");
    let run = fire["runs"][0]["id"].as_str().unwrap().to_string();
    let paused = env.wait_run(&run, Duration::from_secs(30), |r| r["status"] == "paused");
    assert_eq!(paused["budget"]["usd"], 1.0, "the run gets what is left of the day: {paused:#}");
    env.ok(&["abort", &run]);
    env.wait_end(&run);
    let next = json_at(&env, 0, &["schedule", "run-now", "nightly"]);
    assert_eq!(next["outcome"], "skipped_budget", "{next:#}");
    let detail = next["detail"].as_str().unwrap();
    assert!(detail.contains("its budget of $1.00 a day is spent"), "{detail}");
    let out =
        env.corral(&["schedule", "add", "x", "--preset", "spend", "--every", "1h", "--budget-per-day", "lots", "t"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("budget `lots`"), "{out:?}");
}

#[test]
fn a_calendar_phrase_fires_on_the_days_it_names_and_says_how_it_was_read() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let now = chrono::Utc::now().timestamp();
    let offset = |utc: &str| chrono::DateTime::parse_from_rfc3339(utc).unwrap().timestamp() - now;
    let berlin = |mut cmd: Command| {
        cmd.env("TZ", "Europe/Berlin");
        cmd
    };
    // Friday 2027-01-08, 10:00 in Berlin (CET, UTC+1).
    let friday = offset("2027-01-08T09:00:00Z");
    let out = berlin(at(
        &env,
        friday,
        &["schedule", "add", "standup", "--preset", "quick", "--at", "weekdays 09:00", "work"],
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut ls = berlin(at(&env, friday, &["schedule", "ls", "--json"]));
    let listed: Value = serde_json::from_slice(&ls.output().unwrap().stdout).unwrap();
    let describe = listed[0]["describe"].as_str().unwrap();
    assert!(describe.starts_with("weekdays 09:00 ("), "{describe}");
    assert!(describe.contains("Friday") && !describe.contains("Saturday"), "read as weekdays only: {describe}");
    // Not on the weekend: Monday 09:00 CET is 08:00 UTC.
    assert_eq!(listed[0]["next_fire"], "2027-01-11T08:00:00.000Z", "{listed}");
    let fire_at = |utc: &str| {
        let mut cmd = berlin(at(&env, offset(utc), &["schedule", "fire", "standup", "--json"]));
        serde_json::from_slice::<Value>(&cmd.output().unwrap().stdout).unwrap()
    };
    assert_eq!(fire_at("2027-01-09T09:30:00Z"), Value::Null, "Saturday: nothing due");
    assert_eq!(fire_at("2027-01-10T23:00:00Z"), Value::Null, "Sunday: nothing due");
    assert_eq!(fire_at("2027-01-11T08:00:30Z")["due_at"], "2027-01-11T08:00:00.000Z");
    assert!(all_runs_ended(&env));

    // A period said as a phrase is a period.
    env.ok(&["schedule", "add", "often", "--preset", "quick", "--at", "every 2h", "work"]);
    assert_eq!(env.json(&["schedule", "show", "often"])["describe"], "every 2h");

    // What is not understood is refused, naming the word; nothing is added.
    let out = env.corral(&["schedule", "add", "x", "--preset", "quick", "--at", "every other tuesday 9am", "t"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("'other' is not understood") && said.contains("--at 'weekdays 09:00'"), "{said}");
    let out =
        env.corral(&["schedule", "add", "x", "--preset", "quick", "--at", "daily 9am", "--cron", "0 9 * * *", "t"]);
    assert_eq!(out.status.code(), Some(2), "two whens at once: {out:?}");
    assert!(env.json(&["schedule", "ls"]).as_array().unwrap().iter().all(|s| s["name"] != "x"));

    // A global preset's `schedule:` takes `at:` too.
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let exit = fake_agent("exit-with");
    let cwd = env.project.to_str().unwrap();
    std::fs::write(
        global.join("triage.md"),
        format!(
            "---\nname: triage\ndescription: morning triage\nagent: command\ncommand: [{exit}, \"0\"]\nschedule:\n  at: mon,wed,fri 7:30am\n  task: triage\n  cwd: {cwd}\n---\n"
        ),
    )
    .unwrap();
    let shown = env.json(&["schedule", "show", "triage"]);
    assert!(shown["describe"].as_str().unwrap().starts_with("mon,wed,fri 7:30am (At 07:30"), "{shown}");
}

#[test]
fn a_fire_whose_firer_died_is_shown_ended_not_running() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    // The precheck holds the fire long enough for its firer to be killed;
    // its odd length finds its process among the machine's. Its shell dies
    // with the firer; the `sleep` it started would live on.
    env.ok(&[
        "schedule",
        "add",
        "slow",
        "--preset",
        "quick",
        "--every",
        "1h",
        "--precheck",
        "sh -c 'sleep 31.77; true'",
        "work",
    ]);
    let mut firer = at(&env, 3601, &["schedule", "fire", "slow"]).spawn().unwrap();
    let precheck = || {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if cmdline == b"sleep\x0031.77\x00" {
                found.push(entry.file_name().to_string_lossy().parse::<i32>().unwrap());
            }
        }
        found.into_iter().filter(|pid| common::alive(*pid)).collect::<Vec<_>>()
    };
    assert!(
        eventually(Duration::from_secs(10), || fires(&env, "slow").first().is_some_and(|f| f["outcome"] == "firing")
            && !precheck().is_empty()),
        "the fire is carried out: {:?}",
        fires(&env, "slow")
    );
    firer.kill().unwrap();
    firer.wait().unwrap();
    let fire = fires(&env, "slow")[0].clone();
    assert_eq!(fire["outcome"], "failed", "{fire}");
    let detail = fire["detail"].as_str().unwrap();
    assert!(detail.contains("its firer (fire, pid") && detail.contains("nothing was launched"), "{detail}");
    assert_eq!(outcomes(&env, "slow"), ["failed"]);
    assert!(runs(&env).is_empty());
    // The precheck the dead firer left is stopped with its fire.
    assert!(eventually(Duration::from_secs(10), || precheck().is_empty()), "still running: {:?}", precheck());
}

#[test]
fn a_firer_killed_the_moment_its_run_exists_leaves_that_run_in_its_fire() {
    let env = Env::new();
    env.config("max_parallel = 50\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "tick", "--preset", "quick", "--every", "100s", "--overlap", "allow", "tick"]);
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    let count = || db.query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0)).unwrap_or(-1);
    // Each firer is killed as soon as the run it launches can be seen: the
    // run and the fire it belongs to are one record, or a killed firer
    // leaves a run no fire owns (found by three `schedule run`s killed at
    // the end of a test: 5 runs, 4 in fires).
    for slot in 1..=10 {
        let mut firer = at(&env, slot * 100 + 1, &["schedule", "fire", "tick"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while count() < slot && std::time::Instant::now() < deadline {}
        firer.kill().unwrap();
        firer.wait().unwrap();
    }
    assert!(all_runs_ended(&env));
    let fired = fires(&env, "tick");
    let launched: usize = fired.iter().map(|f| f["runs"].as_array().unwrap().len()).sum();
    assert_eq!(runs(&env).len(), 10, "{fired:?}");
    assert_eq!(launched, 10, "every run is in the fire that launched it: {fired:?}");
    assert!(fired.iter().all(|f| f["outcome"] == "launched"), "{fired:?}");
}

/// A refused `schedule add` (the name is taken) changes nothing of the
/// schedule that has it: its runs keep the environment they were given.
#[test]
fn a_refused_add_leaves_the_existing_schedules_environment() {
    let env = Env::new();
    env.command_preset("quick", &["sh", "-c", "echo key=$SCHEDULE_KEY"]);
    let mut first = env.command(&["schedule", "add", "nightly", "--preset", "quick", "--every", "1h", "work"]);
    first.env("SCHEDULE_KEY", "the-first");
    assert!(first.output().unwrap().status.success());
    let mut second = env.command(&["schedule", "add", "nightly", "--preset", "quick", "--every", "1h", "other"]);
    second.env("SCHEDULE_KEY", "the-second").env("PATH", "/nowhere");
    let out = second.output().unwrap();
    assert!(!out.status.success(), "a second schedule of the same name was added");
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists already"), "{out:?}");
    let fire = json_at(&env, 0, &["schedule", "run-now", "nightly"]);
    let run = env.wait_end(fire["runs"][0]["id"].as_str().unwrap());
    assert_eq!(run["final_text"], "key=the-first", "{run:#}");
}

/// Settings that can never work are refused when the schedule is added,
/// with what to write instead, and nothing is added.
#[test]
fn settings_that_can_never_work_are_refused() {
    let env = Env::new();
    env.command_preset("quick", &["true"]);
    let refused = |args: &[&str], said: &str| {
        let mut all = vec!["schedule", "add", "never", "--preset", "quick"];
        all.extend(args);
        all.push("work");
        let out = env.corral(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(said), "{args:?}: {err}");
    };
    refused(&["--cron", "0 0 31 2 *"], "never fire");
    refused(&["--every", "1500ms"], "whole seconds");
    refused(&["--every", "1h", "--max-runs-per-fire", "0"], "--max-runs-per-fire 0");
    refused(&["--every", "1h", "--max-runs-per-hour", "0"], "--max-runs-per-hour 0");
    refused(&["--every", "1h", "--cwd", "/no/such/folder"], "no such folder");
    assert!(env.json(&["schedule", "ls"]).as_array().unwrap().is_empty());
}

/// `pause_after_failures`: the fire that makes the failures reach the
/// bound pauses the schedule at once; resumed, it counts its failures
/// afresh, and is not paused again for the old ones.
#[test]
fn a_schedule_paused_after_failures_pauses_at_once_and_resumes_afresh() {
    let env = Env::new();
    env.command_preset("broken", &["/no/such/program"]);
    env.ok(&["schedule", "add", "flaky", "--preset", "broken", "--every", "1h", "--pause-after-failures", "2", "t"]);
    let paused = |env: &Env| {
        let all = env.json(&["schedule", "ls"]);
        !all[0]["paused_at"].is_null()
    };
    assert_eq!(json_at(&env, 0, &["schedule", "run-now", "flaky"])["outcome"], "failed");
    assert!(!paused(&env), "one failure of two");
    assert_eq!(json_at(&env, 0, &["schedule", "run-now", "flaky"])["outcome"], "failed");
    assert!(paused(&env), "the second failure pauses it at once");
    env.ok(&["schedule", "resume", "flaky"]);
    assert_eq!(json_at(&env, 0, &["schedule", "run-now", "flaky"])["outcome"], "failed");
    assert!(!paused(&env), "resumed, the old failures no longer count");
}

/// Runs launched by a schedule that then fail: the end that makes the
/// failures reach `pause_after_failures` pauses the schedule then, not at
/// its next slot ("✗✗ active" until then was a state shown untrue).
#[test]
fn a_schedule_whose_runs_fail_pauses_when_the_last_of_them_ends() {
    let env = Env::new();
    env.command_preset("failing", &[&fake_agent("exit-with"), "1"]);
    env.ok(&["schedule", "add", "flaky", "--preset", "failing", "--every", "1h", "--pause-after-failures", "2", "t"]);
    let paused = |env: &Env| env.json(&["schedule", "ls"])[0]["paused_at"].is_string();
    for _ in 0..2 {
        assert_eq!(json_at(&env, 0, &["schedule", "run-now", "flaky"])["outcome"], "launched");
        assert!(all_runs_ended(&env));
    }
    assert!(eventually(Duration::from_secs(10), || paused(&env)), "two failed runs pause it before its next slot");
    let listed = env.ok(&["schedule", "ls"]);
    let line = listed.lines().find(|l| l.starts_with("flaky")).unwrap();
    assert!(line.contains("paused (its last 2 fires failed") && !line.contains("active"), "{listed}");
}

/// A typo in a global preset's `schedule:` (or a YAML slip) keeps the
/// schedule it had, with its fires; fixed, it goes on where it was.
#[test]
fn a_preset_that_cannot_be_read_keeps_its_schedule_and_history() {
    let env = Env::new();
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let file = global.join("tick.md");
    let text = format!(
        "---\nname: tick\ndescription: t\nagent: command\ncommand: [{}, \"0\"]\nschedule:\n  every: 1h\n  task: t\n  cwd: {}\n---\n",
        fake_agent("exit-with"),
        env.project.display()
    );
    std::fs::write(&file, &text).unwrap();
    let fire = json_at(&env, 0, &["schedule", "run-now", "tick"]);
    assert_eq!(fire["outcome"], "launched", "{fire:#}");
    for broken in [text.replace("  every: 1h", "  every: 1h\n  evry: 2h"), text.replace("task: t", "task: [t")] {
        std::fs::write(&file, broken).unwrap();
        let out = env.corral(&["schedule", "ls"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("tick"), "the schedule was dropped: {out:?}");
        assert_eq!(fires(&env, "tick").len(), 1, "its history was dropped");
    }
    std::fs::write(&file, &text).unwrap();
    env.ok(&["schedule", "ls"]);
    assert_eq!(fires(&env, "tick").len(), 1, "fixed, it has the fires it had");
}

/// A global preset's `schedule:` launches that preset: a same-named preset
/// of the repository its runs work in (trusted or not) does not replace it.
#[test]
fn a_presets_schedule_runs_the_global_preset_not_the_repositorys() {
    let env = Env::new();
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    let text = format!(
        "---\nname: tick\ndescription: t\nagent: command\ncommand: [sh, -c, 'echo global']\nschedule:\n  every: 1h\n  task: t\n  cwd: {}\n---\n",
        env.project.display()
    );
    std::fs::write(global.join("tick.md"), text).unwrap();
    // The repository's own `tick`, trusted: still not the schedule's.
    env.command_preset_with("tick", &["sh", "-c", "echo the repository's"], "sandbox: none\n");
    let fire = json_at(&env, 0, &["schedule", "run-now", "tick"]);
    let run = env.wait_end(fire["runs"][0]["id"].as_str().unwrap());
    assert_eq!(run["final_text"], "global", "{run:#}");
}

/// A precheck's output past its 64 KiB bound: the line cut there is no
/// item; and what it printed reaches the terminal as text, never as an
/// escape sequence (a screen clear, a clipboard write).
#[test]
fn a_prechecks_cut_line_is_no_item_and_its_words_are_shown_not_sent() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    // A whole line, then one longer than what is kept: cut, it is no item.
    let list = env.project.join("many.txt");
    std::fs::write(&list, format!("first\n{}\n", "a".repeat(70 << 10))).unwrap();
    let precheck = format!("cat {}", list.display());
    let args =
        ["schedule", "add", "many", "--preset", "quick", "--every", "1h", "--precheck", &precheck, "--each", "{item}"];
    env.ok(&args);
    let fire = json_at(&env, 0, &["schedule", "run-now", "many"]);
    assert_eq!(fire["runs"].as_array().unwrap().len(), 1, "{fire:#}");
    let items = env.store().schedule_items("many").unwrap();
    assert_eq!(items.into_iter().collect::<Vec<_>>(), vec!["first".to_string()], "a cut line was taken as an item");
    // A precheck that refuses with an escape sequence in its words.
    let noisy = "printf '\\033[2J\\033]52;c;aGk=\\007nothing to do'; exit 3";
    env.ok(&[
        "schedule",
        "add",
        "noisy",
        "--preset",
        "quick",
        "--every",
        "1h",
        "--precheck",
        &format!("sh -c \"{noisy}\""),
        "t",
    ]);
    json_at(&env, 0, &["schedule", "run-now", "noisy"]);
    let shown = env.ok(&["schedule", "show", "noisy"]);
    assert!(shown.contains("nothing to do") && !shown.contains('\x1b'), "{shown:?}");
    // A precheck that refuses after printing 190 KiB (more than is read
    // for items): its last words are said, not screenfuls of all it
    // printed, nor the end of what was read for items.
    let chatter = env.project.join("chatter.txt");
    std::fs::write(&chatter, "checking something\n".repeat(10_000)).unwrap();
    let refusing = format!("sh -c \"cat {}; echo out of disk; exit 1\"", chatter.display());
    env.ok(&["schedule", "add", "loud", "--preset", "quick", "--every", "1h", "--precheck", &refusing, "t"]);
    let said = ok_at(&env, 0, &["schedule", "run-now", "loud"]);
    assert!(
        said.len() < 4096 && said.contains("out of disk"),
        "{} bytes: {}",
        said.len(),
        &said[..said.len().min(300)]
    );
    assert!(said.contains("not kept"), "{}", &said[..said.len().min(300)]);
}

/// `--budget-per-day` is shared by a fire's runs (one per item), and what
/// the schedule's runs still going may spend is theirs: three runs never
/// get the whole day each.
#[test]
fn a_days_budget_is_shared_by_a_fires_runs() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let args = ["schedule", "add", "fanout", "--preset", "spend", "--every", "1h", "--budget-per-day", "$1"];
    let mut all = args.to_vec();
    all.extend(["--precheck", "printf 'a\\nb\\nc\\n'", "--each", "--overlap", "allow", "work {item}"]);
    env.ok(&all);
    let fire = json_at(&env, 0, &["schedule", "run-now", "fanout"]);
    let runs: Vec<String> =
        fire["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(runs.len(), 3, "{fire:#}");
    let given: f64 = runs.iter().map(|id| env.show(id)["budget"]["usd"].as_f64().unwrap_or(f64::MAX)).sum();
    assert!(given <= 1.0 + 1e-9, "the runs of one fire were given ${given:.2} of a $1 day");
    // A second fire while they hold the day: nothing is left to give.
    let next = json_at(&env, 0, &["schedule", "run-now", "fanout"]);
    assert_eq!(next["outcome"], "skipped_budget", "{next:#}");
    for id in &runs {
        env.ok(&["abort", id]);
    }
}

/// A precheck that says it started (a file of its own in `dir`), waits for
/// `dir/go`, then prints `lines`.
fn gated_precheck(dir: &std::path::Path, lines: &str) -> String {
    format!(
        "sh -c 'd={}; touch \"$d/started.$$\"; while [ ! -e \"$d/go\" ]; do sleep 0.02; done; printf \"{lines}\"'",
        dir.display()
    )
}

/// `cmd` started, its output read when it is waited for.
fn spawned(mut cmd: Command) -> std::process::Child {
    cmd.stdout(std::process::Stdio::piped()).spawn().unwrap()
}

fn started(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("started."))
        .count()
}

#[test]
fn two_fires_at_once_launch_as_the_overlap_and_items_say() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let gate = env.project.join("gate");
    std::fs::create_dir(&gate).unwrap();

    // `overlap: skip`: a fire in its precheck counts as running.
    let precheck = gated_precheck(&gate, "ok\\n");
    env.ok(&["schedule", "add", "guard", "--preset", "slow", "--every", "1h", "--precheck", &precheck, "work"]);
    let first = spawned(at(&env, 0, &["schedule", "run-now", "guard", "--json"]));
    assert!(eventually(Duration::from_secs(10), || started(&gate) == 1), "the first fire's precheck runs");
    let mut second = spawned(at(&env, 0, &["schedule", "run-now", "guard", "--json"]));
    // The second decides at once; before, it ran its own precheck beside
    // the first and waited in it.
    let decided = eventually(Duration::from_secs(10), || second.try_wait().unwrap().is_some());
    std::fs::write(gate.join("go"), "").unwrap();
    let outcomes: Vec<String> = [first, second]
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let fire: Value = serde_json::from_slice(&out.stdout).unwrap();
            fire["outcome"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(decided, "the second fire ran its precheck while the first was in its own");
    assert_eq!(outcomes, ["launched", "skipped_overlap"]);
    assert_eq!(runs(&env).len(), 1, "two fires at once under `overlap: skip`");

    // `overlap: allow` with `each`: two fires listing the same items at
    // once work on each item once.
    std::fs::remove_file(gate.join("go")).unwrap();
    for entry in std::fs::read_dir(&gate).unwrap().flatten() {
        std::fs::remove_file(entry.path()).unwrap();
    }
    let precheck = gated_precheck(&gate, "a\\nb\\nc\\n");
    let args = ["schedule", "add", "triage", "--preset", "slow", "--every", "1h", "--overlap", "allow"];
    let mut all = args.to_vec();
    all.extend(["--precheck", &precheck, "--each", "issue {item}"]);
    env.ok(&all);
    let fires: Vec<_> = (0..2).map(|_| spawned(at(&env, 0, &["schedule", "run-now", "triage", "--json"]))).collect();
    assert!(eventually(Duration::from_secs(10), || started(&gate) == 2), "both prechecks run");
    std::fs::write(gate.join("go"), "").unwrap();
    for child in fires {
        assert!(child.wait_with_output().unwrap().status.success());
    }
    let mut tasks: Vec<String> = runs(&env)
        .iter()
        .map(|r| r["task"].as_str().unwrap().to_string())
        .filter(|t| t.starts_with("issue "))
        .collect();
    tasks.sort();
    assert_eq!(tasks, ["issue a", "issue b", "issue c"], "each item once");
    std::fs::write(&release, "").unwrap();
    assert!(all_runs_ended(&env));
}

/// Fires at once under `overlap: allow` share the schedule's bounds: the
/// hour's runs (`max_runs_per_hour`) and the day's budget are taken in one
/// write, never both given the same room.
#[test]
fn fires_at_once_share_the_hours_runs_and_the_days_budget() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let gate = env.project.join("gate");
    std::fs::create_dir(&gate).unwrap();
    let both_at_once = |name: &str, prechecks: usize| -> Vec<Value> {
        let fires: Vec<_> = (0..2).map(|_| spawned(at(&env, 0, &["schedule", "run-now", name, "--json"]))).collect();
        assert!(eventually(Duration::from_secs(10), || started(&gate) == prechecks), "both prechecks run");
        std::fs::write(gate.join("go"), "").unwrap();
        fires
            .into_iter()
            .map(|child| {
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{out:?}");
                serde_json::from_slice(&out.stdout).unwrap()
            })
            .collect()
    };

    // Six items, three runs an hour: two fires at once launch three.
    let precheck = gated_precheck(&gate, "a\\nb\\nc\\nd\\ne\\nf\\n");
    let args = ["schedule", "add", "hourly", "--preset", "slow", "--every", "1h", "--overlap", "allow"];
    let mut all = args.to_vec();
    all.extend(["--precheck", &precheck, "--each", "--max-runs-per-hour", "3", "issue {item}"]);
    env.ok(&all);
    let fired = both_at_once("hourly", 2);
    let launched: usize = fired.iter().map(|f| f["runs"].as_array().map_or(0, Vec::len)).sum();
    assert_eq!(launched, 3, "two fires at once under max_runs_per_hour 3: {fired:#?}");
    assert_eq!(runs(&env).len(), 3);

    // One run a fire, $1 a day: two fires at once never give $2.
    std::fs::remove_file(gate.join("go")).unwrap();
    let precheck = gated_precheck(&gate, "ok\\n");
    let args = ["schedule", "add", "daily", "--preset", "slow", "--every", "1h", "--overlap", "allow"];
    let mut all = args.to_vec();
    all.extend(["--precheck", &precheck, "--budget-per-day", "$1", "work"]);
    env.ok(&all);
    let fired = both_at_once("daily", 4);
    let given: f64 = fired
        .iter()
        .flat_map(|f| f["runs"].as_array().cloned().unwrap_or_default())
        .map(|r| env.show(r["id"].as_str().unwrap())["budget"]["usd"].as_f64().unwrap_or(f64::MAX))
        .sum();
    assert!(given <= 1.0 + 1e-9, "two fires at once gave ${given:.2} of a $1 day: {fired:#?}");
    let outcomes: Vec<&str> = fired.iter().map(|f| f["outcome"].as_str().unwrap()).collect();
    assert!(outcomes.contains(&"skipped_budget"), "{outcomes:?}");
    std::fs::write(&release, "").unwrap();
    assert!(all_runs_ended(&env));
}

#[test]
fn a_queued_fire_goes_when_its_turn_comes_with_no_firer_running() {
    let env = Env::new();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.ok(&["schedule", "add", "queuer", "--preset", "slow", "--every", "10s", "--overlap", "queue", "work"]);
    assert_eq!(json_at(&env, 11, &["schedule", "fire", "queuer"])["outcome"], "launched");
    assert_eq!(json_at(&env, 21, &["schedule", "fire", "queuer"])["outcome"], "queued");
    // Only timers fire here: the run's end is what lets the queued fire go.
    std::fs::write(&release, "").unwrap();
    let went = eventually(Duration::from_secs(20), || outcomes(&env, "queuer") == ["launched", "launched"]);
    assert!(went, "{:?}", outcomes(&env, "queuer"));
    assert!(eventually(Duration::from_secs(20), || runs(&env).len() == 2));
    assert!(all_runs_ended(&env));
}

/// A queued fire goes when what it waited for ended without its shepherd's
/// last word: the shepherd was killed (the run found lost), or the run was
/// aborted while still queued for a slot. Only timers fire here.
#[test]
fn a_queued_fire_goes_when_its_blocker_is_lost_or_aborted_before_it_started() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.ok(&["schedule", "add", "queuer", "--preset", "slow", "--every", "1h", "--overlap", "queue", "work"]);
    let launched = json_at(&env, 3601, &["schedule", "fire", "queuer"]);
    assert_eq!(launched["outcome"], "launched");
    assert_eq!(json_at(&env, 7201, &["schedule", "fire", "queuer"])["outcome"], "queued");
    let first = launched["runs"][0]["id"].as_str().unwrap().to_string();
    let shepherd = eventually(Duration::from_secs(10), || env.show(&first)["shepherd_pid"].is_i64());
    assert!(shepherd, "no shepherd");
    let pid = env.show(&first)["shepherd_pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    let went = eventually(Duration::from_secs(20), || outcomes(&env, "queuer") == ["launched", "launched"]);
    assert!(went, "the queued fire stayed behind a lost run: {:?}", outcomes(&env, "queuer"));
    assert_eq!(env.show(&first)["status"], "lost");

    // A fire whose run waits for the one slot; a fire queued behind it.
    let second = fires(&env, "queuer")[0]["runs"][0]["id"].as_str().unwrap().to_string();
    env.ok(&["abort", &second]);
    let hog = env.ok(&["launch", "slow", "hold the slot"]).trim().to_string();
    assert!(eventually(Duration::from_secs(20), || env.show(&hog)["status"] == "running"));
    let third = json_at(&env, 10801, &["schedule", "fire", "queuer"]);
    assert_eq!(third["outcome"], "launched");
    let third = third["runs"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(env.show(&third)["status"], "queued");
    assert_eq!(json_at(&env, 14401, &["schedule", "fire", "queuer"])["outcome"], "queued");
    env.ok(&["abort", &third]);
    let went = eventually(Duration::from_secs(20), || fires(&env, "queuer")[0]["outcome"] == "launched");
    assert!(went, "the queued fire stayed behind an aborted queued run: {:?}", outcomes(&env, "queuer"));
    std::fs::write(&release, "").unwrap();
    assert!(all_runs_ended(&env));
}

/// A `run-now` of a paused schedule queued behind the one before it goes
/// as the user asked when its turn comes, paused or not.
#[test]
fn a_queued_run_now_of_a_paused_schedule_goes_when_its_turn_comes() {
    let env = Env::new();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.ok(&["schedule", "add", "queuer", "--preset", "slow", "--every", "1h", "--overlap", "queue", "work"]);
    env.ok(&["schedule", "pause", "queuer"]);
    assert_eq!(json_at(&env, 0, &["schedule", "run-now", "queuer"])["outcome"], "launched");
    assert_eq!(json_at(&env, 0, &["schedule", "run-now", "queuer"])["outcome"], "queued");
    std::fs::write(&release, "").unwrap();
    let went = eventually(Duration::from_secs(20), || outcomes(&env, "queuer") == ["launched", "launched"]);
    assert!(went, "{:?}", outcomes(&env, "queuer"));
    assert!(all_runs_ended(&env));
}

/// A fire queued for hours counts in the hour its runs start in, not the
/// hour it was queued in: `max_runs_per_hour` holds across it.
#[test]
fn a_queued_fires_runs_count_in_the_hour_they_start() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let args = ["schedule", "add", "hourly", "--preset", "slow", "--every", "1h", "--overlap", "queue"];
    let mut all = args.to_vec();
    all.extend(["--max-runs-per-hour", "2", "work"]);
    env.ok(&all);
    // Five hours on, a run; a fire queued behind it from hours before.
    assert_eq!(json_at(&env, 5 * 3600, &["schedule", "run-now", "hourly"])["outcome"], "launched");
    assert_eq!(json_at(&env, 3601, &["schedule", "run-now", "hourly"])["outcome"], "queued");
    std::fs::write(&release, "").unwrap();
    assert!(eventually(Duration::from_secs(20), || runs(&env).len() == 2), "the queued fire goes");
    assert!(all_runs_ended(&env));
    // Two runs started this hour: a third is one too many.
    let third = json_at(&env, 5 * 3600 + 1, &["schedule", "run-now", "hourly"]);
    assert_eq!(third["outcome"], "skipped_limit", "{third:#}");
}

/// The processes whose command line is `sleep SECS`, alive.
fn sleeping(secs: &str) -> Vec<i32> {
    let want = format!("sleep\0{secs}\0").into_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default() == want)
        .filter(|pid| common::alive(*pid))
        .collect()
}

/// Without a cgroup (a user who has none: here the firer runs where no
/// cgroup hierarchy is mounted), a precheck that leaves a detached process
/// holding its output, or that outlives its timeout, still ends its fire
/// in time and leaves nothing: before, the fire waited for the detached
/// process, and every other schedule of that firer with it.
#[test]
fn a_prechecks_detached_processes_neither_hold_its_fire_nor_outlive_it() {
    let env = Env::new();
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    let without_cgroups = |cmd: Command| -> Command {
        let mut wrapped = Command::new("bwrap");
        wrapped.args(["--dev-bind", "/", "/", "--tmpfs", "/sys/fs/cgroup", "--"]).arg(cmd.get_program());
        wrapped.args(cmd.get_args()).current_dir(cmd.get_current_dir().unwrap_or(&env.project));
        for (key, value) in cmd.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        wrapped
    };
    let cases = [
        ("left", "sh -c 'setsid sleep 301.37 & echo work'", "301.37", "launched"),
        ("late", "sh -c 'setsid sleep 302.41 & sleep 300'", "302.41", "skipped_precheck"),
    ];
    for (name, precheck, marker, outcome) in cases {
        let args = ["schedule", "add", name, "--preset", "quick", "--every", "1h", "--precheck", precheck];
        let mut all = args.to_vec();
        all.extend(["--precheck-timeout", "2s", "work"]);
        env.ok(&all);
        let mut fire = spawned(without_cgroups(at(&env, 0, &["schedule", "run-now", name, "--json"])));
        let ended = eventually(Duration::from_secs(20), || fire.try_wait().unwrap().is_some());
        if !ended {
            let _ = fire.kill();
        }
        assert!(ended, "{name}: the fire waited on a process its precheck left");
        let out = fire.wait_with_output().unwrap();
        let fired: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(fired["outcome"], outcome, "{name}: {fired:#}");
        assert!(eventually(Duration::from_secs(10), || sleeping(marker).is_empty()), "{name}: left running");
    }
    assert!(all_runs_ended(&env));
}

/// A fire taken while the clock read two days ahead records a slot in the
/// future; once the clock is right again, the real slots before it still
/// fire (they are not "nothing due").
#[test]
fn a_fire_taken_with_the_clock_ahead_does_not_silence_the_real_slots() {
    let env = Env::new();
    env.config("");
    env.command_preset("quick", &[&fake_agent("exit-with"), "0"]);
    env.ok(&["schedule", "add", "hourly", "--preset", "quick", "--every", "1h", "go"]);
    // The clock two days ahead: a fire of that slot.
    let ahead = json_at(&env, 2 * 86_400 + 5, &["schedule", "fire", "hourly"]);
    assert_eq!(ahead["outcome"], "launched", "{ahead:#}");
    assert!(eventually(Duration::from_secs(20), || all_runs_ended(&env)));
    // Set right: the first real slot, an hour on, fires.
    let real = json_at(&env, 3_600 + 5, &["schedule", "fire", "hourly"]);
    assert_eq!(real["outcome"], "launched", "a real slot was taken for done: {real:#}");
    assert!(all_runs_ended(&env));
}
