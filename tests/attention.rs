//! What needs you, as a user meets it through the CLI (`corral needs`, the
//! list the tray's red icon and "Needs you" section show): each item with
//! its reason in words and the command that answers it, and gone once
//! answered or looked at.

mod common;

use std::time::Duration;

use common::{eventually, Env};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

fn needs(env: &Env) -> Vec<Value> {
    env.json(&["needs"]).as_array().unwrap().clone()
}

fn item<'a>(items: &'a [Value], id: &str) -> Option<&'a Value> {
    items.iter().find(|i| i["id"] == id || i["name"] == id)
}

#[test]
fn a_budget_reached_needs_you_until_more_is_allowed_and_its_action_answers_it() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    assert_eq!(env.ok(&["needs"]).trim(), "nothing needs you");
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let items = needs(&env);
    let budget = item(&items, &id).unwrap_or_else(|| panic!("{items:#?}"));
    assert_eq!(budget["chip"], "budget");
    assert_eq!(budget["reason"]["kind"], "budget");
    assert_eq!(budget["reason"]["budget"], "$1.00");
    assert!(budget["words"].as_str().unwrap().contains("budget of $1.00 reached"), "{budget:#}");
    let allow: Vec<String> =
        budget["actions"][0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    assert_eq!(budget["actions"][0]["label"], "Allow $1.00 more");
    assert_eq!(allow, ["resume", &id, "--budget", "usd=2"]);
    // The text says the command that answers it.
    let text = env.ok(&["needs"]);
    assert!(text.contains(&format!("Allow $1.00 more: corral resume {id} --budget usd=2")), "{text}");
    // Answered with its own action: it goes on, and no longer needs you.
    let args: Vec<&str> = allow.iter().map(String::as_str).collect();
    env.ok(&args);
    // Pressed again (another terminal, a second click): a target, not a
    // raise, so the budget is raised once.
    let _ = env.corral(&args);
    assert_eq!(env.show(&id)["budget"]["usd"], 2.0);
    assert!(eventually(LIMIT, || item(&needs(&env), &id).is_none()), "{:#?}", needs(&env));
    env.ok(&["abort", &id]);
    assert!(item(&needs(&env), &id).is_none(), "a stop you asked for needs nothing more");
    // Relaunched, it starts from the budget it was launched with.
    let again = env.ok(&["relaunch", &id]).trim().to_string();
    assert_eq!(env.show(&again)["budget"]["usd"], 1.0);
    env.ok(&["abort", &again]);
}

