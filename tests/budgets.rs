//! Budgets that pause and ask, through the CLI as a user meets them: a run
//! frozen within one message of crossing its budget, going on only when
//! more is allowed, stopped instead with `on_budget: stop`, and a parent's
//! budget covering the runs it launched.

mod common;

use std::time::Duration;

use common::Env;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// A pi preset whose agent is the fake `spender` ($0.25 and 1,100 tokens a
/// message, 40 messages, 50 ms apart).
fn spending_env(extra: &str) -> Env {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", extra);
    env
}

/// Messages the agent got out, as the transcript has them.
fn messages(env: &Env, id: &str) -> usize {
    env.ok(&["tail", "-n", "all", id]).lines().filter(|l| l.contains("spent message")).count()
}

fn cost(run: &Value) -> f64 {
    run["cost_usd"].as_f64().unwrap_or_else(|| panic!("no cost: {run:#}"))
}

#[test]
fn a_run_is_frozen_at_its_budget_and_goes_on_only_when_more_is_allowed() {
    let env = spending_env("");
    let id = env.ok(&["launch", "--budget", "$1", "spend", "spend freely"]).trim().to_string();
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert_eq!(paused["pause_reason"], "budget", "{paused:#}");
    // Frozen within one message of crossing: $1.00 is reached at the 4th.
    assert!((1.0..=1.25).contains(&cost(&paused)), "spent past the budget: {paused:#}");
    let at_pause = messages(&env, &id);
    assert!((4..=5).contains(&at_pause), "{at_pause} messages before the pause");
    let text = env.ok(&["tail", "-n", "all", &id]);
    assert!(text.contains("paused: budget of $1.00 reached"), "{text}");
    assert!(text.contains(&format!("corral resume {id} --budget +N")), "{text}");

    // Plain resume does not spend past the budget: it says what to do.
    let out = env.corral(&["resume", &id]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("budget of $1.00 reached") && err.contains("--budget +N"), "{err}");
    // Nor does allowing less than was spent.
    let out = env.corral(&["resume", &id, "--budget", "usd=0.5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is spent too"), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(messages(&env, &id), at_pause, "the frozen agent went on working");

    // One dollar more: it goes on and stops again at $2.
    let resumed = env.json(&["resume", &id, "--budget", "+1"]);
    assert_eq!(resumed[0]["status"], "running", "{resumed:#}");
    assert_eq!(resumed[0]["budget"]["usd"], 2.0, "{resumed:#}");
    let again = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" && cost(r) >= 2.0);
    assert!(cost(&again) <= 2.25, "spent past the raised budget: {again:#}");

    // A whole new budget: it finishes its work, none of it lost.
    env.ok(&["resume", &id, "--budget", "usd=100"]);
    let done = env.wait_end(&id);
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(messages(&env, &id), 40);
    assert!((cost(&done) - 10.0).abs() < 1e-6, "{done:#}");
    assert!(done["pause_reason"].is_null(), "{done:#}");
}

#[test]
fn a_token_budget_from_the_preset_pauses_and_on_budget_stop_ends_the_run() {
    let env = spending_env("budget: {tokens: 3k}\n");
    let id = env.launch("spend", "count tokens");
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert_eq!(paused["pause_reason"], "budget");
    assert_eq!(paused["budget"]["tokens"], 3000);
    assert_eq!(messages(&env, &id), 3, "3,300 tokens cross 3k at the third message");
    env.ok(&["abort", &id]);
    assert_eq!(env.wait_end(&id)["status"], "aborted");

    // `on_budget: stop` ends it instead, in words.
    env.agent_preset("strict", "pi", "budget: {usd: 0.5}\non_budget: stop\n");
    let id = env.launch("strict", "spend carefully");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted", "{run:#}");
    assert_eq!(run["stop_reason"], "budget", "{run:#}");
    let error = run["error"].as_str().unwrap();
    assert!(error.contains("budget of $0.50 reached") && error.contains("on_budget: stop"), "{error}");
    assert!(cost(&run) <= 0.75, "{run:#}");
}

#[test]
fn config_toml_gives_a_default_budget_and_launch_overrides_it() {
    let env = spending_env("");
    env.config("[budget]\nusd = 0.5\n");
    let id = env.launch("spend", "default budget");
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert_eq!(paused["budget"]["usd"], 0.5, "{paused:#}");
    env.ok(&["abort", &id]);
    let id = env.ok(&["launch", "--budget", "usd=100", "spend", "my own budget"]).trim().to_string();
    assert_eq!(env.wait_end(&id)["status"], "completed");
}

#[test]
fn a_parents_budget_covers_the_runs_it_launched() {
    let env = spending_env("");
    // The parent launches three spenders and waits for them.
    let script = "set -e\nfor i in 1 2 3; do corral launch spend \"child $i\" >> kids; done\ncorral wait $(cat kids)\n";
    std::fs::write(env.project.join("lead.sh"), script).unwrap();
    env.command_preset("lead", &["sh", "lead.sh"]);
    let lead = env.ok(&["launch", "--budget", "$2", "lead", "delegate"]).trim().to_string();
    let kids = || -> Vec<String> {
        std::fs::read_to_string(env.project.join("kids")).unwrap_or_default().lines().map(str::to_string).collect()
    };
    assert!(common::eventually(LIMIT, || kids().len() == 3), "the lead did not launch three runs");
    let kids = kids();
    for kid in &kids {
        let run = env.wait_run(kid, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
        assert_eq!(run["status"], "paused", "{run:#}");
        assert_eq!(run["pause_reason"], "budget", "{run:#}");
        assert!(run["budget"].is_null(), "a child has no budget of its own: {run:#}");
    }
    let spent: f64 = kids.iter().map(|k| cost(&env.show(k))).sum();
    // Each child may finish the message it was in when the tree crossed.
    assert!((2.0..=2.0 + 3.0 * 0.25).contains(&spent), "the tree spent {spent}");
    let text = env.ok(&["tail", "-n", "all", &kids[0]]);
    assert!(text.contains(&format!("run {lead}'s budget of $2.00 reached")), "{text}");

    // Allowing more on one child raises the lead's budget: all three go on.
    let out = env.ok(&["resume", &kids[0], "--budget", "+100"]);
    assert!(out.contains("running"), "{out}");
    assert_eq!(env.show(&lead)["budget"]["usd"], 102.0);
    for kid in &kids {
        assert_eq!(env.wait_end(kid)["status"], "completed");
    }
    let lead_run = env.wait_end(&lead);
    assert_eq!(lead_run["status"], "completed", "{lead_run:#}");
}

#[test]
fn a_budget_that_cannot_be_read_says_how_to_write_one() {
    let env = spending_env("");
    let out = env.corral(&["launch", "--budget", "plenty", "spend", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("budget `plenty`") && err.contains("usd=2,tokens=2M"), "{err}");
    env.agent_preset("broken", "pi", "budget: {usd: lots}\n");
    let out = env.corral(&["launch", "broken", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`budget`") && err.contains("lots"), "{err}");
    env.config("[budget]\ntokens = \"many\"\n");
    let out = env.corral(&["launch", "spend", "x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[budget]"), "{out:?}");
}

/// `corral launch OPTIONS... spend TASK` with the fake's settings.
fn launch_spending(env: &Env, options: &[&str], vars: &[(&str, &str)]) -> String {
    let mut args = vec!["launch"];
    args.extend(options);
    args.extend(["spend", "spend"]);
    let out = env.command(&args).envs(vars.iter().copied()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_cost_the_agent_does_not_report_is_estimated_and_an_unknown_model_is_said_never_priced_at_zero() {
    let env = spending_env("");
    // Tokens and no cost, from a model the price table knows: ≈ priced
    // ($0.0045 a message for claude-sonnet-4-5), and the budget keeps it.
    let id = launch_spending(&env, &["--budget", "usd=0.01"], &[("SPEND_COST", "none")]);
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert_eq!(paused["cost_estimated"], true, "{paused:#}");
    assert_eq!(messages(&env, &id), 3, "$0.0135 crosses $0.01 at the third message");
    assert!(env.ok(&["show", &id]).contains("≈$"), "show says the cost is an estimate");
    env.ok(&["abort", &id]);

    // A model the table does not know: said once, never priced at zero;
    // its tokens still count against the token budget.
    let vars = [("SPEND_COST", "none"), ("SPEND_MODEL", "mystery-model-9")];
    let id = launch_spending(&env, &["--budget", "usd=0.01,tokens=4k"], &vars);
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert!(paused["cost_usd"].is_null(), "priced at zero: {paused:#}");
    assert_eq!(messages(&env, &id), 4, "4,400 tokens cross 4k at the fourth message");
    let text = env.ok(&["tail", "-n", "all", &id]);
    assert_eq!(text.matches("cannot be counted for this run").count(), 1, "{text}");
    assert!(text.contains("does not know the model mystery-model-9"), "{text}");
    env.ok(&["abort", &id]);
}

/// Claude Code says a turn's cost only at its end: a reply's turn (and any
/// later turn) is priced live from its messages, added to what the earlier
/// turns cost, and frozen at the budget like the first.
#[test]
fn a_later_turn_of_claude_code_is_priced_live_and_frozen_at_the_budget() {
    let env = Env::new();
    env.config("");
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "");
    let log = env.project.join("turns.log");
    let mut launch = env.command(&["launch", "--budget", "$1", "talk", "say hello"]);
    let out = launch.env("CONVERSE_LOG", &log).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(env.wait_end(&id)["cost_usd"], 0.01);
    env.ok(&["reply", &id, "now", "spend", "freely"]);
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || !r["exited_at"].is_null());
    assert_eq!(paused["status"], "paused", "the reply's turn spent past its budget: {paused:#}");
    assert_eq!(paused["pause_reason"], "budget", "{paused:#}");
    assert!((1.0..=4.1).contains(&cost(&paused)), "frozen within a message of $1: {paused:#}");
    env.ok(&["abort", &id]);
}

/// Codex says what a turn spent only at the turn's end: said then, it is
/// recorded at once (the runs it waits for see their parent's budget
/// crossed and freeze), and its continuation is frozen before it spends,
/// never started unasked.
#[test]
fn a_turns_spend_said_at_its_end_is_held_to_before_more_work() {
    let env = spending_env("");
    env.use_fake("codex", "codex-lead");
    env.agent_preset("lead", "codex", "");
    let log = env.project.join("lead.log");
    let mut launch = env.command(&["launch", "--budget", "tokens=100k", "lead", "delegate"]);
    let hold = env.project.join("hold");
    launch.envs([("LEAD_CHILD", "spend"), ("LEAD_LOG", log.to_str().unwrap()), ("LEAD_HOLD", hold.to_str().unwrap())]);
    launch.env("SPEND_MESSAGES", "400");
    let out = launch.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let lead = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let waiting = env.wait_run(&lead, LIMIT, |r| r["status"] == "waiting" || common::is_terminal(r));
    assert_eq!(waiting["status"], "waiting", "{waiting:#}");
    // What its turn spent is shown while it waits, not at its end.
    let shown = env.show(&lead);
    assert!(shown["usage"]["input_tokens"].as_u64().unwrap() >= 1_000_000, "{shown:#}");
    let child = env.json(&["ls", "--all"]).as_array().unwrap().iter().find(|r| r["preset"] == "spend").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let frozen = env.wait_run(&child, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(frozen["pause_reason"], "budget", "the child spent on under a crossed budget: {frozen:#}");
    assert!(messages(&env, &child) < 10, "{} messages", messages(&env, &child));
    // Its child ended: the continuation's agent is frozen before it spends.
    env.ok(&["abort", &child]);
    let held = env.wait_run(&lead, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(held["status"], "paused", "{held:#}");
    assert_eq!(held["pause_reason"], "budget", "{held:#}");
    // A run launched under the spent budget is refused, saying why.
    let mut under = env.command(&["launch", "spend", "more"]);
    let out = under.env("CORRAL_RUN_ID", &lead).output().unwrap();
    assert!(!out.status.success(), "launched under a spent budget");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("budget of 100k tokens reached") && said.contains("--budget +N"), "{said}");
    env.ok(&["abort", &lead]);
}

/// An agent that prices its tokens at $0 (pi with a custom provider that
/// has no prices) does not make a dollar budget inert: its tokens are
/// priced by the table where it knows the model, else it is said that the
/// dollars cannot be counted, never "$0.00".
#[test]
fn tokens_an_agent_prices_at_zero_are_not_free_under_a_dollar_budget() {
    let env = spending_env("");
    let id = launch_spending(&env, &["--budget", "usd=0.01"], &[("SPEND_COST", "0")]);
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["status"], "paused", "10M tokens for $0.00: {paused:#}");
    assert_eq!(paused["cost_estimated"], true, "{paused:#}");
    env.ok(&["abort", &id]);

    let vars = [("SPEND_COST", "0"), ("SPEND_MODEL", "custom-free-model"), ("SPEND_MESSAGES", "5")];
    let id = launch_spending(&env, &["--budget", "usd=0.01"], &vars);
    let ended = env.wait_end(&id);
    assert!(ended["cost_usd"].is_null(), "priced at zero: {ended:#}");
    let text = env.ok(&["tail", "-n", "all", &id]);
    assert_eq!(text.matches("cannot be counted for this run").count(), 1, "{text}");
    // `show` says so too, never "$0.00 spent".
    let shown = env.ok(&["show", &id]);
    let line = shown.lines().find(|l| l.starts_with("budget")).unwrap_or_default();
    assert!(line.contains("dollars not counted") && !line.contains("$0.00 and"), "{shown}");
}

/// An agent cannot make its budget nothing: from inside a run, a budget
/// over it (its own, its launcher's) is not raised, and nothing it
/// launches is put under another run's tree, where its budget would not
/// count it. Its launcher (or the user) still allows a child more.
#[test]
fn a_run_cannot_raise_the_budget_over_it_nor_launch_outside_its_tree() {
    let env = spending_env("");
    let script = "set -e\ncorral launch --budget '$0.5' spend child >> kids\ncorral wait $(cat kids)\n";
    std::fs::write(env.project.join("lead.sh"), script).unwrap();
    env.command_preset("lead", &["sh", "lead.sh"]);
    env.command_preset("idle", &["sleep", "60"]);
    let lead = env.ok(&["launch", "--budget", "$1", "lead", "delegate"]).trim().to_string();
    let kid = || std::fs::read_to_string(env.project.join("kids")).unwrap_or_default().trim().to_string();
    assert!(common::eventually(LIMIT, || !kid().is_empty()), "the lead launched nothing");
    let kid = kid();
    let paused = env.wait_run(&kid, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["pause_reason"], "budget", "{paused:#}");
    let inside = |run: &str, args: &[&str]| {
        let out = env.command(args).env("CORRAL_RUN_ID", run).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };

    // The child cannot raise its own budget (an agent acts on its own run
    // at no door).
    let (ok, said) = inside(&kid, &["resume", &kid, "--budget", "+100"]);
    assert!(!ok && said.contains(&format!("run {kid} is not one of yours")), "{said}");
    assert_eq!(env.show(&kid)["budget"]["usd"], 0.5);
    // Its launcher allows it more, within its own budget.
    let (ok, said) = inside(&lead, &["resume", &kid, "--budget", "+0.25"]);
    assert!(ok, "{said}");
    assert_eq!(env.show(&kid)["budget"]["usd"], 0.75);

    // Now the lead's own budget is crossed: neither it nor its child raises it.
    let paused = env.wait_run(&kid, LIMIT, |r| {
        (r["status"] == "paused" && r["cost_usd"].as_f64().unwrap_or(0.0) >= 0.75) || common::is_terminal(r)
    });
    assert_eq!(paused["status"], "paused", "{paused:#}");
    env.ok(&["resume", &kid, "--budget", "+0.5"]);
    let crossed = env.wait_run(&kid, LIMIT, |r| {
        (r["status"] == "paused" && r["cost_usd"].as_f64().unwrap_or(0.0) >= 1.0) || common::is_terminal(r)
    });
    assert_eq!(crossed["status"], "paused", "{crossed:#}");
    for caller in [&lead, &kid] {
        for target in [&lead, &kid] {
            let (ok, said) = inside(caller, &["resume", target, "--budget", "+100"]);
            let refused = said.contains(&format!("cannot raise the budget of run {lead}"))
                || said.contains("is not one of yours");
            assert!(!ok && refused, "{caller} {target}: {said}");
        }
    }
    // Its launcher's raise of a child paused at the launcher's own budget
    // is a raise of its own: refused, saying so.
    let (ok, said) = inside(&lead, &["resume", &kid, "--budget", "+100"]);
    assert!(!ok && said.contains(&format!("cannot raise the budget of run {lead}")), "{said}");
    assert_eq!(env.show(&lead)["budget"]["usd"], 1.0);

    // Nor does it launch under another run, outside its budget.
    let other = env.ok(&["launch", "idle", "elsewhere"]).trim().to_string();
    let (ok, said) = inside(&lead, &["launch", "--parent", &other, "spend", "escape"]);
    assert!(!ok && (said.contains("stays in its own tree") || said.contains("is not one of yours")), "{said}");
    let (ok, said) = inside(&lead, &["launch", "--parent", &kid, "spend", "under the child"]);
    assert!(!ok && said.contains("budget of $1.00 reached"), "{said}");
    assert_eq!(env.json(&["ls", "--all"]).as_array().unwrap().len(), 3, "a run was launched");
    // Nor acts on a run outside its tree, at its own `corral` as at MCP.
    for args in [
        vec!["resume", other.as_str(), "--budget", "usd=1000"],
        vec!["pause", other.as_str()],
        vec!["reply", other.as_str(), "spend more"],
        vec!["abort", other.as_str()],
    ] {
        let (ok, said) = inside(&lead, &args);
        assert!(!ok && said.contains("is not one of yours"), "{args:?}: {said}");
    }
    // Untouched: it started as it would have (a busy machine may still be
    // starting it), and nothing paused or ended it.
    let other_now = env.wait_run(&other, LIMIT, |r| r["status"] != "starting");
    assert_eq!(other_now["status"], "running");
    // Nor plants a schedule, whose runs would start later outside its budget.
    let (ok, said) = inside(&lead, &["schedule", "add", "esc", "--preset", "spend", "--every", "1d", "escape"]);
    assert!(!ok && said.contains("outside the budget over run"), "{said}");
    assert!(env.json(&["schedule", "ls"]).as_array().unwrap().is_empty());
    env.ok(&["abort", &lead, &other]);
}

/// Codex and Gemini CLI say a turn's spend on their stream only at its
/// end; they write it to their own session file as they go. A run of
/// either is frozen at its budget mid-turn, its spend shown while it
/// works — sandboxed or not (a sandboxed run's session file is in its own
/// copy of the agent's folder).
#[test]
fn codex_and_gemini_are_held_to_their_budget_mid_turn() {
    for (agent, sandbox) in [("codex", ""), ("gemini", ""), ("codex", "sandbox: {write: [worktree], network: none}\n")]
    {
        let env = Env::new();
        env.config("");
        env.use_fake(agent, "session-spender");
        env.agent_preset("long", agent, sandbox);
        std::fs::create_dir_all(env.user_home.join(format!(".{agent}"))).unwrap();
        let mut launch = env.command(&["launch", "--budget", "1M tokens", "long", "work for long"]);
        let out = launch.envs([("SPEND_MESSAGES", "200"), ("SPEND_EVERY", "0.2")]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let ran = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
        assert_eq!(ran["status"], "paused", "{agent} {sandbox}: spent past its budget mid-turn: {ran:#}");
        assert_eq!(ran["pause_reason"], "budget", "{ran:#}");
        let spent = ran["usage"]["input_tokens"].as_u64().unwrap_or(0);
        assert!((1_000_000..2_000_000).contains(&spent), "{agent} {sandbox}: {spent} input tokens: {ran:#}");
        env.ok(&["abort", &id]);
    }
}

/// A night's money, item 5: Codex keeps writing a thread resumed days after
/// it began into the folder of the day it began; such a turn is followed
/// there and frozen at its budget mid-turn, as today's is.
#[test]
fn a_codex_thread_begun_days_ago_is_held_to_its_budget_mid_turn() {
    let env = Env::new();
    env.config("");
    env.use_fake("codex", "session-spender");
    env.agent_preset("long", "codex", "");
    std::fs::create_dir_all(env.user_home.join(".codex")).unwrap();
    let day = (chrono::Local::now() - chrono::Duration::days(9)).format("%Y/%m/%d").to_string();
    let mut launch = env.command(&["launch", "--budget", "1M tokens", "long", "work for long"]);
    let out = launch.envs([("SPEND_MESSAGES", "200"), ("SPEND_EVERY", "0.2"), ("SESSION_DAY", &day)]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let ran = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(ran["status"], "paused", "spent past its budget mid-turn: {ran:#}");
    let spent = ran["usage"]["input_tokens"].as_u64().unwrap_or(0);
    assert!((1_000_000..2_000_000).contains(&spent), "{spent} input tokens: {ran:#}");
    env.ok(&["abort", &id]);
}

/// A first afternoon, item 12: "Stop" on a run frozen at its budget
/// signals it while it is still frozen, then thaws it: no message of the
/// agent's is recorded after the run was recorded aborted.
#[test]
fn a_run_stopped_at_its_budget_writes_nothing_after_its_end() {
    for _ in 0..3 {
        let env = Env::new();
        env.config("");
        env.use_fake("pi", "spender");
        env.agent_preset("spend", "pi", "");
        let mut launch = env.command(&["launch", "--budget", "$1", "spend", "x"]);
        let out = launch.envs([("SPEND_EVERY", "0.001"), ("SPEND_MESSAGES", "400")]).output().unwrap();
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
        env.ok(&["abort", &id]);
        let run = env.wait_run(&id, LIMIT, |r| !r["exited_at"].is_null());
        assert_eq!(run["status"], "aborted", "{run:#}");
        let ended = run["completed_at"].as_str().unwrap().to_string();
        let events = env.store().events_before(&id, i64::MAX, 10_000).unwrap();
        let late: Vec<_> = events
            .iter()
            .filter(|e| e.at.as_str() > ended.as_str())
            .filter(|e| e.text.contains("spent message"))
            .map(|e| e.text.clone())
            .collect();
        assert!(late.is_empty(), "the agent worked after its end was recorded: {late:?}");
    }
}
