//! Follow-ups: `corral reply` continues a run's conversation in the agent's
//! own session, whether the run ended or is still working, and "Allow and
//! continue" lets the agent use exactly the tool calls it was refused.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{eventually, is_terminal, Env};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// An installation whose `claude` is the conversing fake, with preset `talk`.
fn conversing() -> (Env, PathBuf) {
    let env = Env::new();
    env.config("");
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "");
    let log = env.project.join("turns.log");
    (env, log)
}

fn turns(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

fn transcript(env: &Env, id: &str) -> String {
    env.ok(&["tail", "-n", "all", id])
}

/// Lets a turn of the fake held on `hold` answer.
fn release(hold: &Path) {
    std::fs::write(hold, "").unwrap();
}

#[test]
fn a_reply_to_an_ended_run_continues_its_session_and_adds_up() {
    let (env, log) = conversing();
    let id = env.launch_env("talk", "write the parser", &[("CONVERSE_LOG", log.to_str().unwrap())]);
    let first = env.wait_end(&id);
    assert_eq!(first["final_text"], "Echo: write the parser");
    // The app announced its end (claimed it in the store).
    let claimed = env.store().claim_notifications(100).unwrap();
    assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);

    let out = env.corral(&["reply", &id, "now", "add", "tests", "--wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("completed"));

    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["final_text"], "Echo: now add tests");
    assert_eq!(run["cost_usd"], 0.02, "two turns of $0.01 add up");
    assert_eq!(run["usage"]["output_tokens"], 10);
    assert!(run["replied_at"].is_string());
    let turns = turns(&log);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[1], "resume=conv-session allowed= prompt=now add tests", "the same session, the reply as prompt");
    let text = transcript(&env, &id);
    assert!(text.contains("[user] now add tests"), "the transcript shows what was said:\n{text}");
    let (said, answer) = (text.find("[user] now add tests").unwrap(), text.rfind("Echo: now add tests").unwrap());
    assert!(said < answer, "the reply comes before its answer:\n{text}");
    assert!(env.ok(&["show", &id]).contains("delivered"));
    // Its new end is announced again, once.
    let claimed = env.store().claim_notifications(100).unwrap();
    assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(env.store().claim_notifications(100).unwrap().is_empty());
}

#[test]
fn a_reply_to_a_working_run_is_delivered_when_its_turn_ends_and_the_run_ends_once() {
    let (env, log) = conversing();
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let id = env.launch_env("talk", "first question", &vars);
    env.wait_run(&id, LIMIT, |r| r["status"] == "running");
    // Someone already waits for the run: they must get the end of the
    // conversation, not of its first turn.
    let waiter = env.command(&["wait", &id]).stdout(std::process::Stdio::piped()).spawn().unwrap();

    let said = env.ok(&["reply", &id, "and a second one"]);
    assert!(said.contains("when its turn ends"), "{said}");
    release(&hold);
    assert!(eventually(LIMIT, || turns(&log).len() == 2), "the reply became the next turn: {:?}", turns(&log));
    let run = env.show(&id);
    assert_eq!(run["status"], "running", "the run did not end between the turns");
    assert!(run["completed_at"].is_null());
    release(&hold);

    let out = waiter.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("completed") && said.contains("Echo: and a second one"), "{said}");
    let run = env.wait_end(&id);
    assert_eq!(run["final_text"], "Echo: and a second one");
    assert_eq!(turns(&log)[1], "resume=conv-session allowed= prompt=and a second one");
}

