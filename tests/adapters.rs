//! Every real capture in `tests/captures/` (copied from the shared agent
//! captures) read through its adapter exactly as the shepherd reads it: line
//! by line, then the settle window or the process's end. Each must yield the
//! outcome its README table states.

use std::path::Path;

use corral::adapter::{for_agent, Adapter, AgentKind, EventKind, ProcessEnd, StreamLine, TranscriptEvent, Verdict};
use corral::{RunStatus, StopReason};
use serde_json::Value;

fn capture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Replay {
    adapter: Box<dyn Adapter>,
    events: Vec<TranscriptEvent>,
    /// (line number, verdict) of the terminal event, if one was seen.
    terminal: Option<(usize, Verdict)>,
    /// Lines after which the adapter was holding a possible end.
    settling_after: Vec<usize>,
}

/// Feeds a capture line by line, as the shepherd does.
fn replay(agent: AgentKind, name: &str) -> Replay {
    let mut adapter = for_agent(agent);
    let mut events = Vec::new();
    let mut terminal = None;
    let mut settling_after = Vec::new();
    for (index, line) in capture(name).split('\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let verdict = adapter.read_line(StreamLine { bytes: line.as_bytes(), dropped: 0 }, &mut events);
        if let Some(v) = verdict {
            assert!(terminal.is_none(), "{name}: a second terminal event at line {}", index + 1);
            terminal = Some((index + 1, v));
        }
        if adapter.settling().is_some() {
            settling_after.push(index + 1);
        }
    }
    adapter.flush(&mut events);
    Replay { adapter, events, terminal, settling_after }
}

/// The verdict the shepherd reaches: the terminal event's, else the settled
/// possible end, else the process's end (`exit`).
fn outcome(r: &mut Replay, exit: ProcessEnd) -> Verdict {
    if let Some((_, v)) = &r.terminal {
        return v.clone();
    }
    if r.adapter.settling().is_some() {
        return r.adapter.settle().expect("settling means a verdict is held");
    }
    r.adapter.verdict_on_exit(exit, "")
}

fn has(events: &[TranscriptEvent], kind: EventKind, needle: &str) -> bool {
    events.iter().any(|e| e.kind == kind && e.text.contains(needle))
}

#[test]
fn pi_read_tool_success() {
    let mut r = replay(AgentKind::Pi, "pi-0.73-read-tool-success.jsonl");
    // pi 0.73 has no agent_settled: the final agent_end is a possible end
    // that silence (or the exit) confirms.
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Completed, StopReason::EndTurn));
    let report = r.adapter.report();
    assert_eq!(report.final_text.as_deref(), Some("Done: the file says hello."));
    assert_eq!(report.resolved_model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(report.session_id.as_deref(), Some("01a202c4-ba2e-72be-8858-99a55dafc7b5"));

    // Usage: the sum over every assistant message_end, computed here apart.
    let (mut input, mut output, mut cost) = (0, 0, 0.0);
    for line in capture("pi-0.73-read-tool-success.jsonl").lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "message_end" && v["message"]["role"] == "assistant" {
            input += v["message"]["usage"]["input"].as_u64().unwrap();
            output += v["message"]["usage"]["output"].as_u64().unwrap();
            cost += v["message"]["usage"]["cost"]["total"].as_f64().unwrap();
        }
    }
    assert_eq!(report.usage.input_tokens, input);
    assert_eq!(report.usage.output_tokens, output);
    assert!((report.cost_usd.unwrap() - cost).abs() < 1e-12);

    assert!(has(&r.events, EventKind::ToolCall, "Read"));
    let result = r.events.iter().find(|e| e.kind == EventKind::ToolResult).unwrap();
    assert_eq!(result.text, "Tool Read not found");
    assert_eq!(result.json.as_ref().unwrap()["is_error"], true, "the tool failed inside");
    assert!(has(&r.events, EventKind::Text, "Done: the file says hello."));
}

