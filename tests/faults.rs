//! Faults, with real processes: launchers and readers killed while runs are
//! active, shepherds killed at random points, a store writer killed mid-
//! write a hundred times, fifty shepherds and readers at once, a full or
//! read-only disk, and the bad inputs users make.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, fake_agent, processes_of_run, Env};
use corral::adapter::{EventKind, TranscriptEvent};
use corral::preset::{parse_preset, PresetSource};
use corral::store::{NewRun, Outcome};
use corral::{Home, RunStatus, StopReason, Store};

#[test]
fn killing_the_clis_that_launched_waited_and_followed_leaves_20_runs_to_finish() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), "max_parallel = 64\n").unwrap();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let ids: Vec<String> = (0..20).map(|i| env.launch("slow", &format!("job {i}"))).collect();
    let mut watchers = Vec::new();
    for id in ids.iter().take(5) {
        for args in
            [vec!["wait", id.as_str()], vec!["tail", "-f", id.as_str()], vec!["launch", "slow", "late", "--wait"]]
        {
            watchers.push(env.command(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
        }
    }
    assert!(eventually(Duration::from_secs(20), || ids.iter().all(|id| env.show(id)["status"] == "running")));
    for w in &mut watchers {
        w.kill().unwrap(); // SIGKILL
        w.wait().unwrap();
    }
    std::fs::write(&release, "").unwrap();
    for id in &ids {
        let run = env.wait_end(id);
        assert_eq!(run["status"], "completed", "{run:#}");
        assert_eq!(run["final_text"], "started\nfinished");
    }
}

#[test]
fn shepherds_killed_at_random_points_make_only_their_runs_lost() {
    let env = Env::new();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    env.agent_preset("pi", "pi", "");
    let mut victims = Vec::new();
    let mut survivors = Vec::new();
    for i in 0..10 {
        let id = if i % 2 == 0 {
            env.launch_env(
                "pi",
                "orphan",
                &[("FAKE_STREAM", "/dev/null"), ("FAKE_THEN", "linger"), ("FAKE_GRANDCHILD", "1")],
            )
        } else {
            env.launch("slow", "keep going")
        };
        // Kill at a random moment after launch: while starting, or running.
        std::thread::sleep(Duration::from_millis(fastrand::u64(0..40)));
        if i % 2 == 0 {
            let pid = eventually(Duration::from_secs(10), || env.show(&id)["shepherd_pid"].is_i64());
            assert!(pid);
            let pid = env.show(&id)["shepherd_pid"].as_i64().unwrap() as i32;
            unsafe { libc::kill(pid, libc::SIGKILL) };
            victims.push(id);
        } else {
            survivors.push(id);
        }
    }
    for id in &victims {
        let run = env.wait_run(id, Duration::from_secs(10), |r| r["status"] == "lost");
        assert_eq!(run["stop_reason"], "shepherd_died");
        assert!(
            eventually(Duration::from_secs(5), || processes_of_run(id).is_empty()),
            "{id}: {:?}",
            processes_of_run(id)
        );
    }
    for id in &survivors {
        assert_eq!(env.show(id)["status"], "running", "other runs are not touched");
    }
    std::fs::write(&release, "").unwrap();
    for id in &survivors {
        assert_eq!(env.wait_end(id)["status"], "completed");
    }
}

/// Writes runs, transitions and events forever, printing each commit after
/// it returns. Runs only as the child of the test below.
#[test]
fn store_writer_child() {
    let Ok(home) = std::env::var("CORRAL_WRITER_HOME") else { return };
    let mut store = Store::open(&Home::at(home)).unwrap();
    let preset = parse_preset(
        "---\nname: w\ndescription: d\nagent: command\ncommand: [true]\n---\n",
        "w.md",
        PresetSource::Global,
    )
    .unwrap();
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    for i in 0.. {
        let run = store.insert_run(&NewRun::plain(&preset, &format!("task {i}"), "/"), 1_000_000, |_| Ok(())).unwrap();
        writeln!(out, "run {}", run.id).unwrap();
        let events: Vec<TranscriptEvent> =
            (0..20).map(|n| TranscriptEvent::text(EventKind::Output, format!("line {n} of {i}"))).collect();
        store.append_events(&run.id, 1, &events).unwrap();
        writeln!(out, "events {} 20", run.id).unwrap();
        let outcome = Outcome {
            status: RunStatus::Completed,
            stop_reason: StopReason::ExitCode,
            exit_code: Some(0),
            exit_signal: None,
            error: None,
            report: Default::default(),
        };
        store.commit_outcome(&run.id, &outcome).unwrap();
        writeln!(out, "completed {}", run.id).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn a_store_writer_killed_mid_write_100_times_loses_no_committed_transition() {
    let env = Env::new();
    let home = Home::at(&env.home);
    Store::open(&home).unwrap();
    let mut committed: Vec<String> = Vec::new();
    for round in 0..100 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["store_writer_child", "--exact", "--nocapture", "--test-threads", "1"])
            .env("CORRAL_WRITER_HOME", &env.home)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter(|l| ["run ", "events ", "completed "].iter().any(|p| l.starts_with(p)))
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(20 + fastrand::u64(0..60)));
        child.kill().unwrap(); // SIGKILL, mid-write
        child.wait().unwrap();
        committed.extend(lines.join().unwrap());
        let store = Store::open(&home).unwrap_or_else(|e| panic!("round {round}: the store must open: {e}"));
        drop(store);
    }
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let store = Store::open(&home).unwrap();
    assert!(committed.len() > 100, "the writer did write: {}", committed.len());
    for line in &committed {
        let mut parts = line.split(' ');
        let (what, id) = (parts.next().unwrap(), parts.next().unwrap());
        let run = store.run(id).unwrap_or_else(|e| panic!("committed {line}, then lost: {e}"));
        match what {
            "events" => assert_eq!(store.event_count(id).unwrap(), 20, "{line}"),
            "completed" => assert_eq!(run.status, RunStatus::Completed, "{line}"),
            _ => {}
        }
    }
}