#[test]
fn allow_and_continue_runs_a_turn_with_exactly_the_refused_tools_allowed() {
    let (env, log) = conversing();
    let argv = env.project.join("argv");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_ARGV", argv.to_str().unwrap())];
    let id = env.launch_env("talk", "run npm test", &vars);
    let run = env.wait_end(&id);
    assert_eq!(run["denied"], serde_json::json!(["Bash(npm test)"]));
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains("1 action was denied: Bash(npm test)") && shown.contains("--allow-denied"), "{shown}");

    let out = env.ok(&["reply", &id, "--allow-denied", "--wait"]);
    assert!(out.contains("completed"), "{out}");
    let run = env.wait_end(&id);
    assert_eq!(run["final_text"], "ran npm test: 3 passed");
    assert_eq!(run["denied"], serde_json::json!([]), "nothing is refused any more");
    let turns = turns(&log);
    assert!(turns[1].starts_with("resume=conv-session allowed=Bash(npm test); "), "{turns:?}");
    assert!(transcript(&env, &id).contains("allowed for this turn: Bash(npm test)"));
    // The allowed command (often with a token in it) is never in argv,
    // which every local user can read; it is in a file only the user can.
    let argv = std::fs::read_to_string(&argv).unwrap();
    assert!(!argv.contains("npm test"), "an allowed command was put on the agent's command line: {argv}");
    let settings = argv.split_whitespace().skip_while(|a| *a != "--settings").nth(1).expect("a settings file");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(settings).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{settings} is {mode:o}");
}

#[test]
fn a_reopened_run_takes_a_slot_like_any_turn() {
    let (env, log) = conversing();
    env.config("max_parallel = 1\n");
    let id = env.launch_env("talk", "one", &[("CONVERSE_LOG", log.to_str().unwrap())]);
    env.wait_end(&id);
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let busy = env.launch_env("talk", "busy", &vars);
    env.wait_run(&busy, LIMIT, |r| r["status"] == "running");

    env.ok(&["reply", &id, "two"]);
    assert_eq!(env.show(&id)["status"], "queued", "the only slot is taken");
    release(&hold);
    env.wait_end(&busy);
    let run = env.wait_run(&id, LIMIT, |r| is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["final_text"], "Echo: two");
}

