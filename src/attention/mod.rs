//! What needs you: the one list of what waits for the user's word, each
//! item a run or a schedule with why, in words, and what can be done.
//!
//! The tray's red icon and its "Needs you" section, the window's pinned
//! section, `corral needs` and the notifications all read this list, so
//! they never disagree about what needs the user. An item leaves the list
//! when it is answered (a budget raised, a run resumed or relaunched), seen
//! (a failure's transcript opened), or cleared.
//!
//! The wing around it holds the rest of what reaches the user: what the
//! desktop says when runs end (`announce`), a question and its one answer
//! (`ask`), and where the window opens to show an item (`window_route`).

pub mod announce;
pub mod ask;
pub mod window_route;

use serde::Serialize;

use crate::cost::budget::Crossing;
use crate::run::{PauseReason, Run, RunStatus};
use crate::store::{Store, StoreError};
use crate::text::time;

/// One thing that needs the user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// The run or schedule it is about.
    #[serde(flatten)]
    pub subject: Subject,
    /// Why it needs the user.
    pub reason: Reason,
    /// The reason in a few words, for a chip: "budget", "denied",
    /// "failed", "stopped" (by its budget, a signal: not by the user),
    /// "usage limit", "retrying", "paused schedule".
    pub chip: &'static str,
    /// The reason in one line, with what it is about.
    pub words: String,
    /// What the user can do, first the most likely.
    pub actions: Vec<Action>,
    /// Since when (RFC 3339).
    pub since: Option<String>,
}

/// What an item is about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Subject {
    /// A run of this machine.
    Run {
        /// Its id.
        id: String,
        /// Its preset.
        preset: String,
        /// The first words of its task.
        task: String,
    },
    /// A schedule.
    Schedule {
        /// Its name.
        name: String,
    },
}

impl Subject {
    /// Run `run`: its id, preset and the first words of its task.
    fn of(run: &Run) -> Subject {
        Subject::Run { id: run.id.clone(), preset: run.preset.clone(), task: run.task.chars().take(80).collect() }
    }
}

/// Why an item needs the user.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// Frozen at a budget (its own or a run's that launched it).
    Budget {
        /// The run whose budget it is.
        owner: String,
        /// The budget, in words (`$2.00`).
        budget: String,
        /// What was spent, in words (`≈$2.10`).
        spent: String,
    },
    /// Ended with actions its agent was refused, or its sandbox refused.
    Denied {
        /// What was refused (`Bash(npm test)`, `sandbox: write /etc/x`).
        what: Vec<String>,
    },
    /// Failed, or lost with its supervisor.
    Failed {
        /// Why, in words.
        error: String,
    },
    /// Paused at its agent's usage limit; goes on by itself.
    UsageLimit {
        /// When it goes on (RFC 3339).
        resumes_at: Option<String>,
    },
    /// Its agent keeps retrying (an API that refuses, say).
    Retrying {
        /// What the agent last said.
        said: String,
    },
    /// A schedule that paused itself after its fires failed.
    SchedulePaused {
        /// Why, as the schedule says.
        why: String,
    },
    /// Its pull request asks something of it (failed checks, changes
    /// requested), or was merged or closed on the forge.
    PullRequest {
        /// `#42`, `!42`, or its page.
        name: String,
        /// `open`, `merged` or `closed`.
        state: String,
        /// What the forge asks, in its words (while open).
        asks: Option<String>,
    },
    /// A schedule whose latest fires all failed (it goes on firing).
    ScheduleFailing {
        /// How many in a row.
        failed: usize,
    },
}

/// Fires in a row that failed before a schedule that goes on firing needs
/// the user.
pub const FAILING_FIRES: usize = 3;

/// Something the user can do about an item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    /// What the button says.
    pub label: String,
    /// The same as a `corral` command line (its arguments).
    pub argv: Vec<String>,
}

impl Action {
    fn new(label: impl Into<String>, argv: &[&str]) -> Action {
        Action { label: label.into(), argv: argv.iter().map(|a| a.to_string()).collect() }
    }
}

/// True if `argv` is an action the list offers now: the tray, the window
/// and `corral top` carry out only such a one, so a second press, or a
/// press on a list that changed meanwhile, does nothing (a budget raised
/// twice, a run relaunched twice).
pub fn still_offered(store: &Store, argv: &[String]) -> Result<bool, StoreError> {
    Ok(needs_you(store)?.into_iter().flat_map(|i| i.actions).any(|a| a.argv == argv))
}

