//! The truthful lifecycle against real processes: semantic completion while
//! the agent lingers, retries that are not endings, the stop sequence with
//! no survivors, timeouts, recovery after a shepherd is killed, and streams
//! that are huge, garbled or flooding.

mod common;

use std::time::Duration;

use common::{eventually, fake_agent, millis_between, processes_of_run, stream, Env};

#[test]
fn completion_is_committed_at_the_terminal_event_while_the_agent_lingers() {
    let env = Env::new();
    env.short_graces("300ms", "500ms");
    env.agent_preset("pi-linger", "pi", "");
    let id = env.launch_env(
        "pi-linger",
        "settle then linger",
        &[
            ("FAKE_STREAM", &stream("pi-settled.jsonl")),
            ("FAKE_THEN", "linger"),
            ("FAKE_IGNORE_TERM", "1"),
            ("FAKE_GRANDCHILD", "1"),
        ],
    );
    let run = env.wait_run(&id, Duration::from_secs(10), |r| r["status"] != "running" && r["status"] != "starting");
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "All settled.");
    assert_eq!(run["stop_reason"], "end_turn");
    assert!(run["exited_at"].is_null(), "shown completed while its processes still linger");
    assert!(!processes_of_run(&id).is_empty());

    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "cleanup never changes the outcome");
    assert_eq!(run["usage"]["input_tokens"], 10);
    assert_eq!(run["usage"]["cache_read_tokens"], 2);
    assert_eq!(run["cost_usd"], 0.001);
    assert_eq!(run["session_id"], "sess-settled");
    assert_eq!(run["resolved_model"], "claude-sonnet-4-5");
    // It ignored SIGTERM, so only SIGKILL after both graces ended it.
    assert!(millis_between(&run, "completed_at", "exited_at") >= 750, "{run:#}");
    assert!(processes_of_run(&id).is_empty(), "no process of the run survives, setsid grandchild included");
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
    assert!(signals.contains("SIGTERM -> group") && signals.contains("SIGKILL"), "{signals}");
}

#[test]
fn pi_auto_retry_then_success_completes_with_the_retried_answer() {
    let env = Env::new();
    env.agent_preset("pi", "pi", "model: claude-sonnet-4-5\ntools: read, bash\n");
    let args_file = env.project.join("args");
    let id = env.launch_env(
        "pi",
        "retry please",
        &[("FAKE_STREAM", &stream("pi-retry-then-success.jsonl")), ("FAKE_ARGS", args_file.to_str().unwrap())],
    );
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "Recovered answer.");
    let transcript = env.ok(&["tail", "-n", "all", &id]);
    assert!(transcript.contains("[retry] retry 1/3"), "{transcript}");

    let args = std::fs::read_to_string(args_file).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let session = env.run_dir(&id).join("agent/session.jsonl");
    let prompt = env.run_dir(&id).join("system-prompt.md");
    assert_eq!(
        args,
        [
            "--mode",
            "json",
            "--session",
            session.to_str().unwrap(),
            "--model",
            "claude-sonnet-4-5",
            "--tools",
            "read,bash",
            "--append-system-prompt",
            prompt.to_str().unwrap(),
        ]
    );
    let stdin = std::fs::read_to_string(env.project.join("args.stdin")).unwrap();
    assert_eq!(stdin, "retry please", "pi reads its task on stdin, where no option can take it");
    assert_eq!(std::fs::read_to_string(prompt).unwrap(), "Be brief.");
}

#[test]
fn pi_failure_with_exit_code_0_is_failed() {
    let env = Env::new();
    env.agent_preset("pi", "pi", "");
    let id = env.launch_env("pi", "fail", &[("FAKE_STREAM", &stream("pi-0.73-http500-auto-retry-exhausted.jsonl"))]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["stop_reason"], "api_error");
    assert_eq!(run["exit_code"], 0);
    assert!(run["error"].as_str().unwrap().contains("stub internal error"));
}

