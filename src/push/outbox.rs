//! What is pushed, and sending it: a budget reached (with "Allow $2 more"
//! and "Stop"), a run that ended with actions denied (with "Allow and
//! continue"), a run that failed, runs paused at a usage limit, and what
//! the forge asks of a run's pull request (with "Send to the run") or its
//! end there, each kept in the store under its key (`budget:RUN:BUDGET`,
//! `denied:RUN:END`, `failed:RUN`, `limit:AGENT RESET`, `pr:RUN:ASKED` or
//! `pr:RUN:STATE`) so it is sent once, by whichever
//! process claims it; one the server did not take is sent again later.
//! Endings are pushed from `since` on (when the sender started): turning
//! pushes on does not send the history.

use serde_json::{json, Value};

use super::{token, Channel};
use crate::attention::ask::Ask;
use crate::home::config::PushConfig;
use crate::store::{Store, StoreError};

/// How long a push's buttons stand.
pub const ANSWERS_STAND: i64 = 24 * 3600;

/// The key of the push that asks about `ask`: the run whose budget it is,
/// that budget and when the ask began, so an answer to an earlier ask of
/// the same run (a budget since raised and reached again, or the same
/// budget reached again after a resume) acts on nothing, and the new ask
/// is pushed.
pub fn budget_key(ask: &Ask) -> String {
    format!("budget:{}:{}:{}", ask.owner(), ask.crossing.budget.spec(), ask.since)
}

/// The key of the push that offers to allow run `run`'s denied actions,
/// for the end it had (`completed_at`): an answer to an earlier end acts
/// on nothing.
pub fn denied_key(run: &crate::Run) -> String {
    format!("denied:{}:{}", run.id, run.completed_at.as_deref().unwrap_or(""))
}

/// Most characters of a push's title or message (a task can be long).
const PUSHED_CHARS: usize = 500;

/// Keeps in the store each push that needs sending now: returns how many
/// are new. Endings count from `since` (RFC 3339) on.
pub fn gather(store: &mut Store, config: &PushConfig, secret: &[u8], since: &str) -> Result<usize, StoreError> {
    let expires = chrono::Utc::now().timestamp() + ANSWERS_STAND;
    let mut wanted: Vec<(String, Value)> = Vec::new();
    if config.sends("budget") {
        for ask in crate::attention::ask::pending(store)? {
            let key = budget_key(&ask);
            let mut message = ask.body();
            if config.details {
                let task = store.run(ask.owner())?.task;
                message = format!("{message}\nTask: {task}");
            }
            let actions = json!([
                {"label": ask.allow_words(), "answer": token::sign(secret, &key, "allow", expires)},
                {"label": "Stop", "answer": token::sign(secret, &key, "stop", expires)},
            ]);
            let message = json!({"key": key, "title": ask.summary(), "message": message, "priority": 4,
                "tags": ["pause_button"], "run": ask.owner(), "actions": actions});
            wanted.push((key, message));
        }
    }
    if config.sends("denied") || config.sends("failed") {
        let filter = crate::store::RunFilter { ended_since: Some(since.to_string()), ..Default::default() };
        for run in store.runs(&filter)?.into_iter().filter(|r| r.parent_id.is_none() && r.host.is_none()) {
            let what = if config.details { format!("\nTask: {}", run.task) } else { String::new() };
            if config.sends("denied") && !run.denied.is_empty() && run.status.is_terminal() {
                let key = denied_key(&run);
                // What was denied (a command line, its tokens with it) is
                // a detail: without details, only how many.
                let note = match config.details {
                    true => run.denied_note().unwrap_or_default(),
                    false => match run.denied.len() {
                        1 => "1 action was denied".to_string(),
                        n => format!("{n} actions were denied"),
                    },
                };
                let actions = json!([{"label": "Allow and continue", "answer": token::sign(secret, &key, "allow-denied", expires)}]);
                let message = json!({"key": key, "title": format!("✋ {} ({}) ended: {note}", run.preset, run.id),
                    "message": format!("Allow them and it goes on in its own session.{what}"), "priority": 4,
                    "tags": ["raised_hand"], "run": run.id, "actions": actions});
                wanted.push((key, message));
            } else if config.sends("failed") && matches!(run.status, crate::RunStatus::Failed | crate::RunStatus::Lost)
            {
                let key = format!("failed:{}", run.id);
                let reason = run.stop_reason.map(|r| r.to_string()).unwrap_or_default();
                let message = json!({"key": key, "title": format!("✗ {} ({}) {}: {reason}", run.preset, run.id, run.status),
                    "message": format!("See it with `corral show {}`.{what}", run.id), "priority": 4,
                    "tags": ["x"], "run": run.id, "actions": []});
                wanted.push((key, message));
            }
        }
    }
    if config.sends("usage_limit") {
        for (key, note) in crate::attention::announce::usage_limits(store)? {
            let key = format!("limit:{key}");
            let message = json!({"key": key, "title": note.summary, "message": note.body, "priority": 3,
                "tags": ["hourglass"], "run": note.run, "actions": []});
            wanted.push((key, message));
        }
    }
    if config.sends("pull_request") {
        for pr in store.pull_requests()? {
            let Some((key, note)) = crate::attention::announce::pull_request(store, &pr)? else { continue };
            // The forge's words are a detail; without details, what is asked.
            let message = match (config.details, pr.asks()) {
                (true, _) => note.body,
                (false, true) => format!("Send it to the run, or see it with `corral show {}`.", pr.run_id),
                // What to run (`corral discard A B`): no words of the forge.
                (false, false) => note.body,
            };
            let actions = match pr.asks() {
                true => json!([{"label": "Send to the run", "answer": token::sign(secret, &key, "send", expires)}]),
                false => json!([]),
            };
            let message = json!({"key": key, "title": note.summary, "message": message, "priority": 3,
                "tags": ["arrows_counterclockwise"], "run": pr.run_id, "actions": actions});
            wanted.push((key, message));
        }
    }
    let mut new = 0;
    for (key, mut message) in wanted {
        // What the checkout's carried files hold (`.env`) is never pushed,
        // whatever the agent put it in and whichever push says it.
        let run = message["run"].as_str().and_then(|id| store.run(id).ok());
        let carried = run.map(|run| carried_values(store, &run)).unwrap_or_default();
        for field in ["title", "message"] {
            if let Some(text) = message[field].as_str() {
                // Hidden whole, then cut (a value cut first would not be
                // found).
                let hidden = crate::worktree::carry::hide(text, &carried);
                message[field] = hidden.chars().take(PUSHED_CHARS).collect::<String>().into();
            }
        }
        if store.queue_push(&key, &message.to_string())? {
            new += 1;
        }
    }
    Ok(new)
}