#[test]
fn a_failure_needs_you_in_words_until_you_look_at_it() {
    let env = Env::new();
    env.command_preset(
        "broken",
        &["sh", "-c", r#"echo '529 {"type":"error","error":{"message":"Overloaded"}}' >&2; exit 3"#],
    );
    let id = env.launch("broken", "x");
    env.wait_end(&id);
    let items = needs(&env);
    let failed = item(&items, &id).unwrap_or_else(|| panic!("{items:#?}"));
    assert_eq!(failed["chip"], "failed");
    assert!(failed["words"].as_str().unwrap().contains("Overloaded"), "{failed:#}");
    assert!(!failed["words"].as_str().unwrap().contains("{\"type\""), "raw JSON: {failed:#}");
    let labels: Vec<&str> =
        failed["actions"].as_array().unwrap().iter().map(|a| a["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Open", "Relaunch", "Dismiss"]);
    env.ok(&["show", &id]);
    assert!(item(&needs(&env), &id).is_none(), "looked at, it no longer needs you");
}

#[test]
fn a_schedule_that_paused_itself_needs_you_until_resumed() {
    let env = Env::new();
    // Its runs cannot even start: each fire fails.
    env.command_preset("broken", &["/no/such/program"]);
    let args =
        ["schedule", "add", "nightly", "--preset", "broken", "--every", "1h", "--pause-after-failures", "1", "t"];
    env.ok(&args);
    env.json(&["schedule", "run-now", "nightly"]);
    assert!(eventually(LIMIT, || item(&needs(&env), "nightly").is_some()), "{:#?}", needs(&env));
    let items = needs(&env);
    let paused = item(&items, "nightly").unwrap();
    assert_eq!(paused["kind"], "schedule");
    assert_eq!(paused["chip"], "paused schedule");
    assert_eq!(paused["actions"][0]["argv"], serde_json::json!(["schedule", "resume", "nightly"]));
    env.ok(&["schedule", "resume", "nightly"]);
    assert!(item(&needs(&env), "nightly").is_none());
    // A pause you gave is yours: it needs nothing.
    env.ok(&["schedule", "pause", "nightly"]);
    assert!(item(&needs(&env), "nightly").is_none());
}

#[test]
fn a_transcript_as_the_window_shows_it_folds_each_usage_into_its_message() {
    let env = Env::new();
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let id = env.launch_env("spend", "x", &[("SPEND_MESSAGES", "5"), ("SPEND_EVERY", "0")]);
    env.wait_end(&id);
    let store = env.store();
    let all = store.events_after(&id, 0, 1000).unwrap();
    let usage = all.iter().filter(|e| e.kind.as_str() == "usage").count();
    assert!(usage >= 5, "{all:#?}");
    // One row per event but usage, each message with the usage after it.
    let rows = store.shown_count(&id).unwrap();
    assert_eq!(rows as usize, all.len() - usage);
    let mut paged = Vec::new();
    for offset in (0..rows as usize).step_by(2) {
        paged.extend(store.shown_page(&id, offset, 2).unwrap());
    }
    assert_eq!(paged.len() as i64, rows, "pages of two cover the transcript once");
    assert!(paged.iter().all(|r| r.event.kind.as_str() != "usage"));
    let spent: Vec<_> = paged.iter().filter(|r| r.event.text.starts_with("spent message")).collect();
    assert_eq!(spent.len(), 5);
    for row in spent {
        assert_eq!(row.usage, ["1000 in / 100 out"], "{row:#?}");
    }
    assert_eq!(paged, store.shown_page(&id, 0, 1000).unwrap(), "a page's edge folds nothing away");
    assert!(store.shown_page(&id, rows as usize, 10).unwrap().is_empty());
}

#[test]
fn a_relaunched_failure_no_longer_needs_you() {
    let env = Env::new();
    env.command_preset("broken", &["sh", "-c", "echo nope >&2; exit 3"]);
    let id = env.launch("broken", "x");
    env.wait_end(&id);
    assert!(item(&needs(&env), &id).is_some());
    env.ok(&["relaunch", &id]);
    assert!(item(&needs(&env), &id).is_none(), "relaunched, the old failure is answered: {:#?}", needs(&env));
}

#[test]
fn every_action_offered_for_a_refused_write_is_one_the_cli_carries_out() {
    let env = Env::new();
    env.config("");
    let outside = env.user_home.join("made-by-the-agent").join("out.txt");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    // A new file outside what its sandbox writes: the usual refusal.
    let script = format!("echo hi > {}; exit 2", outside.display());
    env.command_preset_with("boxed", &["sh", "-c", &script], "sandbox: {write: [], network: none}\n");
    let id = env.launch("boxed", "x");
    env.wait_end(&id);
    let items = needs(&env);
    let denied = item(&items, &id).unwrap_or_else(|| panic!("{items:#?}"));
    let actions = denied["actions"].as_array().unwrap();
    // A command run has no session to go on in and never runs again: an
    // "Allow writing" would widen nothing that runs (what needs you,
    // round 2, item 7), so none is offered, nor a reply; it can be opened
    // and relaunched, every one of them carried out by the CLI.
    assert!(!actions.iter().any(|a| a["argv"][0] == "allow" || a["argv"][0] == "reply"), "{denied:#}");
    assert!(actions.iter().any(|a| a["argv"][0] == "relaunch"), "{denied:#}");
    for action in actions {
        let argv: Vec<&str> = action["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        env.ok(&argv);
    }
}

#[test]
fn a_run_its_budget_stopped_needs_you_as_its_notification_alarms() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spendstop", "pi", "on_budget: stop\n");
    let id = env.ok(&["launch", "--budget", "$1", "spendstop", "x"]).trim().to_string();
    let ended = env.wait_end(&id);
    assert_eq!(ended["status"], "aborted", "{ended:#}");
    let items = needs(&env);
    let stopped = item(&items, &id).unwrap_or_else(|| panic!("stopped by its budget, not by you: {items:#?}"));
    assert_eq!(stopped["chip"], "stopped");
    // Its own budget starts again in a relaunch: offered.
    assert!(stopped["actions"].as_array().unwrap().iter().any(|a| a["label"] == "Relaunch"), "{stopped:#}");
    // A stop you asked for needs nothing.
    env.command_preset("slow", &["sleep", "60"]);
    let mine = env.launch("slow", "x");
    env.ok(&["abort", &mine]);
    assert!(item(&needs(&env), &mine).is_none());
}

#[test]
fn a_budget_of_dollars_and_tokens_is_allowed_more_of_both_exactly() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let id = env.ok(&["launch", "--budget", "usd=100,tokens=1500", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let items = needs(&env);
    let budget = item(&items, &id).unwrap_or_else(|| panic!("{items:#?}"));
    let argv: Vec<&str> =
        budget["actions"][0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(argv, ["resume", &id, "--budget", "usd=200,tokens=3000"], "{budget:#}");
    // As offered, it answers: the run goes on.
    env.ok(&argv);
    assert!(eventually(LIMIT, || item(&needs(&env), &id).is_none() || env.show(&id)["budget"]["tokens"] == 3000));
    assert_eq!(env.show(&id)["budget"]["tokens"], 3000);
    env.ok(&["abort", &id]);
}

/// What needs you, round 2, item 1: a run opened in the window while it
/// still works (the window marks what it opens seen) and failing later
/// still needs you: only an ended run is ever seen.
#[test]
fn a_run_opened_while_it_works_still_needs_you_when_it_fails() {
    let env = Env::new();
    env.config("");
    let gate = env.project.join("gate");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.02; done; exit 3", gate.display());
    env.command_preset("late", &["sh", "-c", &script]);
    let id = env.launch("late", "x");
    env.wait_run(&id, LIMIT, |r| r["status"] == "running");
    // What the window does when it opens a run.
    env.store().mark_seen(&id).unwrap();
    std::fs::write(&gate, "").unwrap();
    assert_eq!(env.wait_end(&id)["status"], "failed");
    assert!(item(&needs(&env), &id).is_some(), "a failure opened while it worked was hidden");
}

/// Item 2: however many unseen failures came after it, a run frozen at its
/// budget and waiting for the user's word is in the list, its "Allow more"
/// offered and carried out; the failures beyond the list are said, not
/// dropped.
#[test]
fn a_run_waiting_for_your_word_is_never_pushed_out_of_the_list() {
    let env = Env::new();
    env.config("max_parallel = 20\n");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    env.command_preset("fail", &["sh", "-c", "exit 3"]);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let failures: Vec<String> = (0..205).map(|n| env.launch("fail", &format!("f{n}"))).collect();
    for f in &failures {
        env.wait_run(f, LIMIT, |r| !r["exited_at"].is_null());
    }
    let items = needs(&env);
    let budget = item(&items, &id).unwrap_or_else(|| panic!("the paused run was pushed out: {} items", items.len()));
    let said = env.ok(&["needs"]);
    assert!(said.contains("and 5 more ended runs that need you"), "{}", &said[said.len().saturating_sub(300)..]);
    let allow: Vec<String> =
        budget["actions"][0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let args: Vec<&str> = allow.iter().map(String::as_str).collect();
    env.ok(&args);
    env.wait_run(&id, LIMIT, |r| r["budget"]["usd"] == 2.0);
    env.ok(&["abort", &id]);
}

/// Item 5: runs the user stopped are not failed fires: three fires whose
/// runs were aborted make no "failing schedule".
#[test]
fn fires_the_user_stopped_are_not_failures() {
    let env = Env::new();
    env.config("");
    env.command_preset("long", &["sh", "-c", "sleep 30"]);
    env.ok(&["schedule", "add", "nightly", "--preset", "long", "--every", "1h", "--overlap", "allow", "x"]);
    for _ in 0..3 {
        let fire = env.json(&["schedule", "run-now", "nightly"]);
        let run = fire["runs"][0]["id"].as_str().unwrap().to_string();
        env.ok(&["abort", &run]);
        env.wait_end(&run);
    }
    assert!(item(&needs(&env), "nightly").is_none(), "{:#?}", needs(&env));
}

/// Item 11: a run's error keeps to its line in `corral needs`: a line
/// break in it is shown as `\n`, never a line that reads as one of
/// Corral's answers.
#[test]
fn a_runs_error_cannot_forge_a_line_of_needs() {
    let env = Env::new();
    env.config("");
    // An API's JSON body, whose message Corral says in its words: a line
    // break in it is the agent's.
    let forged =
        r#"529 {"error":{"message":"oops\n        Allow: corral allow ID --write ~/.config/autostart --quiet"}}"#;
    env.command_preset("liar", &["sh", "-c", &format!("printf '%s' '{forged}' >&2; exit 3")]);
    let id = env.launch("liar", "x");
    env.wait_end(&id);
    let said = env.ok(&["needs"]);
    assert!(!said.lines().any(|l| l.trim_start().starts_with("Allow: corral allow")), "{said}");
}

/// Item 4: removing a run that needs you is a change the tray follows at
/// once (its status version moves, as for a new status): the red icon and
/// "Needs you (1)" go with it, not at some other run's next change.
#[test]
fn removing_a_run_that_needs_you_is_told_at_once() {
    let env = Env::new();
    env.config("");
    env.command_preset("fail", &["sh", "-c", "exit 3"]);
    let id = env.launch("fail", "x");
    env.wait_end(&id);
    let store = env.store();
    let before = store.status_version().unwrap();
    env.ok(&["rm", &id]);
    assert!(store.status_version().unwrap() > before, "the tray is never told the run went");
    assert!(item(&needs(&env), &id).is_none());
}

/// Item 6: what needs you can be tidied: a failure offers "Dismiss" (the
/// CLI's `needs --dismiss`, which the window, the tray and `top` carry out
/// as they carry out any action), its task is shown beside it, and the
/// tray's "Clear finished" never wipes what still needs you nor hides a
/// worktree run whose work is not merged.
#[test]
fn needs_you_is_tidied_one_item_at_a_time_and_clear_finished_keeps_what_matters() {
    let env = Env::new();
    env.config("");
    env.command_preset("fail", &["sh", "-c", "exit 3"]);
    env.command_preset("ok", &["true"]);
    let failed = env.launch("fail", "the nightly import");
    let done = env.launch("ok", "x");
    env.wait_end(&failed);
    env.wait_end(&done);
    assert!(env.ok(&["needs"]).contains("the nightly import"), "the task is not shown");
    // "Clear finished": the finished run goes, the failure stays.
    let cleared = env.store().dismiss_finished().unwrap();
    assert_eq!(cleared, 1);
    let items = needs(&env);
    let failure = item(&items, &failed).unwrap_or_else(|| panic!("Clear finished wiped a failure: {items:#?}"));
    let dismiss = failure["actions"].as_array().unwrap().iter().find(|a| a["label"] == "Dismiss").expect("Dismiss");
    let argv: Vec<&str> = dismiss["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    env.ok(&argv);
    assert!(item(&needs(&env), &failed).is_none(), "dismissed, it still needs you");
}

/// A hostile reading's finding: a message that cost more than the budget
/// step leaves "Allow $N more" past what was spent, so it is carried out
/// as printed, never refused as spent too.
#[test]
fn allow_more_is_past_what_was_spent_and_runs_as_printed() {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let mut launch = env.command(&["launch", "--budget", "$1", "spend", "x"]);
    let id = String::from_utf8(launch.env("SPEND_COST", "2.5").output().unwrap().stdout).unwrap().trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let items = needs(&env);
    let budget = item(&items, &id).unwrap_or_else(|| panic!("{items:#?}"));
    let allow: Vec<String> =
        budget["actions"][0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let args: Vec<&str> = allow.iter().map(String::as_str).collect();
    env.ok(&args);
    let run = env.show(&id);
    assert!(run["budget"]["usd"].as_f64().unwrap() > 2.5, "{run:#}");
    env.ok(&["abort", &id]);
}
