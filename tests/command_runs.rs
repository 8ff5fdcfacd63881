//! The first supervised runs, end to end through the real `corral` binary
//! and real processes: the `command` adapter's outcomes, verbatim tasks,
//! isolation and permissions, `wait` exit codes, `tail --follow`, abort, and
//! runs that outlive whoever launched them.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, fake_agent, processes_of_run, Env};

#[test]
fn a_successful_command_is_completed_with_its_last_lines_as_result() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let id = env.launch("ok", "build the thing");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["stop_reason"], "exit_code");
    assert_eq!(run["exit_code"], 0);
    assert_eq!(run["final_text"], "working on: build the thing\nstep 1 done");
    assert_eq!(run["error"], serde_json::Value::Null);
    for key in ["created_at", "started_at", "completed_at", "exited_at"] {
        let at = run[key].as_str().unwrap_or_else(|| panic!("{key} missing"));
        assert!(at.ends_with('Z') && at.len() == 24, "{key} = {at}: RFC 3339 with milliseconds");
    }
    // Kept once, in the transcript: no raw copies unless `raw_logs` asks.
    assert!(!env.run_dir(&id).join("stderr.log").exists() && !env.run_dir(&id).join("stdout.log").exists());
    let transcript = env.ok(&["tail", "-n", "all", &id]);
    assert_eq!(transcript, "working on: build the thing\nstep 1 done\n[stderr] something went wrong on step 2\n");
}

#[test]
fn a_failing_command_is_failed_with_its_exit_code_and_stderr() {
    let env = Env::new();
    env.command_preset("bad", &[&fake_agent("exit-with"), "3"]);
    let id = env.launch("bad", "try");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["stop_reason"], "exit_code");
    assert_eq!(run["exit_code"], 3);
    assert_eq!(run["error"], "exited with code 3: something went wrong on step 2");
}

#[test]
fn a_command_killed_by_a_signal_is_failed_naming_the_signal() {
    let env = Env::new();
    env.command_preset("killed", &[&fake_agent("die-by-signal"), "KILL"]);
    let id = env.launch("killed", "go");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["stop_reason"], "signal");
    assert_eq!(run["exit_signal"], 9);
    assert_eq!(run["exit_code"], serde_json::Value::Null);
    assert!(run["error"].as_str().unwrap().contains("SIGKILL"), "{run:#}");
}

#[test]
fn a_preset_whose_agent_is_not_installed_is_refused_at_launch_and_marked_unavailable() {
    let env = Env::new();
    env.command_preset("ghost", &["corral-test-no-such-agent", "--flag"]);
    env.agent_preset("gone", "codex", "");
    std::fs::remove_file(env.bin.join("codex")).unwrap();
    let out = env.corral(&["launch", "ghost", "go", "--wait", "--json"]);
    assert_eq!(out.status.code(), Some(2), "refused, not launched then failed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'corral-test-no-such-agent' is not on PATH"), "{err}");
    assert!(err.contains("ghost.md"), "names the preset file to fix: {err}");
    let err = String::from_utf8_lossy(&env.corral(&["launch", "gone", "go"]).stderr).into_owned();
    assert!(err.contains("npm install -g @openai/codex"), "says what to install: {err}");
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty(), "a refused launch was recorded");
    // Offered as unavailable, with why, wherever presets are listed.
    let presets = env.json(&["presets"]);
    let ghost = presets.as_array().unwrap().iter().find(|p| p["name"] == "ghost").unwrap();
    assert!(ghost["unavailable"].as_str().unwrap().contains("is not on PATH"), "{ghost:#}");
    let text = env.ok(&["presets"]);
    assert!(text.contains("Cannot start here (2)"), "{text}");
}

