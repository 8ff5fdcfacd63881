//! The MCP server driven by a real MCP client (rmcp) over stdio, as an
//! agent would: initialize, list tools, launch, wait, read a result, abort,
//! and bad arguments that come back as tool errors without killing the
//! server.

mod common;

use common::mcp::{call, connect};
use common::{eventually, fake_agent, processes_of_run, Env};
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn an_agent_launches_waits_reads_and_aborts_through_mcp() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    env.command_preset("alpha", &[&fake_agent("child"), "alpha-result"]);
    env.command_preset("beta", &[&fake_agent("child"), "beta-result", "2"]);
    let never = env.project.join("never");
    env.command_preset("stuck", &[&fake_agent("slow"), never.to_str().unwrap()]);
    // The calling agent's own run, at work, whose children MCP launches
    // become (a run that ended launches nothing).
    let caller = env.launch("stuck", "the orchestrator's own run");
    env.wait_run(&caller, Duration::from_secs(10), |r| r["status"] == "running");
    let client = connect(&env, Some(&caller)).await;

    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "corral");
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "abort_agent",
            "add_schedule",
            "agent_result",
            "agent_status",
            "discard_run",
            "launch_agent",
            "list_presets",
            "list_schedules",
            "merge_run",
            "open_pull_request",
            "pause_agent",
            "pause_schedule",
            "reply_agent",
            "resume_agent",
            "resume_schedule",
            "run_changes",
            "run_conflicts",
            "run_schedule_now",
            "wait_agents"
        ]
    );
    for tool in &tools {
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 60), "{} needs a real description", tool.name);
    }

    let (error, presets) = call(&client, "list_presets", json!({})).await;
    assert!(!error);
    assert!(presets.as_array().unwrap().iter().any(|p| p["name"] == "alpha"));

    let (_, a) = call(&client, "launch_agent", json!({"preset": "alpha", "task": "first"})).await;
    let (_, b) = call(&client, "launch_agent", json!({"preset": "beta", "task": "second"})).await;
    let (a, b) = (a["run_id"].as_str().unwrap().to_string(), b["run_id"].as_str().unwrap().to_string());
    assert_eq!(env.show(&a)["parent_id"], caller.as_str(), "launched runs get the caller's run as parent");

    let (error, waited) = call(&client, "wait_agents", json!({"run_ids": [a, b], "timeout_s": 20})).await;
    assert!(!error);
    assert_eq!(waited["timed_out"], false);
    assert_eq!(waited["all_completed"], false);
    assert_eq!(waited["runs"][0]["status"], "completed");
    assert_eq!(waited["runs"][0]["final_text"], "alpha-result");
    assert_eq!(waited["runs"][1]["status"], "failed");
    assert!(env.show(&a)["collected_at"].is_string(), "the caller has the result now");

    let (_, result) = call(&client, "agent_result", json!({"run_id": b})).await;
    assert_eq!(result["error"], "exited with code 2");

    let (_, stuck) = call(&client, "launch_agent", json!({"preset": "stuck", "task": "never ends"})).await;
    let stuck = stuck["run_id"].as_str().unwrap().to_string();
    let (_, status) = call(&client, "agent_status", json!({})).await;
    assert_eq!(status.as_array().unwrap().len(), 3, "the caller's children: {status:#}");
    let (_, early) = call(&client, "wait_agents", json!({"run_ids": [stuck], "timeout_s": 0.2})).await;
    assert_eq!(early["timed_out"], true);
    let (_, pending) = call(&client, "agent_result", json!({"run_id": stuck})).await;
    assert!(pending["note"].as_str().unwrap().contains("has not ended yet"), "{pending:#}");
    let (error, aborted) = call(&client, "abort_agent", json!({"run_id": stuck})).await;
    assert!(!error);
    assert_eq!(aborted["run"]["status"], "aborted");
    env.wait_end(&stuck);
    assert!(processes_of_run(&stuck).is_empty());

    // A follow-up to a run that ended, in its agent's own session.
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "");
    let (_, talk) = call(&client, "launch_agent", json!({"preset": "talk", "task": "hello"})).await;
    let talk = talk["run_id"].as_str().unwrap().to_string();
    call(&client, "wait_agents", json!({"run_ids": [talk], "timeout_s": 20})).await;
    let (error, replied) = call(&client, "reply_agent", json!({"run_id": talk, "text": "say more"})).await;
    assert!(!error, "{replied}");
    assert_eq!(replied["result"], "a new turn of its session starts");
    let (_, waited) = call(&client, "wait_agents", json!({"run_ids": [talk], "timeout_s": 20})).await;
    assert_eq!(waited["runs"][0]["final_text"], "Echo: say more", "{waited:#}");
    let (error, text) = call(&client, "reply_agent", json!({"run_id": b, "text": "again"})).await;
    assert!(error && text.as_str().unwrap().contains("cannot continue a session"), "{text}");

    // Bad input: tool errors with useful text; the server stays up.
    let (error, text) = call(&client, "agent_result", json!({"run_id": "nope"})).await;
    assert!(error);
    assert_eq!(text, "no run 'nope': call agent_status without run_id to list runs");
    let (error, text) = call(&client, "launch_agent", json!({"preset": "ghost", "task": "x"})).await;
    assert!(error && text.as_str().unwrap().contains("no preset 'ghost'"), "{text}");
    let (error, text) = call(&client, "wait_agents", json!({"run_ids": "not-a-list"})).await;
    assert!(error, "{text}");
    let (error, _) = call(&client, "wait_agents", json!({"run_ids": []})).await;
    assert!(error);
    let (error, _) = call(&client, "list_presets", json!({})).await;
    assert!(!error, "still serving after bad calls");

    client.cancel().await.unwrap();
    env.ok(&["abort", &caller]);
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_reviews_merges_and_discards_a_worktree_run_through_mcp() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&env.project)
            .args(["-c", "user.name=T", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join(".gitignore"), ".corral/\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    env.command_preset("write", &["sh", "-c", "echo \"$CORRAL_TASK\" > out.txt"]);
    let client = connect(&env, None).await;

    let (error, run) =
        call(&client, "launch_agent", json!({"preset": "write", "task": "hello", "worktree": true})).await;
    assert!(!error, "{run}");
    let id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["worktree"]["branch"], format!("corral/{id}"));
    call(&client, "wait_agents", json!({"run_ids": [id]})).await;
    let (error, changes) = call(&client, "run_changes", json!({"run_id": id})).await;
    assert!(!error, "{changes}");
    assert_eq!(changes["files"][0]["path"], "out.txt");
    assert!(changes["diff"].as_str().unwrap().contains("+hello"));
    let (error, merged) = call(&client, "merge_run", json!({"run_id": id})).await;
    assert!(!error, "{merged}");
    assert_eq!(merged["branch"], "main");
    assert_eq!(std::fs::read_to_string(env.project.join("out.txt")).unwrap(), "hello\n");
    let (error, discarded) = call(&client, "discard_run", json!({"run_id": id})).await;
    assert!(!error, "{discarded}");
    assert!(discarded["run"]["worktree"].is_null());
    let (error, text) = call(&client, "merge_run", json!({"run_id": id})).await;
    assert!(error && text.as_str().unwrap().contains("discarded"), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_acts_only_on_its_own_runs() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    let never = env.project.join("never");
    env.command_preset("stuck", &[&fake_agent("slow"), never.to_str().unwrap()]);
    env.command_preset_with("boss", &[&fake_agent("slow"), never.to_str().unwrap()], "mcp: all\n");
    // Someone else's run, and the calling agent's own run with a child.
    let stranger = env.launch("stuck", "someone else's work");
    let caller = env.launch("stuck", "the calling agent");
    let client = connect(&env, Some(&caller)).await;
    let (error, launched) = call(&client, "launch_agent", json!({"preset": "stuck", "task": "mine"})).await;
    assert!(!error, "{launched}");
    let child = launched["run_id"].as_str().unwrap().to_string();

    for tool in ["abort_agent", "pause_agent", "discard_run", "merge_run", "open_pull_request"] {
        let (error, said) = call(&client, tool, json!({"run_id": stranger})).await;
        assert!(error, "{tool} on another agent's run was allowed: {said}");
        assert!(said.to_string().contains("is not one of yours"), "{tool}: {said}");
    }
    let (error, said) = call(&client, "reply_agent", json!({"run_id": stranger, "text": "stop"})).await;
    assert!(error && said.to_string().contains("is not one of yours"), "{said}");
    let (error, said) = call(&client, "agent_result", json!({"run_id": stranger})).await;
    assert!(error && said.to_string().contains("sees only the runs it launched"), "{said}");
    // Itself: read, never act.
    let (error, said) = call(&client, "agent_status", json!({"run_id": caller})).await;
    assert!(!error, "{said}");
    let (error, said) = call(&client, "abort_agent", json!({"run_id": caller})).await;
    assert!(error && said.to_string().contains("is not one of yours"), "{said}");
    // Its own child's pull request: only where its preset says `pr: allow`.
    let (error, said) = call(&client, "open_pull_request", json!({"run_id": child})).await;
    assert!(error && said.to_string().contains("does not let its agent open pull requests"), "{said}");
    // Its own child: anything.
    let (error, said) = call(&client, "abort_agent", json!({"run_id": child})).await;
    assert!(!error, "{said}");
    assert_eq!(env.show(&stranger)["status"], "running", "the stranger's run was touched");
    client.cancel().await.unwrap();

    // A preset may grant every run; a person's client (no calling run) has it.
    let boss = env.launch("boss", "oversee");
    let client = connect(&env, Some(&boss)).await;
    let (error, said) = call(&client, "agent_result", json!({"run_id": stranger})).await;
    assert!(!error, "mcp: all was refused: {said}");
    client.cancel().await.unwrap();
    let client = connect(&env, None).await;
    let (error, said) = call(&client, "abort_agent", json!({"run_id": stranger})).await;
    assert!(!error, "a person's client was refused: {said}");
    client.cancel().await.unwrap();
    for id in [&caller, &boss] {
        env.ok(&["abort", id]);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_waits_only_on_its_own_runs_and_never_widens_its_scope_through_a_child() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    let never = env.project.join("never");
    env.command_preset("stuck", &[&fake_agent("slow"), never.to_str().unwrap()]);
    env.command_preset("quick", &["echo", "secret final text"]);
    env.command_preset_with("boss", &[&fake_agent("slow"), never.to_str().unwrap()], "mcp: all\n");
    let stranger = env.launch("quick", "someone else's private task");
    env.wait_end(&stranger);
    let caller = env.launch("stuck", "the calling agent");
    let client = connect(&env, Some(&caller)).await;
    let (error, said) = call(&client, "wait_agents", json!({"run_ids": [stranger], "timeout_s": 1})).await;
    assert!(error, "an mcp: own agent read another's run through wait_agents: {said}");
    assert!(said.to_string().contains("is not one of yours"), "{said}");
    assert!(!said.to_string().contains("secret"), "{said}");
    // A child launched with `mcp: all` gets no more than its parent's scope.
    let (error, launched) = call(&client, "launch_agent", json!({"preset": "boss", "task": "widen"})).await;
    assert!(!error, "{launched}");
    let child = launched["run_id"].as_str().unwrap().to_string();
    client.cancel().await.unwrap();
    let client = connect(&env, Some(&child)).await;
    for tool in ["agent_result", "abort_agent"] {
        let (error, said) = call(&client, tool, json!({"run_id": stranger})).await;
        assert!(error && said.to_string().contains("is not one of yours"), "{tool} widened through a child: {said}");
    }
    client.cancel().await.unwrap();
    for id in [&child, &caller] {
        env.ok(&["abort", id]);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_schedules_work_runs_it_now_and_pauses_it_through_mcp() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    env.command_preset("alpha", &[&fake_agent("child"), "alpha-result"]);
    let client = connect(&env, None).await;
    let (error, added) = call(
        &client,
        "add_schedule",
        json!({"name": "nightly", "preset": "alpha", "task": "check", "cron": "0 3 * * *", "cwd": env.project}),
    )
    .await;
    assert!(!error, "{added}");
    assert_eq!(added["when"]["cron"], "0 3 * * *");
    let (error, fire) = call(&client, "run_schedule_now", json!({"name": "nightly"})).await;
    assert!(!error, "{fire}");
    assert_eq!(fire["outcome"], "launched");
    let run = fire["runs"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(env.wait_end(&run)["final_text"], "alpha-result");
    let (_, paused) = call(&client, "pause_schedule", json!({"name": "nightly"})).await;
    assert_eq!(paused["paused_why"], "by request");
    let (_, listed) = call(&client, "list_schedules", json!({})).await;
    assert_eq!(listed[0]["name"], "nightly");
    assert_eq!(listed[0]["last_fires"][0]["runs"][0]["status"], "completed");
    // What cannot be a schedule says what to write.
    let (error, said) =
        call(&client, "add_schedule", json!({"name": "x", "preset": "alpha", "task": "t", "cron": "daily"})).await;
    assert!(error);
    assert!(said.to_string().contains("--cron '0 9 * * 1-5'"), "{said}");
    // A calendar phrase, read back in cron's words; one it cannot read is
    // refused, naming the word.
    let (error, added) = call(
        &client,
        "add_schedule",
        json!({"name": "standup", "preset": "alpha", "task": "t", "at": "weekdays 09:00", "cwd": env.project}),
    )
    .await;
    assert!(!error, "{added}");
    let (_, listed) = call(&client, "list_schedules", json!({})).await;
    let standup = listed.as_array().unwrap().iter().find(|s| s["name"] == "standup").unwrap().clone();
    assert!(standup["describe"].as_str().unwrap().starts_with("weekdays 09:00 (At 09:00, on Monday"), "{standup}");
    let (error, said) =
        call(&client, "add_schedule", json!({"name": "y", "preset": "alpha", "task": "t", "at": "tomorrowish"})).await;
    assert!(error);
    assert!(said.to_string().contains("'tomorrowish' is not understood"), "{said}");
    let (error, said) = call(
        &client,
        "add_schedule",
        json!({"name": "y", "preset": "alpha", "task": "t", "at": "daily 9am", "every": "1h"}),
    )
    .await;
    assert!(error);
    assert!(said.to_string().contains("one of cron, every or at"), "{said}");
    // A folder that is relative, or is not there, is refused: its runs
    // could not start there.
    for cwd in ["project", "/no/such/folder"] {
        let (error, said) = call(
            &client,
            "add_schedule",
            json!({"name": "z", "preset": "alpha", "task": "t", "every": "1h", "cwd": cwd}),
        )
        .await;
        assert!(error && said.to_string().contains("not a full path to an existing folder"), "{cwd}: {said}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_gives_a_run_a_budget_and_allows_more_through_mcp() {
    let env = Env::new();
    env.short_graces("100ms", "300ms");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let client = connect(&env, None).await;
    let (error, launched) =
        call(&client, "launch_agent", json!({"preset": "spend", "task": "spend", "budget": "$1", "cwd": env.project}))
            .await;
    assert!(!error, "{launched}");
    assert_eq!(launched["budget"]["usd"], 1.0, "{launched}");
    let id = launched["run_id"].as_str().unwrap().to_string();
    env.wait_run(&id, Duration::from_secs(30), |r| r["status"] == "paused");
    let (_, status) = call(&client, "agent_status", json!({"run_id": id})).await;
    assert_eq!(status[0]["pause_reason"], "budget", "{status}");
    // Resuming without more is refused, with what to do.
    let (error, said) = call(&client, "resume_agent", json!({"run_id": id})).await;
    assert!(error && said.to_string().contains("budget of $1.00 reached"), "{said}");
    let (error, resumed) = call(&client, "resume_agent", json!({"run_id": id, "budget": "+100"})).await;
    assert!(!error, "{resumed}");
    assert_eq!(resumed["budget"]["usd"], 101.0, "{resumed}");
    assert_eq!(env.wait_end(&id)["status"], "completed");
    let (error, said) = call(&client, "launch_agent", json!({"preset": "spend", "task": "x", "budget": "lots"})).await;
    assert!(error && said.to_string().contains("usd=2,tokens=2M"), "{said}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn tools_say_what_they_change_and_answer_in_compact_json() {
    let env = Env::new();
    let client = connect(&env, None).await;
    let tools = client.list_all_tools().await.unwrap();
    let hint = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let a = tool.annotations.as_ref().unwrap_or_else(|| panic!("{name} has no annotations"));
        (a.read_only_hint, a.destructive_hint)
    };
    assert_eq!(hint("wait_agents").0, Some(true));
    assert_eq!(hint("agent_status").0, Some(true));
    assert_eq!(hint("abort_agent"), (Some(false), Some(true)));
    assert_eq!(hint("discard_run"), (Some(false), Some(true)));
    assert_eq!(hint("launch_agent"), (Some(false), Some(false)));
    let params = CallToolRequestParams::new("list_presets").with_arguments(json!({}).as_object().unwrap().clone());
    let result = client.call_tool(params).await.unwrap();
    let text = &result.content[0].as_text().unwrap().text;
    assert!(!text.contains("\n  "), "pretty-printed JSON costs the model tokens: {text}");
    client.cancel().await.unwrap();
}

/// The agent of a run speaks MCP to `corral mcp` as a client does, over
/// stdio (protocol 2025-03-26): launches a child, waits on it, and sends
/// `notifications/cancelled` for the wait when the file `CANCEL` appears.
const CANCELLING_CLIENT: &str = r#"
import json, os, subprocess, time
p = subprocess.Popen(["corral", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(m):
    p.stdin.write(json.dumps(m) + "\n"); p.stdin.flush()
def answer(i):
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i:
            return m
def until(name):
    while not os.path.exists(os.environ[name]):
        time.sleep(0.02)
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "client", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "launch_agent", "arguments": {"preset": "stuck", "task": "child"}}})
child = json.loads(answer(2)["result"]["content"][0]["text"])["run_id"]
send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "wait_agents", "arguments": {"run_ids": [child], "timeout_s": 50}}})
until("CANCEL")
send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "the user pressed Esc"}})
open(os.environ["CANCELLED"], "w").close()
until("RELEASE")
print("back at work")
"#;