#[test]
fn pi_auto_retry_exhausted_fails_despite_exit_code_0() {
    let mut r = replay(AgentKind::Pi, "pi-0.73-http500-auto-retry-exhausted.jsonl");
    let line_count = capture("pi-0.73-http500-auto-retry-exhausted.jsonl").lines().count();
    let (line, _) = r.terminal.clone().expect("auto_retry_end{success:false} is terminal");
    assert_eq!(line, line_count, "only the last line ends the run; the three retried agent_ends do not");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Failed, StopReason::ApiError));
    assert_eq!(
        v.error.as_deref(),
        Some("500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"stub internal error\"}}")
    );
    assert_eq!(r.events.iter().filter(|e| e.kind == EventKind::Retry).count(), 3);
    // Each agent_end was held only until the retry line right after it.
    let text = capture("pi-0.73-http500-auto-retry-exhausted.jsonl");
    assert_eq!(r.settling_after.len(), 4);
    for held in &r.settling_after {
        let next: Value = serde_json::from_str(text.lines().nth(*held).unwrap()).unwrap();
        assert!(next["type"].as_str().unwrap().starts_with("auto_retry_"), "after line {held}: {next}");
    }
}

#[test]
fn claude_permission_denials_are_kept_and_said() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-permission-denied.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Completed, "a denial is not a failure");
    assert_eq!(r.adapter.report().denied, ["Bash(touch /tmp/corral-denied-probe)"]);
    assert!(r.events.iter().any(|e| e.text == "1 action was denied: Bash(touch /tmp/corral-denied-probe)"));
    let clean = replay(AgentKind::Claude, "claude-2.1-read-tool-success.jsonl");
    assert!(clean.adapter.report().denied.is_empty());
}

#[test]
fn claude_read_tool_success() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-read-tool-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Completed, StopReason::EndTurn));
    let report = r.adapter.report();
    assert_eq!(report.final_text.as_deref(), Some("Done: the file says hello."));
    assert_eq!(report.cost_usd, Some(0.000642));
    assert_eq!(report.session_id.as_deref(), Some("06a8bcda-7138-4c01-ae59-e7eb5c07b2cc"));
    assert_eq!(report.resolved_model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!((report.usage.input_tokens, report.usage.output_tokens), (24, 38));
    let result = r.events.iter().find(|e| e.kind == EventKind::ToolResult).unwrap();
    assert!(result.text.contains("InputValidationError"));
    assert_eq!(result.json.as_ref().unwrap()["name"], "Read");
}

#[test]
fn claude_spend_is_counted_message_by_message_before_the_result() {
    // What a budget sees live: each model message once (its two content
    // blocks are two events), before the result's totals replace it.
    let text = capture("claude-2.1-read-tool-success.jsonl");
    let before_result: Vec<&str> = text.lines().take_while(|l| !l.contains(r#""type":"result""#)).collect();
    let mut adapter = for_agent(AgentKind::Claude);
    let mut events = Vec::new();
    for line in &before_result {
        assert!(adapter.read_line(StreamLine { bytes: line.as_bytes(), dropped: 0 }, &mut events).is_none());
    }
    let live = adapter.report().usage;
    assert_eq!((live.input_tokens, live.output_tokens), (24, 2), "two messages of 12 input tokens each");
    assert_eq!(adapter.report().resolved_model.as_deref(), Some("claude-sonnet-4-5"));
}

#[test]
fn claude_partial_messages_success_takes_the_result_text() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-partial-messages-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Completed);
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("Done: the file says hello."));
    // Token deltas are not transcript rows.
    assert_eq!(r.events.iter().filter(|e| e.kind == EventKind::Text).count(), 1);
}

#[test]
fn claude_is_error_fails_even_with_subtype_success() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-http500-is-error.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Failed, StopReason::ApiError));
    assert!(v.error.unwrap().starts_with("API Error: 500 stub internal error."));
}

#[test]
fn claude_max_turns_fails_with_its_reason() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-error-max-turns.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Failed, StopReason::MaxTurns));
    assert_eq!(v.error.as_deref(), Some("Reached maximum number of turns (1)"));
    assert_eq!(r.adapter.report().cost_usd, Some(0.000486));
}

