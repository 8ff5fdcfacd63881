//! Nothing escapes its run: one regression test per escape a hostile
//! reading reproduced, each named after it, run both with the run's cgroup
//! and with the process-tree fallback (`cgroups = false`) where the
//! fallback can hold it; then what the cgroup adds: limits, resource use.
//!
//! A test that needs a cgroup this machine cannot give says so in its
//! output and returns: it never passes silently.

mod common;

use std::path::Path;
use std::time::Duration;

use common::signal_pid;
use common::{alive, eventually, fake_agent, Env};
use corral::process::Sig;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// Both ways a run's processes are held, as `config.toml` lines.
const MODES: [(&str, &str); 2] = [("cgroup", ""), ("process tree", "cgroups = false\n")];

/// Why this machine cannot give runs a cgroup, printed; `None` if it can.
fn no_cgroup_here() -> Option<String> {
    let why = corral::process::cgroup::unavailable()?;
    println!("SKIPPED (cannot run here): no cgroup for a run on this machine: {why}");
    Some(why)
}

fn pid_in(file: &Path) -> i32 {
    assert!(eventually(LIMIT, || std::fs::read_to_string(file).is_ok_and(|t| t.trim().parse::<i32>().is_ok())));
    std::fs::read_to_string(file).unwrap().trim().parse().unwrap()
}

fn gone(pid: i32) -> bool {
    let dead = eventually(Duration::from_secs(5), || !alive(pid));
    if !dead {
        let _ = signal_pid(pid, Sig::Kill);
    }
    dead
}

fn kill_shepherd(run: &Value) {
    let pid = run["shepherd_pid"].as_i64().expect("a shepherd") as i32;
    signal_pid(pid, Sig::Kill).unwrap();
}

fn mode_env(config: &str) -> Env {
    let env = Env::new();
    env.config(config);
    env
}

#[test]
fn what_setup_starts_in_the_background_dies_when_setup_fails() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let pidfile = env.project.join("bg.pid");
        let setup = format!("sleep 300 & echo $! > '{}'; exit 3", pidfile.display());
        env.command_preset_with(
            "p",
            &["true"],
            &format!("setup: [sh, -c, {}]\n", serde_json::to_string(&setup).unwrap()),
        );
        let id = env.launch("p", "x");
        let run = env.wait_end(&id);
        assert_eq!(run["stop_reason"], "setup_failed", "{mode}: {run:#}");
        assert!(gone(pid_in(&pidfile)), "{mode}: setup's background sleep outlived the run");
    }
}

#[test]
fn what_setup_starts_in_the_background_dies_when_the_agent_binary_is_missing() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let pidfile = env.project.join("bg.pid");
        // The agent is there at launch; setup removes it.
        let agent = env.project.join("agent");
        std::fs::copy("/bin/true", &agent).unwrap();
        let setup = format!("sleep 300 & echo $! > '{}'; rm '{}'", pidfile.display(), agent.display());
        let extra = format!("setup: [sh, -c, {}]\n", serde_json::to_string(&setup).unwrap());
        env.command_preset_with("p", &[agent.to_str().unwrap()], &extra);
        let id = env.launch("p", "x");
        let run = env.wait_end(&id);
        assert_eq!(run["stop_reason"], "spawn_failed", "{mode}: {run:#}");
        assert!(gone(pid_in(&pidfile)), "{mode}: setup's background sleep outlived the run");
    }
}

#[test]
fn what_setup_starts_in_the_background_dies_when_the_run_is_aborted_during_setup() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let pidfile = env.project.join("bg.pid");
        let setup = format!("sleep 300 & echo $! > '{}'; sleep 300", pidfile.display());
        env.command_preset_with(
            "p",
            &["true"],
            &format!("setup: [sh, -c, {}]\n", serde_json::to_string(&setup).unwrap()),
        );
        let id = env.launch("p", "x");
        let bg = pid_in(&pidfile);
        env.ok(&["abort", &id]);
        let run = env.wait_end(&id);
        assert_eq!(run["status"], "aborted", "{mode}: {run:#}");
        assert!(gone(bg), "{mode}: setup's background sleep outlived the aborted run");
    }
}