#[test]
fn claude_is_error_and_codex_transient_errors_end_as_their_streams_say() {
    let env = Env::new();
    env.agent_preset("claude", "claude", "");
    env.agent_preset("codex", "codex", "");
    let claude = env.launch_env(
        "claude",
        "x",
        &[("FAKE_STREAM", &stream("claude-2.1-http500-is-error.jsonl")), ("FAKE_THEN", "exit 1")],
    );
    let codex = env.launch_env("codex", "y", &[("FAKE_STREAM", &stream("codex-transient-then-success.jsonl"))]);
    let claude = env.wait_end(&claude);
    assert_eq!((claude["status"].as_str(), claude["stop_reason"].as_str()), (Some("failed"), Some("api_error")));
    assert!(claude["error"].as_str().unwrap().starts_with("API Error: 500"));
    let codex = env.wait_end(&codex);
    assert_eq!(codex["status"], "completed", "{codex:#}");
    assert_eq!(codex["final_text"], "Done after reconnecting.");
    assert_eq!(codex["usage"]["input_tokens"], 60);
    assert_eq!(codex["usage"]["cache_read_tokens"], 40);
}

#[test]
fn abort_of_an_agent_that_ignores_sigterm_leaves_zero_survivors() {
    let env = Env::new();
    env.short_graces("300ms", "400ms");
    env.agent_preset("claude", "claude", "");
    let id = env.launch_env(
        "claude",
        "hang",
        &[
            ("FAKE_STREAM", &stream("claude-2.1-http401-retrying-killed.jsonl")),
            ("FAKE_THEN", "linger"),
            ("FAKE_IGNORE_TERM", "1"),
            ("FAKE_GRANDCHILD", "1"),
        ],
    );
    env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    assert!(
        eventually(Duration::from_secs(5), || processes_of_run(&id).len() >= 3),
        "agent, its sleep, the setsid grandchild"
    );
    let out = env.ok(&["abort", &id]);
    assert_eq!(out.trim(), format!("{id}  aborted"));
    let run = env.wait_end(&id);
    assert_eq!((run["status"].as_str(), run["stop_reason"].as_str()), (Some("aborted"), Some("user_abort")));
    assert!(processes_of_run(&id).is_empty(), "zero survivors");
    assert!(!run["abort_requested_at"].is_null());
    // Its signals, after what the run did before them.
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
    let started = signals.find("agent started").unwrap_or(usize::MAX);
    let signalled = signals.find("SIGTERM -> group").unwrap_or(0);
    assert!(started < signalled, "{signals}");
}

/// A run whose agent ends by itself, leaving nothing to stop, has no
/// `signals.log`: Corral sent it no signal. A command reads its task from
/// `CORRAL_TASK_FILE`; an agent Corral knows is given it as its CLI takes
/// it, and gets no file it would never read.
#[test]
fn a_run_folder_holds_only_what_its_run_needs() {
    let env = Env::new();
    env.command_preset("quick", &["sh", "-c", "cat \"$CORRAL_TASK_FILE\""]);
    env.agent_preset("claude", "claude", "");
    let command = env.launch("quick", "the task, whole");
    let claude = env.launch_env("claude", "x", &[("FAKE_STREAM", &stream("claude-2.1-read-tool-success.jsonl"))]);
    for id in [&command, &claude] {
        let run = env.wait_run(id, Duration::from_secs(10), |r| !r["exited_at"].is_null());
        assert_eq!(run["status"], "completed", "{run:#}");
        let signals = env.run_dir(id).join("signals.log");
        assert!(!signals.exists(), "{:?}", std::fs::read_to_string(signals));
    }
    assert!(env.ok(&["tail", "-n", "all", &command]).contains("the task, whole"));
    assert!(!env.run_dir(&claude).join("task.txt").exists(), "a task file no agent reads");
}

#[test]
fn codex_is_interrupted_with_sigint_first() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    env.agent_preset("codex", "codex", "");
    let id = env.launch_env(
        "codex",
        "hang",
        &[("FAKE_STREAM", &stream("codex-0.169-plain-answer-success.jsonl")), ("FAKE_THEN", "linger")],
    );
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap();
    assert!(signals.contains("SIGINT -> group"), "{signals}");
}

#[test]
fn idle_timeout_stops_a_silent_agent_but_not_a_slow_one_or_a_long_tool_call() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    let never = env.project.join("never");
    env.command_preset_with("silent", &[&fake_agent("slow"), never.to_str().unwrap()], "idle_timeout: 700ms\n");
    env.command_preset_with("ticking", &[&fake_agent("ticker"), "8", "0.2"], "idle_timeout: 700ms\n");
    env.agent_preset("pi-tool", "pi", "idle_timeout: 700ms\n");
    let silent = env.launch("silent", "say one thing then nothing");
    let ticking = env.launch("ticking", "slow but alive");
    let tool = env.launch_env("pi-tool", "long tool call", &[("FAKE_STREAM", &stream("pi-slow-tool.jsonl"))]);

    let silent = env.wait_end(&silent);
    assert_eq!((silent["status"].as_str(), silent["stop_reason"].as_str()), (Some("failed"), Some("idle")));
    assert!(silent["error"].as_str().unwrap().contains("no output for 700ms"));
    let ticking = env.wait_end(&ticking);
    assert_eq!(ticking["status"], "completed", "{ticking:#}");
    let tool = env.wait_end(&tool);
    assert_eq!(tool["status"], "completed", "a 1.5 s tool call is not idleness: {tool:#}");
    assert_eq!(tool["final_text"], "Built.");
}