#[test]
fn the_task_reaches_the_agent_verbatim_as_one_argument() {
    let env = Env::new();
    env.command_preset("args", &[&fake_agent("print-args"), "--task", "{task}", "{task}x"]);
    let task = "hi $(touch pwned) `touch pwned2` \"double\" 'single' ; rm -rf / \\ *\nsecond line";
    let id = env.launch("args", task);
    env.wait_end(&id);
    let stdout = env.ok(&["tail", "-n", "all", &id]);
    let expected = format!("<--task>\n<{task}>\n<{{task}}x>\nCORRAL_TASK=<{task}>\nCORRAL_RUN_ID=<{id}>\n");
    assert_eq!(stdout, expected);
    assert!(!env.project.join("pwned").exists() && !env.project.join("pwned2").exists());
    assert_eq!(env.show(&id)["task"], task);
}

#[test]
fn corral_home_keeps_installations_apart_and_private() {
    let a = Env::new();
    let b = Env::new();
    a.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let id = a.launch("ok", "in a");
    a.wait_end(&id);
    assert_eq!(a.json(&["ls"]).as_array().unwrap().len(), 1);
    assert_eq!(b.json(&["ls"]).as_array().unwrap().len(), 0);
    assert!(!a.user_home.join(".local/share/corral").exists(), "nothing written outside CORRAL_HOME");

    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [a.home.clone(), a.home.join("runs"), a.run_dir(&id)] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    let mut files = vec![a.home.join("corral.db")];
    for entry in std::fs::read_dir(a.run_dir(&id)).unwrap() {
        files.push(entry.unwrap().path());
    }
    for file in files {
        let private = if file.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&file), private, "{}", file.display());
    }
}

#[test]
fn wait_exits_0_when_completed_1_otherwise_124_on_timeout() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    env.command_preset("bad", &[&fake_agent("exit-with"), "1"]);
    let marker = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), marker.to_str().unwrap()]);
    let ok = env.launch("ok", "a");
    let bad = env.launch("bad", "b");
    let slow = env.launch("slow", "c");

    assert_eq!(env.corral(&["wait", &ok]).status.code(), Some(0));
    assert_eq!(env.corral(&["wait", &ok, &bad]).status.code(), Some(1));
    let timed_out = env.corral(&["wait", &slow, "--timeout", "0.3", "--json"]);
    assert_eq!(timed_out.status.code(), Some(124));
    let runs: serde_json::Value = serde_json::from_slice(&timed_out.stdout).unwrap();
    assert_eq!(runs[0]["status"], "running");

    std::fs::write(&marker, "").unwrap();
    let done = env.corral(&["wait", &slow, "--json"]);
    assert_eq!(done.status.code(), Some(0));
    let runs: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(runs[0]["final_text"], "started\nfinished");

    let unknown = env.corral(&["wait", "x1"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&unknown.stderr).trim(), "corral: no run 'x1': see 'corral ls --all'");
}

#[test]
fn tail_follow_prints_a_live_run_until_it_ends() {
    let env = Env::new();
    let marker = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), marker.to_str().unwrap()]);
    let id = env.launch("slow", "watch me");
    let mut tail = env.command(&["tail", "-f", &id]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "started");
    std::fs::write(&marker, "").unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(rest, vec!["finished".to_string(), format!("── {id} completed (exit_code)")]);
    assert!(tail.wait().unwrap().success());
}

#[test]
fn abort_stops_the_run_and_its_processes_and_is_idempotent() {
    let env = Env::new();
    let marker = env.project.join("never");
    env.command_preset("slow", &[&fake_agent("slow"), marker.to_str().unwrap()]);
    let id = env.launch("slow", "forever");
    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    assert!(!processes_of_run(&id).is_empty());

    let out = env.ok(&["abort", &id]);
    assert_eq!(out.trim(), format!("{id}  aborted"));
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted");
    assert_eq!(run["stop_reason"], "user_abort");
    assert!(processes_of_run(&id).is_empty(), "no process of the run survives");
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
    assert!(signals.contains("SIGTERM -> group"), "{signals}");

    let again = env.ok(&["abort", &id]);
    assert_eq!(again.trim(), format!("{id}  already ended: aborted"));
}