#[test]
fn fifty_shepherds_a_cli_and_a_reader_at_once_lose_nothing_and_never_fail() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), "max_parallel = 64\n").unwrap();
    env.use_fake("pi", "flood");
    env.agent_preset("flood", "pi", "");
    let ids: Vec<String> = (0..50)
        .map(|i| {
            env.launch_env("flood", &format!("flood {i}"), &[("FLOOD_LINES", "2000"), ("FLOOD_FORMAT", "pi-tools")])
        })
        .collect();
    // A reader and a CLI, hammering the store while the shepherds write.
    let reader_home = env.home.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let reader = std::thread::spawn(move || {
        let store = Store::open(&Home::at(reader_home)).unwrap();
        let mut reads = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            store.counts().unwrap();
            store.runs(&Default::default()).unwrap();
            reads += 1;
        }
        reads
    });
    let mut cli_calls = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        for args in [vec!["ls", "--json"], vec!["search", "result", "--json"]] {
            let out = env.corral(&args);
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            cli_calls += 1;
        }
        if ids.iter().all(|id| !env.show(id)["exited_at"].is_null()) {
            break;
        }
        assert!(Instant::now() < deadline, "the runs did not end");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().unwrap();
    let store = Store::open(&Home::at(&env.home)).unwrap();
    for id in &ids {
        let run = store.run(id).unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{run:?}");
        assert_eq!(store.event_count(id).unwrap(), 2000, "every line of {id} is in its transcript");
        let log = std::fs::read_to_string(env.run_dir(id).join("shepherd.log")).unwrap();
        assert!(!log.contains("locked") && !log.contains("busy"), "{id}: {log}");
    }
    assert!(reads > 0 && cli_calls > 0);
}

/// A small tmpfs mounted on a folder, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Mounts a small tmpfs (root only), private as Corral's folders must be (a
/// tmpfs is 1777 by default, which Corral refuses); `None` where mounting
/// is not allowed.
fn small_disk(dir: &std::path::Path, size: &str) -> Option<SmallDisk> {
    std::fs::create_dir_all(dir).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
        .arg(dir)
        .status()
        .ok()?
        .success();
    ok.then(|| SmallDisk(dir.to_path_buf()))
}