#[test]
fn wall_clock_and_startup_timeouts_fail_the_run_with_their_reason() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    env.command_preset_with("long", &[&fake_agent("ticker"), "100", "0.1"], "timeout: 600ms\n");
    env.agent_preset("mute", "pi", "startup_timeout: 500ms\n");
    let long = env.launch("long", "too long");
    let mute = env.launch_env("mute", "say nothing", &[("FAKE_STREAM", "/dev/null"), ("FAKE_THEN", "linger")]);
    let long = env.wait_end(&long);
    assert_eq!((long["status"].as_str(), long["stop_reason"].as_str()), (Some("failed"), Some("timeout")));
    let mute = env.wait_end(&mute);
    assert_eq!(
        (mute["status"].as_str(), mute["stop_reason"].as_str()),
        (Some("failed"), Some("startup_timeout")),
        "{mute:#}"
    );
    assert!(processes_of_run(mute["id"].as_str().unwrap()).is_empty());
}

#[test]
fn a_killed_shepherd_takes_its_agent_down_and_the_run_becomes_lost() {
    let env = Env::new();
    env.agent_preset("pi", "pi", "");
    let id = env.launch_env(
        "pi",
        "orphan me",
        &[("FAKE_STREAM", "/dev/null"), ("FAKE_THEN", "linger"), ("FAKE_GRANDCHILD", "1")],
    );
    let run = env.wait_run(&id, Duration::from_secs(10), |r| r["status"] == "running");
    assert!(eventually(Duration::from_secs(5), || processes_of_run(&id).len() >= 3));
    let shepherd = run["shepherd_pid"].as_i64().unwrap() as i32;
    let agent = run["agent_pid"].as_i64().unwrap() as i32;
    unsafe { libc::kill(shepherd, libc::SIGKILL) };
    assert!(eventually(Duration::from_secs(5), || !common::alive(agent)), "PDEATHSIG took the agent down");

    let table = env.ok(&["ls"]);
    assert!(table.contains("lost"), "{table}");
    let run = env.show(&id);
    assert_eq!((run["status"].as_str(), run["stop_reason"].as_str()), (Some("lost"), Some("shepherd_died")));
    assert!(
        eventually(Duration::from_secs(5), || processes_of_run(&id).is_empty()),
        "survivors killed: {:?}",
        processes_of_run(&id)
    );
    // And said where the run's signals are, as its shepherd would have.
    let signals = std::fs::read_to_string(env.run_dir(&id).join("signals.log")).unwrap_or_default();
    assert!(signals.contains("its shepherd is gone: SIGKILL -> "), "{signals:?}");
}

#[test]
fn a_50_mb_line_is_bounded_and_an_oversized_terminal_event_still_ends_the_run() {
    let env = Env::new();
    env.config("[transcripts]\nraw_logs = \"1M\"\n");
    // Run big-line as pi.
    env.use_fake("pi", "big-line");
    env.agent_preset("pi", "pi", "");
    let id = env.launch("pi", "huge");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "read the big file");
    // The raw log keeps its first MiB and says how much more there was.
    let log = std::fs::read(env.run_dir(&id).join("stdout.log")).unwrap();
    assert!(log.len() < (1 << 20) + 200, "the raw log is bounded: {}", log.len());
    let end = String::from_utf8_lossy(&log[log.len() - 150..]).to_string();
    assert!(end.contains("MiB more of this stream not kept here"), "{end}");
    let transcript = env.ok(&["tail", "-n", "all", &id]);
    assert!(transcript.contains("`message_update` event of 52428882 bytes was too long"), "{transcript}");
    assert!(transcript.contains("`agent_end` event of"), "{transcript}");
}

#[test]
fn binary_garbage_before_the_result_is_kept_as_text_and_the_run_completes() {
    let env = Env::new();
    env.use_fake("claude", "garbage");
    env.agent_preset("claude", "claude", "");
    let id = env.launch("claude", "noise");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "survived the noise");
    assert_eq!(run["cost_usd"], 0.01);
}