#[test]
fn a_child_in_the_agents_group_with_a_clean_environment_dies_with_a_killed_shepherd() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let pidfile = env.project.join("bg.pid");
        let script = format!("env -i sleep 333 & echo $! > '{}'; sleep 300", pidfile.display());
        env.command_preset("p", &["sh", "-c", &script]);
        let id = env.launch("p", "x");
        let bg = pid_in(&pidfile);
        let run = env.wait_run(&id, LIMIT, |r| r["status"] == "running");
        kill_shepherd(&run);
        let run = env.wait_run(&id, LIMIT, |r| r["status"] == "lost");
        assert_eq!(run["stop_reason"], "shepherd_died");
        assert!(gone(bg), "{mode}: a sleep in the agent's group without CORRAL_RUN_ID outlived its lost run");
    }
}

#[test]
fn a_setsid_process_without_the_runs_environment_dies_with_a_killed_shepherd() {
    // Neither the agent's group nor the run's id: only the kernel's list of
    // the run's processes finds it, so this needs the cgroup.
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    let pidfile = env.project.join("bg.pid");
    let inner = format!("sleep 333 & echo $! > '{}'", pidfile.display());
    let script = format!("env -i setsid sh -c {}; sleep 300", shell_quote(&inner));
    env.command_preset("p", &["sh", "-c", &script]);
    let id = env.launch("p", "x");
    let bg = pid_in(&pidfile);
    let run = env.wait_run(&id, LIMIT, |r| r["status"] == "running");
    assert!(run["containment"]["cgroup"].is_string(), "{run:#}");
    kill_shepherd(&run);
    env.wait_run(&id, LIMIT, |r| r["status"] == "lost");
    assert!(gone(bg), "the setsid sleep outlived its lost run");
    let dir = run["containment"]["cgroup"].as_str().unwrap();
    assert!(eventually(Duration::from_secs(5), || !Path::new(dir).exists()), "the lost run's cgroup {dir} is left");
}

#[test]
fn a_process_that_keeps_forking_into_new_sessions_is_stopped_and_the_run_ends_only_then() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let log = env.project.join("generations");
        // With a cgroup, generations come as fast as the machine forks; the
        // process-tree fallback gets each one 10 ms to be found in.
        let pause = if config.is_empty() { "" } else { "0.01" };
        env.command_preset("p", &[&fake_agent("reforker")]);
        let id = env.launch_env("p", "x", &[("REFORK_LOG", log.to_str().unwrap()), ("REFORK_PAUSE", pause)]);
        let run = env.wait_run(&id, LIMIT, |r| !r["exited_at"].is_null());
        assert_eq!(run["status"], "completed", "{mode}: {run:#}");
        let count = || std::fs::read_to_string(&log).unwrap_or_default();
        let at_exit = count();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(count(), at_exit, "{mode}: generations went on after the run said every process was reaped");
        let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
        assert!(signals.contains("every process of the run is reaped"), "{mode}: {signals}");
    }
}

#[test]
fn a_stranger_carrying_a_runs_id_is_not_the_runs_with_a_cgroup() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    env.command_preset("p", &["true"]);
    let id = env.launch("p", "x");
    let stranger = std::process::Command::new("sleep").arg("30").env("CORRAL_RUN_ID", &id).spawn();
    let mut stranger = stranger.unwrap();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert!(stranger.try_wait().unwrap().is_none(), "a process outside the run's cgroup was killed for its variable");
    let _ = stranger.kill();
    let _ = stranger.wait();
}