#[test]
fn an_aborted_run_does_not_take_a_waiting_reply_until_replied_to_again() {
    let (env, log) = conversing();
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let id = env.launch_env("talk", "long job", &vars);
    env.wait_run(&id, LIMIT, |r| r["status"] == "running");
    env.ok(&["reply", &id, "then this"]);
    env.ok(&["abort", &id]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted");
    assert_eq!(env.show(&id)["status"], "aborted", "stop means stop: the waiting reply does not restart it");
    assert!(env.ok(&["show", &id]).contains("waiting for the agent"));
    assert_eq!(turns(&log).len(), 1);

    release(&hold);
    env.ok(&["reply", &id, "go on after all"]);
    let run = env.wait_run(&id, LIMIT, |r| r["status"] == "completed" && !r["exited_at"].is_null());
    assert_eq!(
        turns(&log)[1],
        "resume=conv-session allowed= prompt=then this  go on after all",
        "both replies, in order"
    );
    assert!(run["final_text"].as_str().unwrap().contains("go on after all"));
}

#[test]
fn replies_that_cannot_be_delivered_are_refused_before_anything_starts() {
    let env = Env::new();
    env.command_preset("cmd", &["true"]);
    let id = env.launch("cmd", "x");
    env.wait_end(&id);
    let said = |args: &[&str]| {
        let out = env.corral(args);
        assert_eq!(out.status.code(), Some(2), "{args:?} must fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(said(&["reply", &id, "more"]).contains("cannot continue a session: launch a new run instead"));
    assert!(said(&["reply", "nosuchrun", "more"]).contains("no run 'nosuchrun'"));

    let (env, log) = conversing();
    let id = env.launch_env("talk", "hello", &[("CONVERSE_LOG", log.to_str().unwrap())]);
    env.wait_end(&id);
    let said = |args: &[&str]| {
        let out = env.corral(args);
        assert_eq!(out.status.code(), Some(2), "{args:?} must fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(said(&["reply", &id]).contains("the reply is empty"));
    let nothing = said(&["reply", &id, "--allow-denied"]);
    assert!(nothing.contains("had no actions denied") && !nothing.contains("allowed, but"), "{nothing}");
    let run: Value = env.show(&id);
    assert_eq!(run["status"], "completed", "nothing changed");
    assert_eq!(turns(&log).len(), 1);
}

/// A waiter is told a run ended by its end, written beside it as it is
/// committed; a reply that brings the run back takes that end away first,
/// so a wait begun after the reply waits for the reply's turn.
#[test]
fn a_wait_begun_after_a_reply_gets_the_end_of_the_replys_turn_not_the_one_before() {
    let (env, log) = conversing();
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let id = env.launch_env("talk", "first question", &vars);
    let waiter = env.command(&["wait", &id, "--json"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    release(&hold);
    let out = waiter.wait_with_output().unwrap();
    let told: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(told[0]["final_text"], "Echo: first question", "{told:#}");
    let ended = env.run_dir(&id).join("ended.json");
    // Written as the end is committed: a waiter woken by the commit itself
    // may read the store a moment before the file is in place.
    assert!(eventually(LIMIT, || ended.is_file()), "the end is written beside the run for its waiters");

    env.ok(&["reply", &id, "and a second one"]);
    assert!(!ended.exists(), "the reply took the first end away as it was recorded");
    let waiter = env.command(&["wait", &id]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    assert!(eventually(LIMIT, || env.show(&id)["status"] == "running"), "the reply's turn started");
    // Every commit of the turn rang the bell; none was taken for its end.
    assert!(eventually(LIMIT, || turns(&log).len() == 2), "{:?}", turns(&log));
    release(&hold);
    let out = waiter.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("completed") && said.contains("Echo: and a second one"), "{said}");
    // As above: the waiter may have read the store before the file is in place.
    assert!(eventually(LIMIT, || ended.is_file()), "the reply's end is written beside the run");
    assert_eq!(
        serde_json::from_slice::<Value>(&std::fs::read(&ended).unwrap()).unwrap()["final_text"],
        "Echo: and a second one"
    );
}

/// A wait on several runs answers with one moment: a run it found ended
/// that a reply reopens while it waits on another is waited for again,
/// never said `completed` with its previous turn's words.
#[test]
fn a_wait_on_two_runs_sees_one_reopened_meanwhile_as_at_work() {
    let (env, log) = conversing();
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let a = env.launch_env("talk", "first question", &vars);
    release(&hold);
    assert_eq!(env.wait_end(&a)["final_text"], "Echo: first question");
    let go = env.project.join("go");
    let script = format!("while [ ! -e {} ]; do sleep 0.005; done; echo b done", go.display());
    env.command_preset("slowb", &["sh", "-c", &script]);
    let b = env.launch("slowb", "x");
    assert!(eventually(LIMIT, || env.show(&b)["status"] == "running"));
    let waiter = env.command(&["wait", &a, &b]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    // B ends right after the reply reopens A, within one look of the wait.
    env.ok(&["reply", &a, "a second one"]);
    std::fs::write(&go, "").unwrap();
    assert!(eventually(LIMIT, || is_terminal(&env.show(&b))));
    assert!(eventually(LIMIT, || turns(&log).len() == 2), "the reply's turn started: {:?}", turns(&log));
    release(&hold);
    let out = waiter.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Echo: a second one"), "the wait said a turn that was over: {said}");
    assert!(!said.contains("Echo: first question"), "{said}");
}

/// A wait that times out while a run is about to start again for a reply
/// counts it as still at work, and says so.
#[test]
fn a_wait_timing_out_counts_a_run_a_reply_reopens_as_at_work() {
    let (env, log) = conversing();
    let hold = env.project.join("hold");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_HOLD", hold.to_str().unwrap())];
    let a = env.launch_env("talk", "first question", &vars);
    release(&hold);
    env.wait_end(&a);
    env.ok(&["reply", &a, "a second one"]);
    let out = env.corral(&["wait", &a, "--timeout", "0"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(124), "{said}");
    assert!(said.contains("timed out with 1 run(s) still active"), "{said}");
    release(&hold);
    env.wait_run(&a, LIMIT, |r| r["final_text"] == "Echo: a second one" && !r["exited_at"].is_null());
}