#[test]
fn a_full_disk_stops_the_agent_and_never_shows_a_half_written_run_as_done() {
    let env = Env::new();
    let Some(_disk) = small_disk(&env.home, "2m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    env.use_fake("pi", "flood");
    env.agent_preset("flood", "pi", "");
    // 300k tool results: far more than 2 MB of log and transcript.
    let id = env.launch_env("flood", "fill the disk", &[("FLOOD_LINES", "300000"), ("FLOOD_FORMAT", "pi-tools")]);
    let run = env.wait_run(&id, Duration::from_secs(60), |r| r["status"] != "running" && r["status"] != "starting");
    assert_eq!(run["status"], "lost", "the outcome could not be written, so it is not shown as done: {run:#}");
    assert!(processes_of_run(&id).is_empty(), "the agent was stopped");
    let error = run["error"].as_str().unwrap();
    assert!(error.contains("is full"), "says why: {error}");
}

#[test]
fn a_read_only_store_gives_a_clear_error() {
    let env = Env::new();
    let Some(_disk) = small_disk(&env.home, "4m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let id = env.launch("ok", "before");
    env.wait_end(&id);
    // The run's shepherd may still hold the database open for writing for
    // a moment after its exit is recorded (it hands its slot on), and the
    // launch template's spare holds it while it waits: a read-write file
    // open makes the remount fail with "busy". The disk going read-only
    // under a template is its spare's to meet; here the launch meets it.
    if let Some(pid) = env.template_pid() {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGTERM).unwrap();
    }
    let remounted = eventually(Duration::from_secs(10), || {
        Command::new("mount").args(["-o", "remount,ro"]).arg(&env.home).status().unwrap().success()
    });
    assert!(remounted, "could not remount the store read-only");
    let out = env.corral(&["launch", "ok", "after"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.to_lowercase().contains("read-only"), "{err}");
    assert_eq!(err.matches("Read-only file system").count(), 1, "said once: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_gets_a_clear_error_and_loses_nothing() {
    let env = Env::new();
    // A binary that exists but cannot be executed.
    let not_exec = env.project.join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\necho hi\n").unwrap();
    env.command_preset("noexec", &[not_exec.to_str().unwrap()]);
    let out = env.corral(&["launch", "noexec", "x", "--wait", "--json"]);
    assert_eq!(out.status.code(), Some(2), "refused at launch");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not executable: chmod +x"));
    // One that becomes unexecutable after the launch fails the run, saying so.
    let later = env.project.join("later");
    std::fs::write(&later, "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(&later, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let chmod = format!("chmod -x '{}'", later.display());
    let setup = format!("setup: [sh, -c, {}]\n", serde_json::to_string(&chmod).unwrap());
    env.command_preset_with("later", &[later.to_str().unwrap()], &setup);
    let out = env.corral(&["launch", "later", "x", "--wait", "--json"]);
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((run["status"].as_str(), run["stop_reason"].as_str()), (Some("failed"), Some("spawn_failed")));
    assert!(run["error"].as_str().unwrap().contains("is not executable: chmod +x"), "{run:#}");

    // A working folder that does not exist: at launch, and gone by start.
    let out = env.corral(&["launch", "noexec", "x", "--cwd", "/no/such/folder"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the working folder /no/such/folder does not exist"));
    let doomed = env.project.join("doomed");
    std::fs::create_dir(&doomed).unwrap();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), "max_parallel = 1\n").unwrap();
    let release = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), release.to_str().unwrap()]);
    let blocker = env.launch("slow", "hold the only slot");
    let queued = env.ok(&["launch", "ok", "later", "--cwd", doomed.to_str().unwrap()]).trim().to_string();
    assert_eq!(env.show(&queued)["status"], "queued");
    std::fs::remove_dir(&doomed).unwrap();
    std::fs::write(&release, "").unwrap();
    env.wait_end(&blocker);
    let run = env.wait_end(&queued);
    assert_eq!(run["stop_reason"], "spawn_failed");
    assert!(run["error"].as_str().unwrap().contains("does not exist"), "{run:#}");

    // Unknown ids, empty tasks, broken settings.
    for (args, want) in [
        (vec!["show", "zzzz"], "no run 'zzzz': see 'corral ls --all'"),
        (vec!["abort", "zzzz"], "no run 'zzzz'"),
        (vec!["tail", "zzzz"], "no run 'zzzz'"),
        (vec!["launch", "ok", " "], "the task is empty"),
        (vec!["ls", "--status", "done"], "unknown status 'done'"),
    ] {
        let out = env.corral(&args);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(env.home.join("config.toml"), "max_parallel = \"lots\"\n").unwrap();
    let out = env.corral(&["launch", "ok", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid settings file") && err.contains("config.toml"), "{err}");
    std::fs::remove_file(env.home.join("config.toml")).unwrap();
    assert_eq!(env.json(&["ls", "--all"]).as_array().unwrap().len(), 3, "nothing was lost");
}