#[test]
fn a_queued_run_never_starts_with_the_promoters_environment() {
    let env = mode_env("max_parallel = 1\n");
    env.command_preset("p", &["sh", "-c", "echo \"$MARK\""]);
    // Launched at once from 24 processes, each with its own MARK: every
    // run is promoted by someone else's process.
    let launchers: Vec<_> = (0..24)
        .map(|i| {
            let mut cmd = env.command(&["launch", "p", "x"]);
            cmd.env("MARK", format!("mark-{i}"));
            (i, cmd.output())
        })
        .collect();
    let ids: Vec<(usize, String)> = launchers
        .into_iter()
        .map(|(i, out)| (i, String::from_utf8(out.unwrap().stdout).unwrap().trim().to_string()))
        .collect();
    for (i, id) in ids {
        let run = env.wait_run(&id, Duration::from_secs(60), |r| !r["exited_at"].is_null());
        assert_eq!(run["final_text"], format!("mark-{i}"), "run {id} started with another launcher's environment");
    }
}

#[test]
fn a_parent_that_launches_a_child_in_the_background_and_exits_waits_for_it() {
    let env = mode_env("");
    let release = env.project.join("release");
    env.command_preset("child", &[&fake_agent("child"), "child-result"]);
    env.command_preset("lead", &["sh", "-c", "corral launch child work >/dev/null & exit 0"]);
    let parent = env.launch_env("lead", "x", &[("CHILD_RELEASE", release.to_str().unwrap())]);
    let run = env.wait_run(&parent, LIMIT, |r| r["status"] != "running" && r["status"] != "starting");
    assert_eq!(run["status"], "waiting", "the parent ended while its child was being launched: {run:#}");
    let child = run["children"][0].as_str().expect("the child is the parent's").to_string();
    std::fs::write(&release, "").unwrap();
    let out = env.corral(&["wait", &parent]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (parent, child) = (env.show(&parent), env.show(&child));
    assert_eq!(child["status"], "completed");
    assert!(parent["completed_at"].as_str() >= child["completed_at"].as_str(), "{parent:#}\n{child:#}");
}

#[test]
fn a_run_cannot_wait_on_itself_or_on_the_run_that_launched_it() {
    let env = mode_env("");
    let out = env.project.join("out");
    // The child waits on its parent (PARENT comes with the launcher's
    // environment); the parent waits on itself.
    env.command_preset("waiter", &["sh", "-c", "corral wait \"$PARENT\" 2>&1; echo \"rc=$?\""]);
    let script = format!(
        "corral wait \"$CORRAL_RUN_ID\" > '{o}' 2>&1; echo \"rc=$?\" >> '{o}'; \
         PARENT=$CORRAL_RUN_ID corral launch waiter x --wait --json >> '{o}'",
        o = out.display()
    );
    env.command_preset("lead", &["sh", "-c", &script]);
    let id = env.launch("lead", "x");
    let run = env.wait_run(&id, LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(run["status"], "completed", "{run:#}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(&format!("run {id} cannot wait on {id}: it is the run itself")), "{text}");
    assert!(text.contains("rc=1") || text.contains("rc=2"), "{text}");
    // Refused as a wait that could never end, or (first) as a run that is
    // not the child's to wait on.
    let refused = text.contains("it launched this run") || text.contains("is not one of yours");
    assert!(refused, "the child's wait on its parent was not refused: {text}");
}

#[test]
fn a_timeout_too_long_for_the_clock_is_refused_with_a_clear_error() {
    let env = mode_env("");
    env.command_preset_with("p", &["true"], "timeout: 18446744073709551615\n");
    let out = env.corral(&["launch", "p", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("longer than the longest Corral accepts"), "{err}");
    std::fs::write(env.home.join("config.toml"), "stop_grace = \"600000000years\"\n").unwrap();
    let err = String::from_utf8_lossy(&env.corral(&["ls"]).stderr).into_owned();
    assert!(err.contains("stop_grace") && err.contains("longest"), "{err}");
}

#[test]
fn a_cancelled_wait_leaves_its_run_holding_its_slot() {
    let env = mode_env("");
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("lead", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let lead = env.launch("lead", "x");
    let child = env.launch("slow", "y");
    env.wait_run(&lead, LIMIT, |r| r["status"] == "running");
    let home = corral::Home::at(&env.home);
    let cancel = corral::verbs::wait::Cancel::new().unwrap();
    let shepherd = corral::upkeep::queue::ShepherdCommand::program(common::corral_bin());
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let mut store = corral::Store::open(&home).unwrap();
            corral::verbs::wait::wait_for(
                &mut store,
                std::slice::from_ref(&child),
                None,
                Some(&lead),
                &shepherd,
                Some(&cancel),
                corral::run::blocking::Waiter::ToolCall,
                None,
            )
            .unwrap()
        });
        let store = corral::Store::open(&home).unwrap();
        assert!(eventually(LIMIT, || store.blocked_processes().unwrap().len() == 1), "the wait was not registered");
        cancel.cancel();
        let result = waiting.join().unwrap();
        assert!(result.cancelled);
        assert!(
            store.blocked_processes().unwrap().is_empty(),
            "a cancelled wait stays registered: its run holds no slot"
        );
    });
    std::fs::write(&release, "").unwrap();
}

#[test]
fn a_fork_bomb_stops_at_the_runs_tasks_limit() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    let report = env.project.join("report");
    // 200 sleepers wanted; the limit lets 20 processes exist at once.
    let bomb = format!(
        "import os, time\nok = refused = 0\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n            \
         time.sleep(30); os._exit(0)\n        ok += 1\n    except OSError:\n        refused += 1\n\
         open({:?}, 'w').write(f'{{ok}} {{refused}}')\ntime.sleep(30)\n",
        report.to_str().unwrap()
    );
    env.command_preset_with("bomb", &["python3", "-c", &bomb], "limits: {tasks: 20}\n");
    let id = env.launch("bomb", "x");
    let run = env.wait_run(&id, LIMIT, |r| r["status"] == "running");
    let notes = run["containment"]["notes"].to_string();
    if notes.contains("tasks limit 20 not applied") {
        println!("SKIPPED (cannot run here): {notes}");
        env.ok(&["abort", &id]);
        return;
    }
    assert!(notes.contains("tasks limit 20 ("), "{run:#}");
    let dir = run["containment"]["cgroup"].as_str().unwrap().to_string();
    // The file is created before it is written: wait for its words.
    let written = || std::fs::read_to_string(&report).is_ok_and(|t| t.contains(' '));
    assert!(eventually(LIMIT, written), "the bomb never finished forking");
    let text = std::fs::read_to_string(&report).unwrap();
    let (ok, refused) = text.split_once(' ').unwrap();
    let (ok, refused): (u32, u32) = (ok.parse().unwrap(), refused.parse().unwrap());
    assert!(ok < 20 && refused > 180, "forked {ok}, refused {refused} in a run limited to 20 tasks");
    let procs = std::fs::read_to_string(Path::new(&dir).join("cgroup.procs")).unwrap().lines().count();
    assert!(procs <= 20, "{procs} processes in a run limited to 20 tasks");
    env.ok(&["abort", &id]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted");
    assert!(!Path::new(&dir).exists(), "the run's cgroup is left after its end");
}

#[test]
fn a_run_over_its_memory_limit_fails_out_of_memory_and_says_so() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    let hog = "import time; b = bytearray(400 * 1024 * 1024); time.sleep(5)";
    env.command_preset_with("hog", &["python3", "-c", hog], "limits: {memory: 64M}\n");
    // A neighbour working beside it is not touched by its leak.
    let neighbour_code = "import time; b = bytearray(32 * 1024 * 1024); time.sleep(1.5); print('fine')";
    env.command_preset("neighbour", &["python3", "-c", neighbour_code]);
    let neighbour = env.launch("neighbour", "y");
    let id = env.launch("hog", "x");
    let run = env.wait_end(&id);
    let beside = env.wait_end(&neighbour);
    assert_eq!(beside["final_text"], "fine", "the neighbour was taken down with the leak: {beside:#}");
    let notes = run["containment"]["notes"].to_string();
    if notes.contains("not applied") {
        println!("SKIPPED (cannot run here): {notes}");
        return;
    }
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["stop_reason"], "out_of_memory", "{run:#}");
    assert!(run["error"].as_str().unwrap().contains("memory limit of 64.0 MiB"), "{run:#}");
}