#[test]
fn a_run_survives_its_launcher_being_killed() {
    let env = Env::new();
    let marker = env.project.join("release");
    env.command_preset("slow", &[&fake_agent("slow"), marker.to_str().unwrap()]);
    let id_file = env.project.join("id");
    // A launcher that records the id, then hangs until killed with its group.
    let script = format!("{} launch slow survive > {} && sleep 60", common::corral_bin().display(), id_file.display());
    let mut launcher = std::process::Command::new("setsid");
    launcher
        .args(["sh", "-c", &script])
        .current_dir(&env.project)
        .env("CORRAL_HOME", &env.home)
        .env("HOME", &env.user_home);
    let mut launcher = launcher.spawn().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(&id_file).is_ok_and(|s| s.trim().len() == 8))
    );
    let id = std::fs::read_to_string(&id_file).unwrap().trim().to_string();
    // Kill the launcher's whole session group.
    unsafe { libc::kill(-(launcher.id() as i32), libc::SIGKILL) };
    launcher.wait().unwrap();

    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    std::fs::write(&marker, "").unwrap();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["final_text"], "started\nfinished");
}

#[test]
fn a_database_from_a_newer_corral_is_refused_with_a_clear_message() {
    let env = Env::new();
    env.ok(&["ls"]);
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    db.pragma_update(None, "user_version", 999).unwrap();
    drop(db);
    let out = env.corral(&["ls"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("from a newer Corral (schema 999"), "{err}");
    assert!(err.contains("upgrade Corral"), "{err}");
}

#[test]
fn ls_and_show_and_search_find_runs() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let id = env.launch("ok", "find the flux capacitor");
    env.wait_end(&id);
    let table = env.ok(&["ls"]);
    let header = table.lines().next().unwrap();
    assert!(header.starts_with("ID") && header.contains("STATUS") && header.contains("TASK"), "{table}");
    assert!(table.contains(&id) && table.contains("completed") && table.contains("find the flux capacitor"));
    assert_eq!(env.json(&["ls", "--status", "failed"]).as_array().unwrap().len(), 0);

    let prefix = &id[..5];
    assert_eq!(env.show(prefix)["id"], id.as_str(), "a unique prefix is enough");
    let hits = env.json(&["search", "capacitor"]);
    assert_eq!(hits[0]["id"], id.as_str());
    let hits = env.json(&["search", "step"]);
    assert!(hits.as_array().unwrap().iter().any(|h| h["field"] == "transcript"), "{hits:#}");
}

#[test]
fn a_flood_of_output_is_stored_in_bounded_events_and_search_shows_snippets_of_the_hits() {
    let env = Env::new();
    env.command_preset("flood", &["sh", "-c", "yes 'lorem ipsum dolor sit amet' | head -n 200000"]);
    let id = env.launch("flood", "x");
    assert_eq!(env.wait_end(&id)["status"], "completed");
    let store = env.store();
    let events = store.events_after(&id, 0, 1_000_000).unwrap();
    let output: Vec<_> = events.iter().filter(|e| e.kind == corral::adapter::EventKind::Output).collect();
    let lines: usize = output.iter().map(|e| e.text.lines().count()).sum();
    assert_eq!(lines, 200_000, "every line is kept");
    let longest = events.iter().map(|e| e.text.len()).max().unwrap();
    assert!(longest < 32 << 10, "an event of {longest} bytes: floods must come in bounded pieces");
    let hits = env.json(&["search", "ipsum"]);
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 50, "at most 50 hits, the newest first");
    assert!(hits.iter().all(|h| h["snippet"].as_str().unwrap().contains("[ipsum]")), "{hits:#?}");
    // Where the space goes: this run first.
    let du = env.json(&["du"]);
    assert_eq!(du["largest_runs"][0]["id"], id.as_str(), "{du:#}");
    assert!(du["largest_runs"][0]["transcript_bytes"].as_u64().unwrap() > 5_000_000, "{du:#}");
    assert!(du["database_bytes"].as_u64().unwrap() > 0);
    // The window's filter: the runs alone, no excerpts.
    assert_eq!(store.search_run_ids("ipsum", 500).unwrap(), vec![id.clone()]);
    assert!(store.search_run_ids("nowhere-to-be-found", 500).unwrap().is_empty());
}