/// The list as every view shows it: its items, and how many older ended
/// runs that need the user it leaves out — said as "and N more", never
/// dropped, so a count is the whole count (650 unseen failures read 650).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Needs {
    /// What [`needs_you`] lists.
    pub items: Vec<Item>,
    /// Ended runs that need the user beyond those listed.
    pub beyond: u64,
}

impl Needs {
    /// How many things need the user, listed or not.
    pub fn total(&self) -> u64 {
        self.items.len() as u64 + self.beyond
    }
}

/// [`needs_you`] with what it leaves out counted.
pub fn needs(store: &Store) -> Result<Needs, StoreError> {
    Ok(Needs { items: needs_you(store)?, beyond: store.needing_you_beyond()? })
}

/// Everything that needs the user now: runs (newest first), then
/// schedules.
pub fn needs_you(store: &Store) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    for run in store.runs_needing_you()? {
        if let Some(item) = of_run(store, &run)? {
            items.push(item);
        }
    }
    // Runs of other hosts waiting for the user's word, as last seen: a
    // run frozen at its budget there needs the user here as much.
    for run in store.remote_runs(None)? {
        if let Some(item) = of_host_run(&run) {
            items.push(item);
        }
    }
    // Pull requests the forge asks something of, or that ended there.
    for pr in store.pull_requests()? {
        if let Some(item) = pull_request_item(store, &pr)? {
            items.push(item);
        }
    }
    for schedule in store.schedules()? {
        if let Some(item) = schedule_item(store, schedule) {
            items.push(item);
        }
    }
    Ok(items)
}