#[test]
fn the_agent_is_in_its_runs_group_from_its_first_instruction() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    // `cat` is the agent itself: what it reads is where it was at exec.
    env.command_preset("where", &["cat", "/proc/self/cgroup"]);
    let id = env.launch("where", "x");
    let run = env.wait_end(&id);
    let text = env.ok(&["tail", &id, "-n", "all"]);
    let v2 = text.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or_default();
    assert!(v2.ends_with(&format!("/corral/{id}")), "the agent started outside its run's group:\n{text}\n{run:#}");
}

#[test]
fn cpu_seconds_match_what_the_agent_used() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    let busy =
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\nprint(time.process_time())";
    env.command_preset("busy", &["python3", "-c", busy]);
    let id = env.launch("busy", "x");
    let run = env.wait_end(&id);
    let own: f64 = run["final_text"].as_str().unwrap().trim().parse().unwrap();
    let cpu = run["resources"]["cpu_seconds"].as_f64().expect("resources recorded");
    assert!(cpu >= own && cpu <= own + 0.5, "the run used {cpu} s by its cgroup, the agent says {own} s");
    assert!(run["resources"]["memory_peak_bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{run:#}");
}

#[test]
fn pause_and_resume_keep_the_transcript_whole_and_the_clocks_stopped() {
    for (mode, config) in MODES {
        let env = mode_env(&format!("max_parallel = 1\n{config}"));
        // 20 ticks 50 ms apart: about a second of work, inside a 3 s
        // timeout that a 3.5 s pause would break if it counted.
        env.command_preset_with("ticks", &[&fake_agent("ticker"), "20", "0.05"], "timeout: 3s\n");
        env.command_preset("quick", &["true"]);
        let id = env.launch("ticks", "x");
        env.wait_run(&id, LIMIT, |r| r["status"] == "running");
        let paused = env.json(&["pause", &id]);
        assert_eq!(paused[0]["status"], "paused", "{mode}: {paused:#}");
        let ticks = || env.ok(&["tail", "-n", "all", &id]).lines().filter(|l| l.contains("tick ")).count();
        let at_pause = ticks();
        // A paused run holds no slot: a run queued behind it goes.
        let other = env.launch("quick", "y");
        assert_eq!(env.wait_end(&other)["status"], "completed", "{mode}: the paused run held its slot");
        std::thread::sleep(Duration::from_millis(3500));
        assert_eq!(ticks(), at_pause, "{mode}: the paused run went on working");
        assert_eq!(env.show(&id)["status"], "paused");
        let resumed = env.json(&["resume", &id]);
        assert_eq!(resumed[0]["status"], "running", "{mode}: {resumed:#}");
        let run = env.wait_end(&id);
        assert_eq!(run["status"], "completed", "{mode}: the pause counted against its timeout: {run:#}");
        let text = env.ok(&["tail", "-n", "all", &id]);
        let seen: Vec<&str> = text.lines().filter(|l| l.contains("tick ")).collect();
        let want: Vec<String> = (1..=20).map(|i| format!("tick {i}")).collect();
        assert!(seen.iter().zip(&want).all(|(l, w)| l.ends_with(w.as_str())) && seen.len() == 20, "{mode}: {text}");
    }
}