#[test]
fn tail_is_tail_last_lines_stderr_in_order_several_runs_and_an_exit_like_wait() {
    let env = Env::new();
    env.command_preset("count", &["sh", "-c", "seq 1000"]);
    let mixed = "echo out-1; sleep 0.1; echo err-1 >&2; sleep 0.1; echo out-2; sleep 0.1; echo err-2 >&2; exit 3";
    env.command_preset("mixed", &["sh", "-c", mixed]);
    let count = env.launch("count", "x");
    let mixed = env.launch("mixed", "y");
    env.wait_end(&count);
    env.wait_end(&mixed);

    let last: Vec<String> = env.ok(&["tail", &count]).lines().map(str::to_string).collect();
    assert_eq!(last, (991..=1000).map(|n| n.to_string()).collect::<Vec<_>>(), "the last 10 lines by default");
    assert_eq!(env.ok(&["tail", "-n", "3", &count]), "998\n999\n1000\n");
    assert_eq!(env.ok(&["tail", "-n", "all", &count]).lines().count(), 1000);
    // stderr is in the transcript, marked, in the order it came.
    let text = env.ok(&["tail", "-n", "all", &mixed]);
    let order: Vec<&str> = text.lines().filter(|l| l.contains("out-") || l.contains("err-")).collect();
    assert_eq!(order, ["out-1", "[stderr] err-1", "out-2", "[stderr] err-2"], "{text}");
    // Several runs: interleaved by time, each line with its run's id.
    let both = env.ok(&["tail", "-n", "2", &count, &mixed]);
    assert!(both.lines().all(|l| l.starts_with(&count[..8]) || l.starts_with(&mixed[..8])), "{both}");
    assert_eq!(both.lines().count(), 4, "{both}");
    // Timestamps, and --since.
    let stamped = env.ok(&["tail", "-t", "-n", "1", &count]);
    assert!(stamped.starts_with("20") && stamped.trim_end().ends_with(" 1000"), "{stamped}");
    assert_eq!(env.ok(&["tail", "--since", "2099-01-01T00:00:00Z", &count]), "");
    assert_eq!(env.ok(&["tail", "--since", "1h", &count]).lines().count(), 1000, "all since then");
    // -f exits as wait does: 1 for a run that failed.
    let out = env.corral(&["tail", "-f", &mixed]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("── {mixed} failed")));
    let out = env.corral(&["tail", "-n", "x", &count]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("-n x is not a number of lines"));
}

#[test]
fn ls_shows_the_latest_20_and_filters_by_status_preset_folder_and_age() {
    let env = Env::new();
    env.command_preset("ok", &["true"]);
    env.command_preset("bad", &["false"]);
    let other = env.project.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let mut ids = Vec::new();
    for i in 0..22 {
        ids.push(env.launch("ok", &format!("job {i}")));
    }
    let bad = env.ok(&["launch", "bad", "fails", "--cwd", other.to_str().unwrap()]).trim().to_string();
    for id in ids.iter().chain([&bad]) {
        env.wait_end(id);
    }
    let table = env.ok(&["ls"]);
    assert_eq!(table.lines().count(), 1 + 20 + 1, "header, the latest 20, and a note: {table}");
    assert!(table.lines().next().unwrap().contains("FOLDER") && table.contains("elsewhere"), "{table}");
    assert!(table.contains("(the latest 20: -n N or --all for more)"), "{table}");
    assert_eq!(env.json(&["ls", "-n", "5"]).as_array().unwrap().len(), 5);
    assert_eq!(env.json(&["ls", "--all"]).as_array().unwrap().len(), 23);
    let failed = env.json(&["ls", "--status", "failed", "--status", "aborted"]);
    assert_eq!(failed.as_array().unwrap().len(), 1);
    assert_eq!(failed[0]["id"], bad.as_str());
    assert_eq!(env.json(&["ls", "--preset", "bad"])[0]["id"], bad.as_str());
    assert_eq!(env.json(&["ls", "--cwd", other.to_str().unwrap()]).as_array().unwrap().len(), 1);
    let mut here = env.command(&["ls", "--here", "--json", "--all"]);
    here.current_dir(&other);
    let here: serde_json::Value = serde_json::from_slice(&here.output().unwrap().stdout).unwrap();
    assert_eq!(here.as_array().unwrap().len(), 1, "{here:#}");
    assert_eq!(env.ok(&["ls", "--since", "2099-01-01T00:00:00Z"]), "no runs match\n");
    assert_eq!(env.ok(&["ls", "--status", "paused"]), "no runs match\n");
}