#[test]
fn a_transcript_past_its_cap_is_counted_and_said_and_the_run_still_completes() {
    let env = Env::new();
    env.config("[transcripts]\nmax = \"100K\"\nraw_logs = \"4K\"\n");
    env.command_preset("flood", &[&fake_agent("flood"), "50000"]);
    let id = env.launch("flood", "flood");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let size = &run["transcript"];
    let kept = size["bytes"].as_u64().unwrap();
    assert!(kept <= 100 << 10 && kept > 90 << 10, "{size}");
    // "line 1" .. "line 50000" joined by newlines in events of a bounded
    // size: 538,893 bytes; what is not kept is counted, to the byte (the
    // cap's note of ~170 bytes aside).
    let dropped = size["dropped_events"].as_u64().unwrap();
    assert!(dropped > 0, "{size}");
    let note = (kept + size["dropped_bytes"].as_u64().unwrap()).checked_sub(538_893);
    assert!(note.is_some_and(|n| (100..300).contains(&n)), "{size}");
    let tail = env.ok(&["tail", "-n", "2", &id]);
    assert!(tail.contains("the transcript reached its cap of 100.0 KiB"), "{tail}");
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains(&format!("{dropped} later events")), "{shown}");
    let log = std::fs::read_to_string(env.run_dir(&id).join("stdout.log")).unwrap();
    assert!(
        log.starts_with("line 1\nline 2\n")
            && log.ends_with("of this stream not kept here; the transcript is in the store: corral tail]\n"),
        "{log}"
    );
}

#[test]
fn a_flood_of_200k_lines_is_all_accounted_for() {
    let env = Env::new();
    env.command_preset("flood", &[&fake_agent("flood"), "200000"]);
    let id = env.launch("flood", "flood");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    let transcript = env.ok(&["tail", "-n", "all", &id]);
    let lines: Vec<&str> = transcript.lines().collect();
    assert_eq!(lines.len(), 200_000);
    assert_eq!(lines[0], "line 1");
    assert_eq!(lines[199_999], "line 200000");

    env.use_fake("pi", "flood");
    env.agent_preset("pi-flood", "pi", "");
    let id = env.launch_env("pi-flood", "flood", &[("FLOOD_LINES", "200000"), ("FLOOD_FORMAT", "pi")]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "flood done");
    // Read whole, kept once: the transcript, not a second raw copy.
    let shown = env.show(&id);
    assert!(shown["transcript"]["bytes"].as_u64().unwrap() > 0, "{shown:#}");
    assert_eq!(shown["transcript"]["dropped_events"], 0);
    assert!(!env.run_dir(&id).join("stdout.log").exists(), "no raw copy unless `raw_logs` asks");
}

#[test]
fn the_first_terminal_event_decides_and_later_output_is_still_kept() {
    let env = Env::new();
    env.agent_preset("claude", "claude", "");
    let id = env.launch_env("claude", "two results", &[("FAKE_STREAM", &stream("claude-two-results.jsonl"))]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "first answer");
    assert_eq!(run["cost_usd"], 0.002);
    // Output after the end (a line, garbage, more results) is transcript,
    // never a second outcome.
    let transcript = env.ok(&["tail", "-n", "all", &id]);
    assert!(transcript.contains("talking after the end"), "{transcript}");
    assert!(transcript.contains("not json after the end"), "{transcript}");
    assert_eq!(env.show(&id)["status"], "completed");
}