/// Sends every push not sent yet whose try is due; one the server did not
/// take is given back, tried again a little later each time (one the phone
/// took and the webhook did not goes again to the webhook alone). Returns
/// how many were sent.
pub fn send(store: &mut Store, channel: &Channel) -> Result<usize, StoreError> {
    let mut sent = 0;
    let claimed = store.claim_unsent_pushes()?;
    // An ask the user answered meanwhile (the run stopped or resumed at the
    // terminal while the server was away) is asked no more: never a
    // "paused: budget reached" for a run that is not.
    let asked: Vec<String> = match claimed.iter().any(|p| p.key.starts_with("budget:")) {
        true => crate::attention::ask::pending(store)?.iter().map(budget_key).collect(),
        false => Vec::new(),
    };
    for push in claimed {
        if push.key.starts_with("budget:") && !asked.contains(&push.key) {
            store.push_sent(&push.key)?;
            continue;
        }
        let message: Value = serde_json::from_str(&push.body).unwrap_or(Value::Null);
        match channel.publish(&message, push.webhook_only) {
            Ok(()) => {
                store.push_sent(&push.key)?;
                sent += 1;
            }
            Err(failed) => {
                tracing::warn!("push {} not sent, sent again later: {}", push.key, failed.error);
                store.push_not_sent(&push.key, &failed.error.to_string(), failed.phone_took)?;
            }
        }
    }
    Ok(sent)
}

/// The values of the files carried into run `run`'s worktree.
fn carried_values(store: &Store, run: &crate::Run) -> Vec<String> {
    let Some(checkout) = run.worktree_repo.as_deref() else { return Vec::new() };
    let list = std::fs::read_to_string(crate::worktree::carry::list_file(&store.home().run_dir(&run.id)));
    crate::worktree::carry::values(std::path::Path::new(checkout), &list.unwrap_or_default())
}