/// The item of a run's pull request, if it needs the user: the forge asks
/// something of the run that was neither sent to it nor answered by a push
/// (Send to the run), or it was merged or closed there while the run's
/// worktree is still here (Remove worktree, or Dismiss).
pub(crate) fn pull_request_item(store: &Store, pr: &crate::store::PullRequestRow) -> Result<Option<Item>, StoreError> {
    let run = match store.run(&pr.run_id) {
        Ok(run) => run,
        Err(StoreError::UnknownRun(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let id = run.id.as_str();
    let name = pr.name();
    let mut who = format!("{} ({id})", run.preset);
    let mut runs = vec![id.to_string()];
    if pr.together {
        // One item for the pull request of several runs, on its first.
        runs = store.runs_together(&pr.url)?;
        if runs.first().map(String::as_str) != Some(id) {
            return Ok(None);
        }
        who = format!("{} runs ({})", runs.len(), runs.join(", "));
    }
    let mut members = vec![run.clone()];
    for other in runs.iter().filter(|other| *other != id) {
        members.extend(store.run(other).ok());
    }
    // The worktrees still here, which a pull request ended on the forge
    // offers to remove.
    let worktrees: Vec<&str> = members.iter().filter(|r| r.worktree.is_some()).map(|r| r.id.as_str()).collect();
    let (chip, words, actions) = if pr.asks() {
        let mut what = Vec::new();
        if pr.review.as_deref() == Some("changes_requested") {
            what.push("changes requested".to_string());
        }
        if pr.checks.as_deref() == Some("failing") {
            what.push("checks failing".to_string());
        }
        let mut actions = Vec::new();
        // A command has no session to go on in: the words are sent only
        // to an agent (of several, to those that can go on).
        let goes_on = |r: &crate::run::Run| r.agent != crate::run::AgentKind::Command && r.worktree.is_some();
        if members.iter().any(goes_on) {
            let label = if runs.len() > 1 { "Send to the runs" } else { "Send to the run" };
            actions.push(Action::new(label, &["pr", id, "--send"]));
        }
        actions.push(Action::new("Open", &["show", id]));
        actions.push(Action::new("Dismiss", &["pr", id, "--dismiss"]));
        ("pull request", format!("{who}: {} {name}: {}", pr.kind(), what.join(", ")), actions)
    } else if pr.ended_unseen() && !worktrees.is_empty() {
        let actions = vec![
            Action::new("Remove worktree", &[&["discard"], worktrees.as_slice()].concat()),
            Action::new("Dismiss", &["pr", id, "--dismiss"]),
        ];
        (
            "pull request",
            format!("{who}: {} {name} was {} on the forge: its worktree can go", pr.kind(), pr.state),
            actions,
        )
    } else {
        return Ok(None);
    };
    let reason = Reason::PullRequest { name, state: pr.state.clone(), asks: pr.feedback.clone().filter(|_| pr.asks()) };
    let since = pr.feedback_at.clone().or_else(|| pr.looked_at.clone());
    Ok(Some(Item { subject: Subject::of(&run), reason, chip, words, actions, since }))
}

/// The item of a schedule, if it needs the user: it paused itself after
/// failures (a pause the user gave is theirs), or keeps failing.
fn schedule_item(store: &Store, schedule: crate::store::ScheduleRow) -> Option<Item> {
    let name = schedule.name;
    let (reason, chip, words, first, since) = match (schedule.paused_at, schedule.paused_why) {
        (Some(_), Some(why)) if why == "by request" => return None,
        (Some(since), Some(why)) => {
            let words = format!("schedule {name} paused itself: {why}");
            (Reason::SchedulePaused { why }, "paused schedule", words, ("Resume schedule", "resume"), Some(since))
        }
        (Some(_), None) => return None,
        (None, _) => {
            let failed = crate::schedule::failed_in_a_row(store, &name, None).unwrap_or(0);
            if failed < FAILING_FIRES {
                return None;
            }
            let words = format!("schedule {name}: its last {failed} fires failed");
            (Reason::ScheduleFailing { failed }, "failing schedule", words, ("Pause schedule", "pause"), None)
        }
    };
    let actions = vec![
        Action::new(first.0, &["schedule", first.1, &name]),
        Action::new("Show fires", &["schedule", "show", &name]),
    ];
    Some(Item { subject: Subject::Schedule { name }, reason, chip, words, actions, since })
}

/// The item of `run`, if it needs the user: what its page says beside its
/// status, whether or not the list still pins it.
pub fn of_run(store: &Store, run: &Run) -> Result<Option<Item>, StoreError> {
    let id = run.id.as_str();
    let name = format!("{} ({id})", run.preset);
    let subject = Subject::of(run);
    let (reason, chip, words, actions, since) = match (run.status, run.pause_reason) {
        (RunStatus::Paused, Some(PauseReason::Budget)) => {
            let Some(crossing) = store.budget_crossed(id)? else { return Ok(None) };
            let (reason, chip, words, actions) = budget_answers(&name, id, &crossing);
            (reason, chip, words, actions, run.paused_at.clone())
        }
        (RunStatus::Paused, Some(PauseReason::UsageLimit)) => {
            let (reason, chip, words, actions) = limit_answers(&name, run);
            (reason, chip, words, actions, run.paused_at.clone())
        }
        (RunStatus::Paused, _) => return Ok(None),
        // Held in the queue by its agent's usage limit, which outlives the
        // run that hit it: said, with when it starts.
        (RunStatus::Queued, _) => {
            let Some(limit) = store.agent_limit(run.agent)? else { return Ok(None) };
            let at = time::parse(&limit.resets_at).map(time::clock).unwrap_or(limit.resets_at.clone());
            let words = format!("{name} queued behind {}'s usage limit: starts by itself at {at}", run.agent);
            let reason = Reason::UsageLimit { resumes_at: Some(limit.resets_at.clone()) };
            let actions = vec![Action::new("Stop", &["abort", id])];
            (reason, "usage limit", words, actions, Some(run.created_at.clone()))
        }
        (status, _) if run.ended_badly() => {
            let error = error_words(run.error.as_deref().unwrap_or("no reason was recorded"));
            let words = format!("{name} {status}: {error}");
            let mut actions = vec![Action::new("Open", &["show", id])];
            // Not under a spent budget of a run above it: no run is
            // launched under it (its own budget starts again in a relaunch).
            if store.budget_crossed(id)?.is_none_or(|c| c.owner == run.id) {
                actions.push(Action::new("Relaunch", &["relaunch", id]));
            }
            actions.extend(denial_actions(run));
            actions.push(Action::new("Dismiss", &["needs", "--dismiss", id]));
            let chip = if status == RunStatus::Aborted { "stopped" } else { "failed" };
            (Reason::Failed { error }, chip, words, actions, run.completed_at.clone())
        }
        (status, _) if status.is_terminal() && !run.denied.is_empty() => {
            let what = run.denied.clone();
            let words = format!("{name} {status}: {}", crate::run::denied_note(&what).unwrap_or_default());
            let mut actions = denial_actions(run);
            actions.push(Action::new("Open", &["show", id]));
            actions.push(Action::new("Dismiss", &["needs", "--dismiss", id]));
            (Reason::Denied { what }, "denied", words, actions, run.completed_at.clone())
        }
        (status, _) if status.is_active() => {
            let Some(said) = run.retrying.clone() else { return Ok(None) };
            let words = format!("{name} keeps retrying: {}", error_words(&said));
            let actions = vec![Action::new("Open", &["show", id]), Action::new("Stop", &["abort", id])];
            (Reason::Retrying { said }, "retrying", words, actions, run.started_at.clone())
        }
        _ => return Ok(None),
    };
    Ok(Some(Item { subject, reason, chip, words, actions, since }))
}

/// What a run frozen at `crossing` needs (`name` says the run `id`): the
/// budget in words, "Allow more" and "Stop", each acting on its owner.
fn budget_answers(name: &str, id: &str, crossing: &Crossing) -> (Reason, &'static str, String, Vec<Action>) {
    let more = more_of(crossing);
    let owner = crossing.owner.as_str();
    let words = format!("{name} paused: {}", crossing.words(id));
    let reason =
        Reason::Budget { owner: owner.to_string(), budget: crossing.budget.words(), spent: spent_words(crossing) };
    let actions = vec![
        Action::new(format!("Allow {} more", more.1), &["resume", owner, "--budget", &more.0]),
        Action::new("Stop", &["abort", owner]),
    ];
    (reason, "budget", words, actions)
}

/// What `run`, paused at its usage limit, needs: when it goes on, "Resume
/// now" and "Stop".
fn limit_answers(name: &str, run: &Run) -> (Reason, &'static str, String, Vec<Action>) {
    let id = run.id.as_str();
    let at = run.resumes_at.as_deref().and_then(time::parse).map(time::clock);
    let words = match &at {
        Some(at) => format!("{name} paused at its usage limit: goes on by itself at {at}"),
        None => format!("{name} paused at its usage limit"),
    };
    let reason = Reason::UsageLimit { resumes_at: run.resumes_at.clone() };
    let actions = vec![Action::new("Resume now", &["resume", id]), Action::new("Stop", &["abort", id])];
    (reason, "usage limit", words, actions)
}

/// The item of `run` of another host, if it waits for the user's word:
/// paused at its budget (what its store said of its budget and spend) or
/// at a usage limit. Its actions are the CLI's, which carries them out
/// there.
fn of_host_run(run: &Run) -> Option<Item> {
    let id = run.id.as_str();
    let host = run.host.as_deref().unwrap_or("another host");
    let name = format!("{} ({id}) on {host}", run.preset);
    let subject = Subject::of(run);
    if run.status != RunStatus::Paused {
        return None;
    }
    let (reason, chip, words, actions) = match run.pause_reason? {
        PauseReason::Budget => {
            let budget = run.budget?;
            let spent = crate::cost::budget::Spent {
                usd: run.cost_usd.unwrap_or(0.0).max(0.0),
                estimated: run.cost_estimated,
                tokens: run.usage.total(),
                unpriced_runs: 0,
            };
            let crossing = Crossing {
                owner: run.id.clone(),
                budget,
                step: budget,
                spent,
                on_budget: crate::cost::budget::OnBudget::Pause,
            };
            budget_answers(&name, id, &crossing)
        }
        PauseReason::UsageLimit => limit_answers(&name, run),
    };
    Some(Item { subject, reason, chip, words, actions, since: run.paused_at.clone() })
}

/// What answers what `run` was refused, each as the CLI takes it: a
/// sandbox's refused write or host widened (`corral allow`: the folder the
/// write needs, as "Allow and continue" would make it; offered only where
/// it exists), and "Allow and continue" for all of it in one turn, offered
/// only where a click can allow something (never for a read of `~/.ssh`
/// alone). A run whose agent has no session to go on in (`agent:
/// command`) is never run again: nothing is offered that would widen it
/// (its preset's `sandbox:` is where its next runs are widened).
fn denial_actions(run: &Run) -> Vec<Action> {
    use crate::sandbox::denial::{self, Allowance, Denial};
    let id = run.id.as_str();
    let goes_on = run.agent != crate::run::AgentKind::Command;
    if !goes_on {
        return Vec::new();
    }
    // The home `corral allow` and "Allow and continue" judge by.
    let home = crate::verbs::allow::user_home();
    let mut actions: Vec<Action> = Vec::new();
    for denial in run.denied.iter().filter_map(|d| Denial::from_entry(d)) {
        let (label, argv) = match denial.allowance(&home) {
            Some(Allowance::Write { path, .. }) if path.is_dir() || path.is_file() => {
                // Said as `corral allow` will widen it: a link on the way
                // (an agent's `./tools` pointing at ~/.local/bin) named
                // where it leads, never where it seems to be; and never
                // one `allow` refuses (`/`, a folder holding the home).
                let path = std::fs::canonicalize(&path).unwrap_or(path);
                let real_home = std::fs::canonicalize(&home).unwrap_or_else(|_| home.clone());
                let too_wide = path.parent().is_none() || home.starts_with(&path) || real_home.starts_with(&path);
                if too_wide || denial::never_by_click(&path, &home) {
                    continue;
                }
                let path = path.to_string_lossy().into_owned();
                (format!("Allow writing {path}"), vec!["allow".to_string(), id.into(), "--write".into(), path])
            }
            // Only a host `corral allow` takes (a refusal read from an
            // agent's words may name something else).
            Some(Allowance::Host(host)) if crate::sandbox::host_name(&host).is_ok() => {
                (format!("Allow {host}"), vec!["allow".to_string(), id.into(), "--host".into(), host])
            }
            _ => continue,
        };
        if !actions.iter().any(|a| a.argv == argv) {
            actions.push(Action { label, argv });
        }
    }
    // A tool call it was refused, or a refusal of its sandbox a click can
    // widen: then, and only then, it can be allowed and go on.
    let tools = run.denied.iter().any(|d| !denial::is_entry(d));
    if tools || !actions.is_empty() {
        actions.push(Action::new("Allow and continue", &["reply", id, "--allow-denied"]));
    }
    actions
}

/// "Allow more" ([`Crossing::more`]) as `resume --budget` takes it, and
/// in words (`$2.00 · 1k tokens`): the budget it comes to, exactly
/// (`usd=4,tokens=3000`), every limit it has (a run over either goes
/// on). A target, not a raise: two presses, from two terminals at once,
/// raise it once.
fn more_of(crossing: &Crossing) -> (String, String) {
    let mut more = crossing.more();
    // As many steps as it takes to be past what was spent: a message that
    // cost more than one step would leave a raise of one step spent too,
    // and `resume` refuses a budget that is spent.
    if let (Some(budget), Some(step)) = (crossing.budget.usd, more.usd.filter(|s| *s > 0.0)) {
        let steps = ((crossing.spent.usd - budget) / step).floor().max(0.0) + 1.0;
        more.usd = Some(step * steps);
    }
    if let (Some(budget), Some(step)) = (crossing.budget.tokens, more.tokens.filter(|s| *s > 0)) {
        let steps = crossing.spent.tokens.saturating_sub(budget) / step + 1;
        more.tokens = Some(step.saturating_mul(steps));
    }
    let to = crossing.budget.raised_by(&more);
    let mut exact = Vec::new();
    if let Some(usd) = to.usd {
        // Exact to a millionth of a dollar, never `0.3333333333333333`.
        let usd = format!("{usd:.6}");
        exact.push(format!("usd={}", usd.trim_end_matches('0').trim_end_matches('.')));
    }
    if let Some(tokens) = to.tokens {
        exact.push(format!("tokens={tokens}"));
    }
    if exact.is_empty() {
        return ("+1".to_string(), "$1.00".to_string());
    }
    (exact.join(","), more.words())
}

/// What was spent of a crossed budget, in its units.
fn spent_words(crossing: &Crossing) -> String {
    let mut parts = Vec::new();
    if crossing.budget.usd.is_some() {
        parts.push(crossing.spent.dollars());
    }
    if crossing.budget.tokens.is_some() {
        parts.push(crate::cost::budget::Budget { usd: None, tokens: Some(crossing.spent.tokens) }.words());
    }
    parts.join(" · ")
}

/// An error in words: the message inside an API's JSON body (`529
/// {"type":"error","error":{"message":"Overloaded"}}` is `529: Overloaded`),
/// its first line otherwise.
pub fn error_words(error: &str) -> String {
    let first = error.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_string();
    let Some(at) = error.find('{') else { return first };
    let mut values = serde_json::Deserializer::from_str(&error[at..]).into_iter::<serde_json::Value>();
    let Some(Ok(body)) = values.next() else { return first };
    let message = ["/error/message", "/message", "/error/error/message", "/detail", "/error"]
        .iter()
        .find_map(|path| body.pointer(path).and_then(serde_json::Value::as_str).map(str::to_string));
    match message {
        Some(message) => {
            let before = error[..at].trim().trim_end_matches(':').trim();
            if before.is_empty() {
                message
            } else {
                format!("{before}: {message}")
            }
        }
        None => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apis_json_error_is_said_in_its_words() {
        let raw = r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_words(raw), "529: Overloaded");
        assert_eq!(error_words("API Error: 401 {\"message\":\"bad key\"}"), "API Error: 401: bad key");
        assert_eq!(error_words("the agent exited with 2\nmore"), "the agent exited with 2");
        assert_eq!(error_words("broken { json"), "broken { json");
    }
}