#[test]
fn a_wait_cancelled_by_the_client_gives_the_slot_back_at_once() {
    let env = Env::new();
    env.config("max_parallel = 2\n");
    let never = env.project.join("never");
    env.command_preset("stuck", &[&fake_agent("slow"), never.to_str().unwrap()]);
    env.command_preset("lead", &["python3", "-c", CANCELLING_CLIENT]);
    let files: Vec<(&str, String)> = ["CANCEL", "CANCELLED", "RELEASE"]
        .iter()
        .map(|name| (*name, env.project.join(name.to_lowercase()).to_string_lossy().into_owned()))
        .collect();
    let vars: Vec<(&str, &str)> = files.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let lead = env.launch_env("lead", "x", &vars);
    let store = env.store();
    let limit = Duration::from_secs(30);
    assert!(eventually(limit, || store.blocked_processes().unwrap().len() == 1), "the wait was never registered");
    std::fs::write(&files[0].1, "").unwrap();
    assert!(eventually(limit, || Path::new(&files[1].1).exists()), "the client never cancelled");
    // Its agent works again: the run must hold its slot again, not stay
    // counted as waiting while a queued run takes the slot beside it.
    let freed = eventually(Duration::from_secs(3), || store.blocked_processes().unwrap().is_empty());
    std::fs::write(&files[2].1, "").unwrap();
    assert!(freed, "a wait the client cancelled is still registered: run {lead} holds no slot while its agent works");
}

/// Where systemd timers fire the schedules, one added over MCP gets its
/// timer, as one added with `corral schedule add` does.
#[tokio::test(flavor = "current_thread")]
async fn a_schedule_added_over_mcp_gets_its_systemd_timer() {
    let env = Env::new();
    env.config("[schedules]\nsystemd_timers = true\n");
    env.command_preset("alpha", &[&fake_agent("child"), "alpha-result"]);
    let client = connect(&env, None).await;
    let (error, added) = call(
        &client,
        "add_schedule",
        json!({"name": "nightly", "preset": "alpha", "task": "check", "cron": "0 3 * * *", "cwd": env.project}),
    )
    .await;
    assert!(!error, "{added}");
    client.cancel().await.unwrap();
    let units = env.user_home.join(".config/systemd/user");
    let timers: Vec<String> = std::fs::read_dir(&units)
        .map(|dir| dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(timers.iter().any(|t| t.ends_with("-nightly.timer")), "no timer: {timers:?}");
    let service = timers.iter().find(|t| t.ends_with("-nightly.service")).expect("its service");
    let text = std::fs::read_to_string(units.join(service)).unwrap();
    assert!(text.contains("schedule fire nightly"), "{text}");
}
