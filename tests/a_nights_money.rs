//! A night's money counted whole, as a user meets it through the CLI: the
//! day's budget of a schedule is a ledger that removing runs does not
//! shrink, and it counts what the schedule's runs launched.

mod common;

use std::time::Duration;

use common::Env;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// An installation with a pi preset `spend` whose each message costs
/// $0.25 (as many as the schedule's `SPEND_MESSAGES` say).
fn spending() -> Env {
    let env = Env::new();
    env.config("max_parallel = 4\n");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    env
}

/// The budget in dollars run `id` was given.
fn given(env: &Env, id: &str) -> f64 {
    env.show(id)["budget"]["usd"].as_f64().expect("a budget")
}

/// `corral ARGS --json` with `vars` set, its JSON.
fn json_with(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let mut cmd = env.command(&args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Fires `name` now; its JSON.
fn fire(env: &Env, name: &str) -> Value {
    json_with(env, &["schedule", "run-now", name], &[])
}

/// The runs a fire launched, each waited to its end.
fn ended_runs(env: &Env, fire: &Value) -> Vec<String> {
    let runs: Vec<String> =
        fire["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    for id in &runs {
        env.wait_run(id, LIMIT, |r| !r["exited_at"].is_null());
    }
    runs
}

/// Item 1: with `--keep-last 1` each fire removes the older runs, and
/// `corral rm` removes them too: the day's spend stays what it was, so
/// after a $0.25 fire the next is given the $0.75 left, not the day
/// again, and the one after the $0.50 left.
#[test]
fn removing_the_days_runs_gives_no_budget_back() {
    let env = spending();
    let add = [
        "schedule",
        "add",
        "nightly",
        "--preset",
        "spend",
        "--every",
        "1h",
        "--budget-per-day",
        "$1",
        "--keep-last",
        "1",
        "spend",
    ];
    let out = env.command(&add).env("SPEND_MESSAGES", "1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = fire(&env, "nightly");
    assert_eq!(first["outcome"], "launched", "{first:#}");
    let runs = ended_runs(&env, &first);
    assert!((given(&env, &runs[0]) - 1.0).abs() < 1e-9);
    env.ok(&["rm", &runs[0]]);
    let second = fire(&env, "nightly");
    assert_eq!(second["outcome"], "launched", "{second:#}");
    let runs = ended_runs(&env, &second);
    let left = given(&env, &runs[0]);
    assert!((left - 0.75).abs() < 1e-9, "the removed run's $0.25 was given back: ${left:.2}");
    // The schedule's `keep` removes the second as the third fires.
    let third = fire(&env, "nightly");
    assert_eq!(third["outcome"], "launched", "{third:#}");
    let runs = ended_runs(&env, &third);
    let left = given(&env, &runs[0]);
    assert!((left - 0.5).abs() < 1e-9, "a run the schedule's keep removed gave its $0.25 back: ${left:.2}");
}

/// Item 2: a scheduled lead that spends nothing itself and whose worker
/// spends: the next fire is given what is left of the day, not the day.
#[test]
fn what_a_scheduled_lead_launches_is_the_days_spend() {
    let env = spending();
    env.command_preset("lead", &["sh", "-c", "corral launch spend work --wait >/dev/null"]);
    let add = ["schedule", "add", "leads", "--preset", "lead", "--every", "1h", "--budget-per-day", "$1", "lead"];
    let out = env.command(&add).env("SPEND_MESSAGES", "3").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = fire(&env, "leads");
    assert_eq!(first["outcome"], "launched", "{first:#}");
    let lead = ended_runs(&env, &first);
    let worker = env.show(&lead[0])["children"][0].as_str().expect("the lead launched a worker").to_string();
    let spent = env.wait_run(&worker, LIMIT, |r| !r["exited_at"].is_null());
    assert!((spent["cost_usd"].as_f64().unwrap_or(0.0) - 0.75).abs() < 1e-9, "{spent:#}");
    let next = fire(&env, "leads");
    assert_eq!(next["outcome"], "launched", "{next:#}");
    let runs: Vec<&str> = next["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    let left = given(&env, runs[0]);
    assert!((left - 0.25).abs() < 1e-9, "the worker's spend was not the day's: ${left:.2} given");
    env.ok(&["abort", runs[0]]);
}

/// Item 4: with `--each`, a fire launches no more runs than what is left of
/// the day pays one message each (as its runs' messages cost before):
/// twelve items on the $0.50 left of a day whose messages cost $0.25
/// launch two runs, the other items left for a later fire.
#[test]
fn a_fire_launches_no_more_runs_than_its_budget_pays_a_message_each() {
    let env = spending();
    let items = env.project.join("items");
    std::fs::write(&items, "first\n").unwrap();
    let precheck = format!("cat {}", items.display());
    let add = [
        "schedule",
        "add",
        "fanout",
        "--preset",
        "spend",
        "--every",
        "1h",
        "--budget-per-day",
        "$1",
        "--precheck",
        &precheck,
        "--each",
        "--overlap",
        "allow",
        "work {item}",
    ];
    let out = env.command(&add).env("SPEND_MESSAGES", "2").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = fire(&env, "fanout");
    ended_runs(&env, &first);
    let twelve: Vec<String> = (0..12).map(|n| format!("item{n}")).collect();
    std::fs::write(&items, twelve.join("\n") + "\n").unwrap();
    let second = fire(&env, "fanout");
    assert_eq!(second["outcome"], "launched", "{second:#}");
    let launched = second["runs"].as_array().unwrap().len();
    assert_eq!(launched, 2, "launched more runs than $0.50 pays a $0.25 message each: {second:#}");
    for run in second["runs"].as_array().unwrap() {
        let _ = env.corral(&["abort", run["id"].as_str().unwrap()]);
    }
}

/// A hostile reading's finding: the ledger says which schedule's fire
/// caused a row on the row itself: a fire id used again after `schedule
/// rm` never charges a new schedule with another's money, and a schedule
/// removed and added again under its name keeps its day's spend.
#[test]
fn the_days_spend_is_the_schedules_whatever_fire_ids_are_used_again() {
    let env = spending();
    let add = |name: &str| {
        let args = ["schedule", "add", name, "--preset", "spend", "--every", "1h", "--budget-per-day", "$1", "spend"];
        let out = env.command(&args).env("SPEND_MESSAGES", "1").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    add("x");
    let fired = fire(&env, "x");
    ended_runs(&env, &fired);
    env.ok(&["schedule", "rm", "x"]);
    add("r");
    let fired = fire(&env, "r");
    assert_eq!(fired["outcome"], "launched", "a new schedule was charged another's money: {fired:#}");
    let runs = ended_runs(&env, &fired);
    assert!((given(&env, &runs[0]) - 1.0).abs() < 1e-9, "{fired:#}");
    add("x");
    let fired = fire(&env, "x");
    let runs = ended_runs(&env, &fired);
    let left = given(&env, &runs[0]);
    assert!((left - 0.75).abs() < 1e-9, "x added again was given its day back: ${left:.2}");
}

/// A hostile reading's finding: a schedule's first fire, before any of its
/// runs said what a message costs, launches no more runs than what is left
/// pays a $0.25 message each: twenty items on a $1 day launch four.
#[test]
fn a_first_fire_is_bounded_before_any_message_was_priced() {
    let env = spending();
    let add = [
        "schedule",
        "add",
        "first",
        "--preset",
        "spend",
        "--every",
        "1h",
        "--budget-per-day",
        "$1",
        "--precheck",
        "seq 1 20",
        "--each",
        "item {item}",
    ];
    env.ok(&add);
    let fired = fire(&env, "first");
    assert_eq!(fired["outcome"], "launched", "{fired:#}");
    let runs = fired["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{fired:#}");
    for run in runs {
        let _ = env.corral(&["abort", run["id"].as_str().unwrap()]);
    }
}