#[test]
fn claude_retrying_then_killed_has_no_terminal_event() {
    let mut r = replay(AgentKind::Claude, "claude-2.1-http401-retrying-killed.jsonl");
    assert!(r.terminal.is_none(), "api_retry lines are progress, not an end");
    assert_eq!(r.events.iter().filter(|e| e.kind == EventKind::Retry).count(), 7);
    // Died by itself: failed, from how the process ended.
    let v = outcome(&mut r, ProcessEnd::Signaled(15));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Failed, StopReason::Signal));
    assert!(v.error.unwrap().contains("401 authentication_failed"), "says what it was retrying");
}

#[test]
fn usage_limits_are_recognised_in_codex_and_claude_codes_own_words() {
    use chrono::TimeZone;
    let now = chrono::Local.with_ymd_and_hms(2026, 11, 25, 15, 10, 0).unwrap();
    let mut r = replay(AgentKind::Codex, "codex-0.169-usage-limit.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert_eq!(v.status, RunStatus::Failed);
    let limit = corral::cost::usage_limit::recognise(&v, now).expect("Codex's usage limit");
    assert_eq!(limit.resets_at.unwrap().format("%H:%M").to_string(), "17:40", "try again at 5:40 PM");

    let mut r = replay(AgentKind::Claude, "claude-2.1-rate-limit-429.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert_eq!(v.status, RunStatus::Failed);
    let limit = corral::cost::usage_limit::recognise(&v, now).expect("Claude Code's rate limit");
    assert_eq!(limit.resets_at, None, "no reset time said");
    assert!(r.adapter.report().session_id.is_some(), "its session can go on");

    // A failure that is not a limit is not taken for one.
    let mut r = replay(AgentKind::Claude, "claude-2.1-http500-is-error.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert!(corral::cost::usage_limit::recognise(&v, now).is_none(), "{v:?}");
}

#[test]
fn codex_plain_answer_success() {
    let mut r = replay(AgentKind::Codex, "codex-0.169-plain-answer-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!((v.status, v.stop_reason), (RunStatus::Completed, StopReason::EndTurn));
    let report = r.adapter.report();
    assert_eq!(report.final_text.as_deref(), Some("All done: hello."));
    assert_eq!(report.session_id.as_deref(), Some("01a202c3-7415-7160-ae5b-c401e49912ca"));
    let u = report.usage;
    assert_eq!((u.input_tokens, u.cache_read_tokens, u.output_tokens), (180, 120, 60));
}

#[test]
fn codex_shell_command_is_in_the_transcript() {
    let mut r = replay(AgentKind::Codex, "codex-0.169-shell-command-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Completed);
    assert!(has(&r.events, EventKind::ToolCall, "echo hello > out.txt && cat out.txt"));
    assert!(has(&r.events, EventKind::ToolResult, "hello\n"));
    assert!(has(&r.events, EventKind::Thinking, "Planning the shell call"));
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("All done: hello."));
}

#[test]
fn codex_transient_errors_then_turn_failed() {
    let mut r = replay(AgentKind::Codex, "codex-0.169-transient-errors-turn-failed.jsonl");
    let (line, _) = r.terminal.clone().unwrap();
    assert_eq!(line, 5, "the two top-level errors are not terminal");
    let v = outcome(&mut r, ProcessEnd::Exited(1));
    assert_eq!(v.status, RunStatus::Failed);
    assert_eq!(v.error.as_deref(), Some("We’re currently experiencing high demand, which may cause temporary errors."));
    assert_eq!(r.events.iter().filter(|e| e.kind == EventKind::Retry).count(), 2);
}

#[test]
fn unknown_events_and_garbage_are_kept_as_transcript() {
    for agent in [AgentKind::Pi, AgentKind::Claude, AgentKind::Codex, AgentKind::Gemini, AgentKind::Opencode] {
        let mut adapter = for_agent(agent);
        let mut events = Vec::new();
        let lines: [&[u8]; 6] = [
            b"{\"type\":\"brand_new_event\",\"x\":1}",
            b"\xff\xfe garbage \x00 bytes",
            b"{\"type\": 5}",
            b"[\"an\",\"array\"]",
            b"{\"deep\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
            b"{\"type\":\"result\"",
        ];
        for bytes in lines {
            let verdict = adapter.read_line(StreamLine { bytes, dropped: 0 }, &mut events);
            assert!(verdict.is_none(), "{agent}: {:?} is not a terminal event", String::from_utf8_lossy(bytes));
        }
        adapter.flush(&mut events);
        assert!(events.len() >= 5, "{agent}: every line kept: {events:#?}");
        assert!(events.iter().any(|e| e.text.contains("garbage")));
    }
}

#[test]
fn an_oversized_terminal_event_is_still_recognized() {
    // pi's agent_end carries every message and can be megabytes: the
    // shepherd hands over only its head.
    let mut pi = for_agent(AgentKind::Pi);
    let mut events = Vec::new();
    let head = br#"{"type":"agent_settled","messages":[{"role":"assistant","content":"xxxxxxxx"#;
    let verdict = pi.read_line(StreamLine { bytes: head, dropped: 50 << 20 }, &mut events);
    assert_eq!(verdict.map(|v| v.status), Some(RunStatus::Completed));
    assert!(events[0].text.contains("agent_settled") && events[0].text.contains("too long"));

    let mut claude = for_agent(AgentKind::Claude);
    let verdict = claude
        .read_line(StreamLine { bytes: br#"{"type":"result","subtype":"success""#, dropped: 9 << 20 }, &mut events);
    assert!(verdict.is_some());
}

fn ctx(p: &corral::Preset) -> corral::adapter::InvocationContext<'_> {
    corral::adapter::InvocationContext {
        preset: p,
        task: "results of the children",
        model: Some("m1"),
        run_dir: "/runs/r1".into(),
        system_prompt_file: Some("/runs/r1/system-prompt.md".into()),
        allowed: &[],
    }
}

#[test]
fn continuation_turns_resume_the_same_session() {
    use corral::preset::{parse_preset, PresetSource};
    let preset = |agent: &str| {
        let text =
            format!("---\nname: p\ndescription: d\nagent: {agent}\nmodel: m1\nargs: [--extra]\n---\nBe brief.\n");
        parse_preset(&text, "p.md", PresetSource::Global).unwrap()
    };

    let claude = preset("claude");
    let args = for_agent(AgentKind::Claude).resume_invocation(&ctx(&claude), "sess-9").unwrap().args;
    assert_eq!(&args[..3], ["-p", "--resume", "sess-9"], "ahead of options that take several values");
    let inv = for_agent(AgentKind::Claude).resume_invocation(&ctx(&claude), "sess-9").unwrap();
    assert_eq!(inv.stdin.as_deref(), Some("results of the children"), "the task on stdin, never argv");
    assert!(!args.iter().any(|a| a.contains("results of the children") || a.contains("Be brief")), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--append-system-prompt-file", "/runs/r1/system-prompt.md"]), "{args:?}");
    assert!(args.contains(&"--extra".to_string()));
    assert!(for_agent(AgentKind::Claude).resume_invocation(&ctx(&claude), "").is_none(), "no session id, no resume");

    let codex = preset("codex");
    assert!(for_agent(AgentKind::Codex).resume_invocation(&ctx(&codex), "").is_none());
    let inv = for_agent(AgentKind::Codex).resume_invocation(&ctx(&codex), "thread-7").unwrap();
    assert_eq!(inv.program, "codex");
    assert_eq!(inv.args, ["exec", "--json", "--skip-git-repo-check", "-m", "m1", "--extra", "resume", "thread-7", "-"]);
    assert_eq!(inv.stdin.as_deref(), Some("results of the children"), "the prompt on stdin");

    let pi = preset("pi");
    let inv = for_agent(AgentKind::Pi).resume_invocation(&ctx(&pi), "").unwrap();
    assert!(inv.args.windows(2).any(|w| w == ["--session", "/runs/r1/agent/session.jsonl"]), "the same session file");
    assert_eq!(inv.stdin.as_deref(), Some("results of the children"), "pi reads its prompt on stdin");
    assert!(!inv.args.iter().any(|a| a == "results of the children"));

    let gemini = preset("gemini");
    assert!(for_agent(AgentKind::Gemini).resume_invocation(&ctx(&gemini), "").is_none(), "never --resume latest");
    let inv = for_agent(AgentKind::Gemini).resume_invocation(&ctx(&gemini), "uuid-1").unwrap();
    assert_eq!(&inv.args[inv.args.len() - 2..], ["--resume", "uuid-1"]);
    assert!(inv.stdin.as_deref().unwrap().ends_with("results of the children"), "on stdin, never argv");

    let opencode = preset("opencode");
    assert!(for_agent(AgentKind::Opencode).resume_invocation(&ctx(&opencode), "").is_none(), "never --continue");
    let inv = for_agent(AgentKind::Opencode).resume_invocation(&ctx(&opencode), "ses_1").unwrap();
    assert_eq!(&inv.args[..3], ["run", "--session", "ses_1"]);
    assert!(inv.stdin.as_deref().unwrap().ends_with("results of the children"), "on stdin, never quoted by opencode");

    let command =
        parse_preset("---\nname: c\ndescription: d\nagent: command\ncommand: [x]\n---\n", "c.md", PresetSource::Global)
            .unwrap();
    assert!(for_agent(AgentKind::Command).resume_invocation(&ctx(&command), "s").is_none(), "a command cannot resume");
}

#[test]
fn gemini_cli_real_streams() {
    let mut r = replay(AgentKind::Gemini, "gemini-0.61-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Completed);
    let report = r.adapter.report();
    assert_eq!(report.final_text.as_deref(), Some("hello from the stub"));
    assert!(report.session_id.is_some());
    assert_eq!((report.usage.input_tokens, report.usage.output_tokens), (12, 7));

    // A 500 retried inside the CLI: nothing of it in the stream, the answer after.
    let mut r = replay(AgentKind::Gemini, "gemini-0.61-retried-500.jsonl");
    assert_eq!(outcome(&mut r, ProcessEnd::Exited(0)).status, RunStatus::Completed);
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("recovered"));

    // A 400: `result` with `status: error`, whatever the exit code.
    let mut r = replay(AgentKind::Gemini, "gemini-0.61-error-400.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Failed);
    assert!(v.error.as_deref().unwrap_or_default().contains("stub error 400"), "{v:?}");

    // A turn resumed with `--resume ID`: the same session, the new answer.
    let first = replay(AgentKind::Gemini, "gemini-0.61-success.jsonl").adapter.report().session_id;
    let mut r = replay(AgentKind::Gemini, "gemini-0.61-resumed.jsonl");
    assert_eq!(outcome(&mut r, ProcessEnd::Exited(0)).status, RunStatus::Completed);
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("second answer"));
    assert_ne!(r.adapter.report().session_id, first, "captured from another run");
}

#[test]
fn opencode_real_streams() {
    let mut r = replay(AgentKind::Opencode, "opencode-1.18-success.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Completed);
    let report = r.adapter.report();
    assert_eq!(report.final_text.as_deref(), Some("hello from the stub"));
    assert!(report.session_id.as_deref().unwrap().starts_with("ses_"));
    assert_eq!((report.usage.input_tokens, report.usage.output_tokens), (12, 7));
    assert!(report.cost_usd.is_some(), "opencode prices its own steps");

    let mut r = replay(AgentKind::Opencode, "opencode-1.18-retried-500.jsonl");
    assert_eq!(outcome(&mut r, ProcessEnd::Exited(0)).status, RunStatus::Completed);
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("recovered"));

    // A 400: one `error` event, then the process exits.
    let mut r = replay(AgentKind::Opencode, "opencode-1.18-error-400.jsonl");
    let v = outcome(&mut r, ProcessEnd::Exited(0));
    assert_eq!(v.status, RunStatus::Failed, "an API error is a failure even with exit 0");
    assert!(v.error.as_deref().unwrap_or_default().contains("stub error 400"), "{v:?}");

    let mut r = replay(AgentKind::Opencode, "opencode-1.18-resumed.jsonl");
    assert_eq!(outcome(&mut r, ProcessEnd::Exited(0)).status, RunStatus::Completed);
    assert_eq!(r.adapter.report().final_text.as_deref(), Some("second answer"));
}