#[test]
fn a_task_comes_from_stdin_or_a_file_and_a_run_is_relaunched_as_it_was() {
    let env = Env::new();
    env.command_preset("echo", &["sh", "-c", "printf '%s' \"$CORRAL_TASK\"; printf ' %s' \"$MARK\""]);
    let mut cmd = env.command(&["launch", "echo", "-"]);
    cmd.env("MARK", "from-stdin-launcher").stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"a brief\nof two lines").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(env.wait_end(&id)["task"], "a brief\nof two lines");
    let brief = env.project.join("brief.md");
    std::fs::write(&brief, "from a file").unwrap();
    let from_file = env.ok(&["launch", "echo", "--task-file", brief.to_str().unwrap()]).trim().to_string();
    assert_eq!(env.wait_end(&from_file)["task"], "from a file");
    // The same preset, task and environment, as a new run.
    let again = env.ok(&["relaunch", &id]).trim().to_string();
    assert_ne!(again, id);
    let run = env.wait_end(&again);
    assert_eq!(run["task"], "a brief\nof two lines");
    assert_eq!(run["final_text"], "a brief\nof two lines from-stdin-launcher", "the first launcher's environment");

    // --edit: the task as the editor leaves it (an editor with arguments,
    // as EDITOR is often written).
    let edited = env
        .command(&["relaunch", "--edit", &id])
        .env_remove("VISUAL")
        .env("EDITOR", "sed -i -e s/brief/shorter\\ brief/")
        .output()
        .unwrap();
    assert!(edited.status.success(), "{}", String::from_utf8_lossy(&edited.stderr));
    let run = env.wait_end(String::from_utf8(edited.stdout).unwrap().trim());
    assert_eq!(run["task"], "a shorter brief\nof two lines");
    // An editor that fails launches nothing.
    let failed =
        env.command(&["relaunch", "--edit", &id]).env_remove("VISUAL").env("EDITOR", "false").output().unwrap();
    assert_eq!(failed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("nothing launched"), "{failed:?}");
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line_itself() {
    let env = Env::new();
    let bash = env.ok(&["completions", "bash"]);
    assert!(bash.contains("_corral()") && bash.contains("relaunch") && bash.contains("--older-than"), "{bash}");
    for shell in ["zsh", "fish"] {
        assert!(env.ok(&["completions", shell]).contains("prune"), "{shell}");
    }
    let man = env.ok(&["man"]);
    assert!(man.contains(".TH corral 1") && man.contains("pause"), "{man}");
    let out = env.corral(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "an unknown shell is refused");
}