#[test]
fn only_a_running_run_can_be_paused() {
    let env = mode_env("");
    env.command_preset("quick", &["true"]);
    let id = env.launch("quick", "x");
    env.wait_end(&id);
    let out = env.corral(&["pause", &id]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is completed: only a running run can be paused"), "{err}");
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A cgroup v2 group outside every run's, made for a test's helper to move
/// itself into (as `systemd-run --scope` or tmux do); `None` if this
/// machine does not let the test make one.
fn escape_group(name: &str) -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        after.starts_with("cgroup2 ").then(|| before.split(' ').nth(4).map(std::path::PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim_start_matches('/').to_string();
    let dir = mount.join(own).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

#[test]
fn a_helper_that_moves_itself_to_another_cgroup_dies_with_its_run() {
    if no_cgroup_here().is_some() {
        return;
    }
    let Some(escape) = escape_group("corral-test-escape") else {
        println!("SKIPPED (cannot run here): this test cannot make a cgroup of its own");
        return;
    };
    let env = mode_env("");
    let pidfile = env.project.join("bg.pid");
    let moved = env.project.join("moved");
    let script = format!(
        "sleep 333 & echo $! > '{pid}'; echo $! > '{esc}/cgroup.procs' && touch '{moved}'; exit 0",
        pid = pidfile.display(),
        esc = escape.display(),
        moved = moved.display()
    );
    env.command_preset("p", &["sh", "-c", &script]);
    let id = env.launch("p", "x");
    let run = env.wait_end(&id);
    let bg = pid_in(&pidfile);
    let escaped = moved.exists();
    let dead = gone(bg);
    let _ = std::fs::remove_dir(&escape);
    assert!(escaped, "the helper could not leave the run's group: the test proves nothing");
    assert_eq!(run["status"], "completed", "{run:#}");
    assert!(
        dead,
        "a helper that left the run's cgroup outlived the run, shown {} with every process reaped",
        run["status"]
    );
}

#[test]
fn another_installation_launched_inside_a_run_dies_with_its_abort() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        let inner_home = env.user_home.join("inner-corral");
        let inner_pid = env.project.join("inner.pid");
        let fake_pid = env.project.join("fake.pid");
        let inner_id = env.project.join("inner.id");
        env.command_preset("inner", &["sh", "-c", &format!("echo $$ > '{}'; exec sleep 300", inner_pid.display())]);
        // The agent starts a run of another installation, and a process
        // that only says it is a shepherd.
        let script = format!(
            "CORRAL_HOME='{home}' corral launch inner x > '{id}'; CORRAL_SHEPHERD=x sh -c 'echo $$ > \"{fake}\"; exec sleep 300' & sleep 300",
            home = inner_home.display(),
            id = inner_id.display(),
            fake = fake_pid.display()
        );
        env.command_preset("outer", &["sh", "-c", &script]);
        // The other installation trusts the project's presets too.
        let trusted = env.command(&["presets", "trust"]).env("CORRAL_HOME", &inner_home).output().unwrap();
        assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
        let id = env.launch("outer", "x");
        let (agent, fake) = (pid_in(&inner_pid), pid_in(&fake_pid));
        let inner_run = std::fs::read_to_string(&inner_id).unwrap().trim().to_string();
        let inner_store = corral::Store::open(&corral::Home::at(&inner_home)).unwrap();
        let inner = inner_store.run(&inner_run).unwrap();
        let inner_shepherd = inner.shepherd_pid.expect("the inner run's shepherd");
        env.ok(&["abort", &id]);
        let run = env.wait_end(&id);
        assert_eq!(run["status"], "aborted", "{mode}: {run:#}");
        let (agent_gone, shepherd_gone, fake_gone) = (gone(agent), gone(inner_shepherd), gone(fake));
        assert!(shepherd_gone, "{mode}: the other installation's shepherd outlived the aborted run");
        assert!(agent_gone, "{mode}: the other installation's agent outlived the aborted run");
        assert!(fake_gone, "{mode}: a process with CORRAL_SHEPHERD in its environment was spared");
    }
}

#[test]
fn a_pause_never_freezes_the_store_while_the_run_writes_to_it() {
    for (mode, config) in MODES {
        let env = mode_env(config);
        env.command_preset("quick", &["true"]);
        let done = env.launch("quick", "x");
        env.wait_end(&done);
        // The agent calls Corral in a loop: each call takes the store's
        // write lock (a pause request for a run that has ended).
        let stop = env.project.join("stop");
        let script = format!(
            "while [ ! -e '{stop}' ]; do corral pause {done} >/dev/null 2>&1; done & \
             while [ ! -e '{stop}' ]; do corral pause {done} >/dev/null 2>&1; done; wait",
            stop = stop.display()
        );
        env.command_preset("writer", &["sh", "-c", &script]);
        let id = env.launch("writer", "y");
        env.wait_run(&id, LIMIT, |r| r["status"] == "running");
        for round in 0..150 {
            let out = env.corral(&["pause", &id]);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{mode}: round {round}: pause failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The store is free while the run is paused: a launch from a
            // terminal goes through at once.
            if round % 25 == 0 {
                let other = env.launch("quick", "z");
                assert_eq!(env.wait_end(&other)["status"], "completed", "{mode}: round {round}");
            }
            let out = env.corral(&["resume", &id]);
            assert!(
                out.status.success(),
                "{mode}: round {round}: resume failed: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::fs::write(&stop, "").unwrap();
        let run = env.wait_end(&id);
        assert_eq!(run["status"], "completed", "{mode}: {run:#}");
    }
}

#[test]
fn a_pause_after_a_resume_that_waits_for_a_slot_wins() {
    let env = mode_env("max_parallel = 1\n");
    let release = env.project.join("release");
    env.command_preset("ticks", &[&fake_agent("ticker"), "2000", "0.05"]);
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.command_preset("quick", &["true"]);
    let a = env.launch("ticks", "x");
    env.wait_run(&a, LIMIT, |r| r["status"] == "running");
    assert_eq!(env.json(&["pause", &a])[0]["status"], "paused");
    let b = env.launch("slow", "y");
    env.wait_run(&b, LIMIT, |r| r["status"] == "running");
    let resumed = env.ok(&["resume", &a]);
    assert!(resumed.contains("resume requested"), "{resumed}");
    let paused = env.corral(&["pause", &a]);
    assert!(paused.status.success(), "{}", String::from_utf8_lossy(&paused.stderr));
    assert!(String::from_utf8_lossy(&paused.stdout).contains("paused"));
    std::fs::write(&release, "").unwrap();
    assert_eq!(env.wait_end(&b)["status"], "completed");
    // Had the resume stood, A would hold the only slot (2000 ticks) and
    // this run would still be queued.
    let c = env.launch("quick", "z");
    assert_eq!(env.wait_end(&c)["status"], "completed");
    assert_eq!(env.show(&a)["status"], "paused", "the earlier resume won over the later pause");
    env.ok(&["abort", &a]);
    let run = env.wait_end(&a);
    assert_eq!(run["status"], "aborted");
    assert!(run["paused_at"].is_null(), "an aborted run still says it is paused: {run:#}");
}

#[test]
fn pausing_several_runs_does_each_on_its_own() {
    let env = mode_env("");
    env.command_preset("quick", &["true"]);
    env.command_preset("ticks", &[&fake_agent("ticker"), "2000", "0.05"]);
    let ended = env.launch("quick", "x");
    env.wait_end(&ended);
    let live = env.launch("ticks", "y");
    env.wait_run(&live, LIMIT, |r| r["status"] == "running");
    let out = env.corral(&["pause", &ended, "no-such-run", &live]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains(&format!("run {ended} is completed")), "{stderr}");
    assert!(stderr.contains("no run 'no-such-run'"), "{stderr}");
    assert!(stdout.contains(&format!("{live}  paused")), "the run after an ended one was left running: {stdout}");
    assert_eq!(env.show(&live)["status"], "paused");
    env.ok(&["abort", &live]);
}

#[test]
fn a_preset_can_lift_a_default_limit_and_show_says_where_each_came_from() {
    for (mode, config) in MODES {
        let env = mode_env(&format!("{config}[limits]\nmemory = \"1G\"\ntasks = 100\n"));
        env.command_preset_with("free", &["true"], "limits: {memory: none, tasks: none}\n");
        env.command_preset_with("tight", &["true"], "limits: {tasks: 50}\n");
        let free = env.wait_end(&env.launch("free", "x"));
        let notes = free["containment"]["notes"].to_string();
        assert!(notes.contains("memory: config.toml's default lifted by the preset (none)"), "{mode}: {notes}");
        assert!(notes.contains("tasks: config.toml's default lifted by the preset (none)"), "{mode}: {notes}");
        assert!(!notes.contains("memory limit 1.0 GiB") && !notes.contains("tasks limit 100"), "{mode}: {notes}");
        let tight = env.wait_end(&env.launch("tight", "x"));
        let notes = tight["containment"]["notes"].to_string();
        assert!(
            notes.contains("tasks: from the preset") && notes.contains("memory: from config.toml [limits]"),
            "{mode}: {notes}"
        );
        let shown = env.ok(&["show", tight["id"].as_str().unwrap()]);
        assert!(shown.contains("tasks: from the preset"), "{mode}: show does not say where limits came from:\n{shown}");
    }
}

#[test]
fn a_cpu_limit_without_a_unit_is_cores_and_never_more_than_the_machine_has() {
    let env = mode_env("");
    env.command_preset_with("p", &["true"], "limits: {cpu: \"100000\"}\n");
    let out = env.corral(&["launch", "p", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("limits.cpu: 100000") && err.contains("more cores than this machine has"), "{err}");
    std::fs::write(env.home.join("config.toml"), "[limits]\ncpu = \"200\"\n").unwrap();
    let err = String::from_utf8_lossy(&env.corral(&["ls"]).stderr).into_owned();
    assert!(err.contains("cpu") && (err.contains("more cores") || err.contains("one core")), "{err}");
}

#[test]
fn a_child_killed_for_memory_is_said_whichever_process_it_was() {
    if no_cgroup_here().is_some() {
        return;
    }
    let env = mode_env("");
    // The agent is a shell; its child (a test runner, a build) leaks.
    let script = "python3 -c 'b = bytearray(400 * 1024 * 1024)'; exit $?";
    env.command_preset_with("runner", &["sh", "-c", script], "limits: {memory: 64M}\n");
    let run = env.wait_end(&env.launch("runner", "x"));
    let notes = run["containment"]["notes"].to_string();
    if notes.contains("not applied") {
        println!("SKIPPED (cannot run here): {notes}");
        return;
    }
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["stop_reason"], "out_of_memory", "a child killed for memory was not said: {run:#}");
    let error = run["error"].as_str().unwrap();
    assert!(error.contains("memory limit of 64.0 MiB") && error.contains("exited with code 137"), "{error}");
}

/// Without a cgroup a run's CPU is what its shepherd reaped: a child run's
/// shepherd, adopted by the parent's as subreaper, used its CPU for its
/// own run, and is left out of the parent's.
#[test]
fn a_parents_cpu_leaves_out_its_child_runs_without_a_cgroup() {
    let env = mode_env("cgroups = false\n");
    let busy =
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\nprint(time.process_time())";
    env.command_preset("busy", &["python3", "-c", busy]);
    std::fs::write(env.project.join("lead.sh"), "set -e\ncorral launch busy burn > kid\ncorral wait $(cat kid)\n")
        .unwrap();
    env.command_preset("lead", &["sh", "lead.sh"]);
    let lead = env.launch("lead", "x");
    let lead_run = env.wait_end(&lead);
    assert_eq!(lead_run["status"], "completed", "{lead_run:#}");
    let kid = std::fs::read_to_string(env.project.join("kid")).unwrap().trim().to_string();
    let kid_cpu = env.show(&kid)["resources"]["cpu_seconds"].as_f64().expect("the child's CPU");
    let lead_cpu = lead_run["resources"]["cpu_seconds"].as_f64().expect("the lead's CPU");
    assert!(kid_cpu >= 1.0, "the child used {kid_cpu} s");
    assert!(lead_cpu < 0.6, "the lead's CPU counts its child's: {lead_cpu} s (the child's: {kid_cpu} s)");
}