#[test]
fn a_cost_the_agent_does_not_report_is_estimated_and_marked() {
    let env = Env::new();
    env.agent_preset("cx", "codex", "model: gpt-5-codex\n");
    let id = env.launch_env("cx", "answer", &[("FAKE_STREAM", &stream("codex-0.169-plain-answer-success.jsonl"))]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["cost_estimated"], true, "{run:#}");
    let cost = run["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0 && cost < 0.01, "{run:#}");
    assert!(env.ok(&["show", &id]).contains("≈$"), "marked as an estimate");

    // A model the table does not know gets no made-up cost.
    env.agent_preset("cy", "codex", "model: stub-model\n");
    let id = env.launch_env("cy", "answer", &[("FAKE_STREAM", &stream("codex-0.169-plain-answer-success.jsonl"))]);
    let run = env.wait_end(&id);
    assert!(run["cost_usd"].is_null() && run["cost_estimated"] == false, "{run:#}");
}

#[test]
fn a_run_retrying_a_failing_call_says_so_until_it_works_or_ends() {
    let env = Env::new();
    env.config("");
    env.agent_preset("c", "claude", "");
    let vars = [("FAKE_STREAM", stream("claude-2.1-http401-retrying-killed.jsonl")), ("FAKE_THEN", "linger".into())];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let id = env.launch_env("c", "x", &vars);
    let run = env.wait_run(&id, Duration::from_secs(20), |r| r["retrying"].is_string());
    let retrying = run["retrying"].as_str().unwrap();
    assert!(retrying.starts_with("authentication_failed 401 ("), "{retrying}");
    assert_eq!(run["status"], "running", "retrying is not an ending");
    assert!(env.ok(&["ls"]).contains("running (retrying: authentication_failed 401"), "ls says so");
    let needs = env.ok(&["needs"]);
    assert!(needs.contains(&id) && needs.contains("retrying"), "the tray's look changes: {needs}");
    env.ok(&["abort", &id]);
    let run = env.wait_end(&id);
    assert!(run["retrying"].is_null(), "an ended run is not retrying: {run:#}");
    assert!(!env.ok(&["needs"]).contains(&id), "an aborted run needs nothing: the user did it");
}

/// A wait on several runs says each as the store has it when the last one
/// ends: one that ended before is not said as it was at its end (told by
/// the ends written beside the runs, a wait must not take an old one's).
#[test]
fn a_wait_on_runs_that_end_apart_says_the_first_as_it_is_now() {
    let env = Env::new();
    env.config("");
    env.command_preset("quick", &["true"]);
    let hold = env.project.join("hold");
    env.command_preset("held", &["sh", "-c", &format!("while [ ! -f {} ]; do sleep 0.02; done", hold.display())]);
    let first = env.launch("quick", "x");
    env.wait_end(&first);
    let second = env.launch("held", "y");
    let waiter =
        env.command(&["wait", &first, &second, "--json"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    env.wait_run(&second, Duration::from_secs(10), |r| r["status"] == "running");
    std::fs::write(&hold, "").unwrap();
    let out = waiter.wait_with_output().unwrap();
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(said[0]["exited_at"].is_string(), "the first run as it is now: {:#}", said[0]);
    assert_eq!(said[1]["status"], "completed");
}

/// The program process `pid` runs now, as the kernel names it.
fn program_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

/// A person's `corral wait` with nothing left but its runs' ends to be told
/// of sleeps in the small `corral-wake`, and says them, and exits, as a wait
/// awake does: line by line or as JSON, 0 when all completed, 1 otherwise.
#[test]
fn a_wait_asleep_says_its_runs_as_a_wait_awake_does() {
    let env = Env::new();
    env.config("");
    let hold = env.project.join("hold");
    let until_held = format!("while [ ! -f {} ]; do sleep 0.02; done", hold.display());
    env.command_preset("held", &["sh", "-c", &format!("{until_held}; echo all done")]);
    env.command_preset("fails", &["sh", "-c", &format!("{until_held}; echo it broke; exit 3")]);
    let good = env.launch("held", "x");
    let bad = env.launch("fails", "y");
    for id in [&good, &bad] {
        env.wait_run(id, Duration::from_secs(10), |r| r["status"] == "running");
    }
    let piped = |args: &[&str]| env.command(args).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let lines = piped(&["wait", &good]);
    let both = piped(&["wait", &good, &bad, "--json"]);
    for waiter in [&lines, &both] {
        let asleep = eventually(Duration::from_secs(10), || program_of(waiter.id()) == "corral-wake");
        assert!(asleep, "the wait sleeps in corral-wake, not in {}", program_of(waiter.id()));
    }
    std::fs::write(&hold, "").unwrap();
    let (lines, both) = (lines.wait_with_output().unwrap(), both.wait_with_output().unwrap());
    // A wait started now finds them ended at its first look: it stays awake.
    let awake_lines = env.corral(&["wait", &good]);
    let awake_both = env.corral(&["wait", &good, &bad, "--json"]);
    assert_eq!(String::from_utf8_lossy(&lines.stdout), String::from_utf8_lossy(&awake_lines.stdout));
    assert_eq!(String::from_utf8_lossy(&lines.stdout), format!("{good}  completed  all done\n"));
    assert_eq!((lines.status.code(), awake_lines.status.code()), (Some(0), Some(0)));
    let asleep_said: serde_json::Value = serde_json::from_slice(&both.stdout).unwrap();
    let awake_said: serde_json::Value = serde_json::from_slice(&awake_both.stdout).unwrap();
    for (asleep, awake) in asleep_said.as_array().unwrap().iter().zip(awake_said.as_array().unwrap()) {
        for field in ["id", "status", "stop_reason", "exit_code", "final_text", "completed_at"] {
            assert_eq!(asleep[field], awake[field], "{field} of {}", awake["id"]);
        }
    }
    assert_eq!(asleep_said[1]["status"], "failed", "{asleep_said:#}");
    assert_eq!((both.status.code(), awake_both.status.code()), (Some(1), Some(1)));
}

/// A wait asleep whose run's shepherd dies, or whose time is up, goes back
/// to being `corral wait`: the run is said lost at once, and a timeout
/// exits 124 as it says.
#[test]
fn a_wait_asleep_is_awake_again_for_a_dead_shepherd_and_for_its_timeout() {
    let env = Env::new();
    env.config("");
    env.command_preset("held", &["sh", "-c", "sleep 300 & wait"]);
    let lost = env.launch("held", "x");
    let timed = env.launch("held", "y");
    for id in [&lost, &timed] {
        env.wait_run(id, Duration::from_secs(10), |r| r["status"] == "running");
    }
    let piped = |args: &[&str]| env.command(args).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let on_lost = piped(&["wait", &lost]);
    let on_timed = piped(&["wait", &timed, "--timeout", "2"]);
    for waiter in [&on_lost, &on_timed] {
        let asleep = eventually(Duration::from_secs(10), || program_of(waiter.id()) == "corral-wake");
        assert!(asleep, "the wait sleeps in corral-wake, not in {}", program_of(waiter.id()));
    }
    let shepherd = env.show(&lost)["shepherd_pid"].as_i64().unwrap() as i32;
    common::signal_pid(shepherd, corral::process::Sig::Kill).unwrap();
    let said = on_lost.wait_with_output().unwrap();
    assert_eq!(said.status.code(), Some(1));
    let line = String::from_utf8_lossy(&said.stdout);
    assert!(line.starts_with(&format!("{lost}  lost (shepherd_died)")), "{line}");
    assert!(processes_of_run(&lost).is_empty(), "nothing of the lost run is left running");
    let said = on_timed.wait_with_output().unwrap();
    assert_eq!(said.status.code(), Some(124));
    let text = String::from_utf8_lossy(&said.stdout);
    assert_eq!(text, format!("{timed}  running  \ntimed out with 1 run(s) still active\n"));
    env.ok(&["abort", &timed]);
}

/// A wait asleep on several runs sleeps on past the first one's end, its
/// shepherd gone after it (only a shepherd gone without its run's end
/// wakes it), and says both once the last ends.
#[test]
fn a_wait_asleep_on_several_runs_sleeps_on_past_the_first_end() {
    let env = Env::new();
    env.config("");
    let gate = "while [ ! -f \"$CORRAL_TASK\" ]; do sleep 0.02; done; echo passed";
    env.command_preset("gate", &["sh", "-c", gate]);
    let (first_gate, last_gate) = (env.project.join("first"), env.project.join("last"));
    let first = env.launch("gate", &first_gate.display().to_string());
    let last = env.launch("gate", &last_gate.display().to_string());
    for id in [&first, &last] {
        env.wait_run(id, Duration::from_secs(10), |r| r["status"] == "running");
    }
    let waiter = env.command(&["wait", &first, &last]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    assert!(eventually(Duration::from_secs(10), || program_of(waiter.id()) == "corral-wake"));
    let shepherd = env.show(&first)["shepherd_pid"].as_i64().unwrap() as i32;
    std::fs::write(&first_gate, "").unwrap();
    env.wait_end(&first);
    assert!(eventually(Duration::from_secs(10), || !common::alive(shepherd)), "the first run's shepherd exits");
    // Told of that exit, it reads the first run's end and sleeps on.
    let asleep = (0..20).all(|_| {
        std::thread::sleep(Duration::from_millis(10));
        program_of(waiter.id()) == "corral-wake"
    });
    assert!(asleep, "the wait woke for a shepherd that exited after its run's end: {}", program_of(waiter.id()));
    std::fs::write(&last_gate, "").unwrap();
    let said = waiter.wait_with_output().unwrap();
    assert_eq!(said.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&said.stdout),
        format!("{first}  completed  passed\n{last}  completed  passed\n")
    );
}