#[test]
fn colour_on_a_terminal_only_and_never_with_no_color() {
    let env = Env::new();
    env.command_preset("ok", &["true"]);
    let id = env.launch("ok", "x");
    env.wait_end(&id);
    // `script` gives the command a terminal of its own.
    let on_terminal = |no_color: bool| {
        let line = format!("'{}' ls", common::corral_bin().display());
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qc", &line, "/dev/null"]).env("CORRAL_HOME", &env.home).env_remove("NO_COLOR");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    assert!(on_terminal(false).contains("\u{1b}[32mcompleted"), "no colour on a terminal");
    assert!(!on_terminal(true).contains('\u{1b}'), "colour despite NO_COLOR");
    assert!(!env.ok(&["ls"]).contains('\u{1b}'), "colour into a pipe");
}

#[test]
fn retention_removes_old_runs_once_a_day_and_gives_the_space_back() {
    let env = Env::new();
    env.command_preset("flood", &[&fake_agent("flood"), "30000"]);
    let ids: Vec<String> = (0..3).map(|i| env.launch("flood", &format!("flood {i}"))).collect();
    for id in &ids {
        assert_eq!(env.wait_end(id)["status"], "completed");
    }
    // Without a rule, prune says how to give one.
    let out = env.corral(&["prune"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[retention] older_than"), "{out:?}");

    env.config("[retention]\nolder_than = \"1ms\"\nstatus = [\"completed\"]\n");
    let mut store = env.store();
    let config = corral::home::config::Config::load(store.home()).unwrap();
    let before = store.database_bytes().unwrap();
    let pruned = corral::upkeep::retention::apply_if_due(&mut store, &config).unwrap().expect("due the first time");
    assert_eq!(pruned.runs, 3);
    let db = pruned.database.expect("space given back");
    assert!(db.after < before / 2, "{before} → {db:?}");
    assert!(!env.run_dir(&ids[0]).exists());
    assert_eq!(env.json(&["ls", "--all"]), serde_json::json!([]));

    // Applied today already: a later run stays until tomorrow.
    let later = env.launch("flood", "later");
    env.wait_end(&later);
    assert!(corral::upkeep::retention::apply_if_due(&mut store, &config).unwrap().is_none());
    assert_eq!(env.json(&["ls", "--all"]).as_array().unwrap().len(), 1);
    // `corral prune` applies the rule now.
    let out = env.ok(&["prune"]);
    assert!(out.contains("removed 1 run(s)") && out.contains("given back"), "{out}");
    // The age as a person says it.
    let out = env.ok(&["prune", "--older-than", "30d", "--dry-run"]);
    assert_eq!(out.trim(), "no ended run is older than 30 days", "{out}");
}

#[test]
fn a_database_made_before_incremental_vacuum_is_converted_by_its_first_removal() {
    let env = Env::new();
    env.command_preset("flood", &[&fake_agent("flood"), "30000"]);
    let id = env.launch("flood", "flood");
    env.wait_end(&id);
    // As an older Corral left it: no auto-vacuum.
    let conn = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    conn.execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;").unwrap();
    assert_eq!(conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0)).unwrap(), 0);
    drop(conn);
    let out = env.ok(&["rm", &id]);
    assert!(out.contains("given back"), "{out}");
    let conn = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    assert_eq!(conn.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0)).unwrap(), 2, "incremental from now on");
}

#[test]
fn tail_json_is_one_object_per_line_and_follow_ends_with_each_run_exiting_as_in_text() {
    let env = Env::new();
    env.command_preset("fail", &[&fake_agent("exit-with"), "3"]);
    let id = env.launch("fail", "t");
    env.wait_end(&id);
    let out = env.corral(&["tail", "--json", "-n", "all", "-f", &id]);
    assert_eq!(out.status.code(), Some(1), "as `wait`: the run failed");
    let lines: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2, "{lines:?}");
    assert_eq!(lines[0]["id"], id.as_str());
    assert_eq!(lines[0]["kind"], "output");
    assert_eq!(lines[0]["text"], "working on: t");
    let end = lines.last().unwrap();
    assert_eq!((end["id"].as_str(), end["status"].as_str()), (Some(id.as_str()), Some("failed")), "{end}");
}

#[test]
fn a_task_never_reaches_the_terminal_as_control_sequences() {
    let env = Env::new();
    env.command_preset("echo", &["sh", "-c", "printf '%s' \"$CORRAL_TASK\""]);
    // Clear the screen, fake a status, write the clipboard (OSC 52).
    let task = "fix it\u{1b}[2J\u{1b}[1;1Hcompleted\u{1b}]52;c;cm0gLXJmIH4=\u{7} [draft]";
    let id = env.launch("echo", task);
    env.wait_end(&id);
    for args in [vec!["ls"], vec!["show", id.as_str()], vec!["tail", id.as_str()]] {
        let shown = env.ok(&args);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{args:?} printed a control sequence: {shown:?}"
        );
        assert!(shown.contains("\\x1b[2J"), "{args:?} hid what the task holds: {shown}");
    }
    // JSON keeps it as it is.
    assert_eq!(env.show(&id)["task"], task);
    // Search names the field that matched, even with `[` in the task.
    let hits = env.json(&["search", "draft"]);
    assert_eq!(hits[0]["field"], "task", "{hits:#}");
    let hits = env.json(&["search", "clipboard-free-final"]);
    assert!(hits.as_array().unwrap().is_empty());
    let id2 = env.launch("echo", "[x] checklist item");
    env.wait_end(&id2);
    env.command_preset("say", &["echo", "unique-final-word"]);
    let id3 = env.launch("say", "[a] task in brackets");
    env.wait_end(&id3);
    let hits = env.json(&["search", "unique-final-word"]);
    let hit = hits.as_array().unwrap().iter().find(|h| h["id"] == id3.as_str() && h["field"] != "transcript");
    assert_eq!(hit.expect("a hit in the run's fields")["field"], "final_text", "{hits:#}");
}

/// One line about a command run says how it came out: the last line of its
/// output, not the first of its last twenty; a failure's reason is the
/// message, not a backtrace's last frame. `wait`, the notifications and a
/// parent's summary of its children all say this line.
#[test]
fn a_command_run_is_summed_up_by_its_last_line_and_a_failure_by_its_message() {
    let env = Env::new();
    env.command_preset("count", &["sh", "-c", "for i in $(seq 22); do echo working $i; done; echo all 22 passed"]);
    env.command_preset(
        "panics",
        &[
            "sh",
            "-c",
            "printf '%s\\n' \"thread 'main' panicked at src/main.rs:2:5:\" 'no config at ~/.app' 'stack backtrace:' \
             '   0: rust_begin_unwind' '  13: <unknown>' 'note: Some details are omitted.' >&2; exit 101",
        ],
    );
    let counted = env.launch("count", "x");
    let panicked = env.launch("panics", "x");
    let waited = env.command(&["wait", &counted, &panicked]).output().unwrap();
    let said = String::from_utf8_lossy(&waited.stdout);
    assert!(said.contains(&format!("{counted}  completed  all 22 passed")), "{said}");
    assert!(said.contains("exited with code 101: no config at ~/.app"), "{said}");
    assert!(!said.contains("<unknown>") && !said.contains("working 3"), "{said}");
}

/// `corral rm` typed right after `corral abort`, while the run's processes
/// are still being stopped, waits for them as a discard does: the run is
/// removed only once none of its processes is left, never its folder (and
/// the log of their end) under them.
#[test]
fn a_run_removed_while_its_processes_stop_is_removed_once_they_are_gone() {
    let env = Env::new();
    env.short_graces("100ms", "500ms");
    env.command_preset("stubborn", &["sh", "-c", "trap '' TERM; echo up; sleep 30"]);
    let id = env.launch("stubborn", "hold on");
    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    assert!(eventually(Duration::from_secs(10), || !processes_of_run(&id).is_empty()));
    env.ok(&["abort", &id]);
    let out = env.corral(&["rm", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(processes_of_run(&id).is_empty(), "the run was removed while its processes lived");
    assert!(!env.run_dir(&id).exists(), "its folder stayed");
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty());
}

/// What a run used is said as measured, or as not measured: never `0 B` of
/// memory for a group the kernel never accounted (cgroup v1 without the
/// run in its memory hierarchy).
#[test]
fn show_never_says_a_run_peaked_at_no_memory() {
    let env = Env::new();
    env.command_preset("work", &["sh", "-c", "head -c 3000000 /dev/zero | wc -c"]);
    let id = env.launch("work", "count");
    env.wait_end(&id);
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains("peak memory"), "{shown}");
    assert!(!shown.contains("peak memory 0 B"), "{shown}");
    assert_ne!(env.show(&id)["resources"]["memory_peak_bytes"], 0, "{:#}", env.show(&id));
}
