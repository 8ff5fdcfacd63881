//! Runs: the list, one run with its transcript pages, abort, relaunch,
//! "Clear finished", and the timeline.

use std::collections::HashSet;
use std::time::Duration;

use corral::store::{fold_usage, DaySpend, RunFilter, ShownEvent, Spend};
use corral::text::time;
use corral::{Run, RunStatus};
use serde::Serialize;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// Runs, newest first, at most `limit` (a page; all without it), this
/// machine's and its hosts': optionally only one status, one machine
/// (`local` or a host's name), only matches of a full-text search, or
/// including cleared ones.
#[tauri::command(async)]
pub fn list_runs(
    state: State<'_, AppState>,
    status: Option<String>,
    host: Option<String>,
    query: Option<String>,
    all: Option<bool>,
    limit: Option<usize>,
    ended_since: Option<String>,
) -> Result<Vec<Run>, AppError> {
    let store = state.store()?;
    let status = match status.as_deref().filter(|s| !s.is_empty()) {
        Some(word) => Some(word.parse::<RunStatus>().map_err(|e| AppError::Invalid(e.to_string()))?),
        None => None,
    };
    let query = query.as_deref().map(str::trim).filter(|q| !q.is_empty());
    // A search looks through every run, then pages its matches.
    let page = if query.is_some() { None } else { limit };
    let filter = RunFilter {
        include_dismissed: all.unwrap_or(false),
        status,
        limit: page,
        ended_since: ended_since.filter(|s| !s.is_empty()),
        ..RunFilter::default()
    };
    // `host`: "local" for this machine's runs, a host's name for its runs.
    let host = host.filter(|h| !h.is_empty());
    let mut runs = if host.as_deref().is_none_or(|h| h == "local") { store.runs(&filter)? } else { Vec::new() };
    // Runs of other hosts (as last followed), with theirs among them.
    let remote: Vec<Run> = store
        .remote_runs(host.as_deref().filter(|h| *h != "local"))?
        .into_iter()
        .filter(|_| host.as_deref() != Some("local"))
        .filter(|r| status.is_none_or(|s| s == r.status))
        .filter(|r| {
            filter.ended_since.as_ref().is_none_or(|since| r.completed_at.as_ref().is_some_and(|at| at >= since))
        })
        .collect();
    if !remote.is_empty() {
        runs.extend(remote);
        runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    }
    if let Some(query) = query {
        let hits: HashSet<String> = store.search_run_ids(query, 500)?.into_iter().collect();
        runs.retain(|r| {
            hits.contains(&r.id)
                || r.preset.contains(query)
                || r.id.starts_with(query)
                || r.host.as_deref() == Some(query)
                || (r.host.is_some() && r.task.contains(query))
        });
    }
    runs.truncate(limit.unwrap_or(usize::MAX));
    Ok(runs)
}

/// One run for the run view.
#[derive(Serialize)]
pub struct RunDetail {
    run: Run,
    /// The last 4 KiB of what the agent wrote to stderr.
    stderr_tail: String,
    /// Transcript events (numbered 1..=count).
    event_count: i64,
    folder: String,
    /// While it is paused for a budget: what the user is asked.
    ask: Option<BudgetAsk>,
    /// Its budget and what it and its child runs spent of it.
    meter: Option<BudgetMeter>,
    /// Its error in words ("529: Overloaded", not the API's JSON).
    error_words: Option<String>,
    /// Its child runs, each with its status.
    children: Vec<Child>,
    /// Why it needs the user, if it does (the same item as Needs you).
    need: Option<corral::attention::Item>,
    /// Why it stopped, when that says more than its status.
    reason: Option<corral::run::StopReason>,
}

/// A run's budget as its page draws it: a meter.
#[derive(Serialize)]
pub struct BudgetMeter {
    /// "$2.00 · 1M tokens".
    budget: String,
    /// "$1.20 · 705k tokens" (with its child runs').
    spent: String,
    /// How full: 0.0 to 1.0 and past it.
    used: f64,
}

/// A child run on its parent's page.
#[derive(Serialize)]
pub struct Child {
    id: String,
    preset: String,
    status: corral::RunStatus,
    task: String,
}

/// A budget reached, as the run view asks about it.
#[derive(Serialize)]
pub struct BudgetAsk {
    /// The run whose budget it is (this run, or one that launched it).
    owner: String,
    /// "budget of $1.00 reached: $1.20 spent".
    words: String,
    /// "Allow $1.00 more".
    allow: String,
    /// Runs paused for it.
    paused: usize,
}

/// One run, with its stderr tail and transcript size. Opening a run marks
/// it seen (the tray's failure look ends).
#[tauri::command(async)]
pub fn get_run(state: State<'_, AppState>, id: String) -> Result<RunDetail, AppError> {
    let mut store = state.store()?;
    let run = match store.find_run(&id) {
        Err(corral::store::StoreError::UnknownRun(_)) => match store.find_remote_run(&id)? {
            // Another host's: its transcript is fetched now, once.
            Some(run) => {
                let event_count = fold_usage(&state.remote_transcript(&run, true)?).len() as i64;
                let folder = format!("{}:{}", run.host.as_deref().unwrap_or_default(), run.cwd);
                let error_words = run.error.as_deref().map(corral::attention::error_words);
                let reason = run.stop_reason_said();
                return Ok(RunDetail {
                    run,
                    stderr_tail: String::new(),
                    event_count,
                    folder,
                    ask: None,
                    meter: None,
                    error_words,
                    children: Vec::new(),
                    need: None,
                    reason,
                });
            }
            None => return Err(corral::store::StoreError::UnknownRun(id).into()),
        },
        other => other?,
    };
    store.mark_seen(&run.id)?;
    let folder = state.home.run_dir(&run.id);
    let ask =
        corral::attention::ask::pending(&store)?.into_iter().find(|a| a.paused.contains(&run.id)).map(|a| BudgetAsk {
            words: a.crossing.words(&run.id),
            allow: a.allow_words(),
            paused: a.paused.len(),
            owner: a.owner().to_string(),
        });
    let meter = budget_meter(&store, &run)?;
    let children = store
        .runs(&RunFilter { include_dismissed: true, parent_id: Some(run.id.clone()), ..RunFilter::default() })?
        .into_iter()
        .map(|c| Child { id: c.id, preset: c.preset, status: c.status, task: c.task })
        .collect();
    Ok(RunDetail {
        need: corral::attention::of_run(&store, &run)?,
        reason: run.stop_reason_said(),
        ask,
        meter,
        children,
        error_words: run.error.as_deref().map(corral::attention::error_words),
        event_count: store.shown_count(&run.id)?,
        stderr_tail: store.stderr_tail(&run.id, 4096)?,
        folder: folder.display().to_string(),
        run,
    })
}

/// What a streaming transcript on screen needs to draw its new rows and
/// its run's figures.
#[derive(Serialize)]
pub struct Growth {
    /// How many rows the transcript shows (usage folded into the row
    /// before it).
    rows: i64,
    /// The run as it is now (its duration, tokens and cost).
    run: Run,
    /// Its budget meter.
    meter: Option<BudgetMeter>,
}

/// How run `id`'s transcript and figures have grown.
#[tauri::command(async)]
pub fn transcript_size(state: State<'_, AppState>, id: String) -> Result<Growth, AppError> {
    let store = state.store()?;
    match store.find_run(&id) {
        Err(corral::store::StoreError::UnknownRun(_)) => match store.find_remote_run(&id)? {
            Some(run) => {
                Ok(Growth { rows: fold_usage(&state.remote_transcript(&run, false)?).len() as i64, run, meter: None })
            }
            None => Err(corral::store::StoreError::UnknownRun(id).into()),
        },
        other => {
            let run = other?;
            Ok(Growth { rows: store.shown_count(&id)?, meter: budget_meter(&store, &run)?, run })
        }
    }
}

/// Run `run`'s budget meter, if it has a budget of its own.
fn budget_meter(store: &corral::store::Store, run: &Run) -> Result<Option<BudgetMeter>, AppError> {
    let Some(budget) = run.budget else { return Ok(None) };
    let spent = store.tree_spent(&run.id)?;
    let tokens = corral::cost::budget::short_count(spent.tokens);
    Ok(Some(BudgetMeter {
        budget: budget.words(),
        spent: format!("{} · {tokens} tokens", spent.dollars()),
        used: budget.used(&spent),
    }))
}

/// A page of a run's transcript as shown: rows from position `offset`
/// (from 0), at most `limit` (capped at 2000), each with the token usage
/// reported after it.
#[tauri::command(async)]
pub fn transcript(
    state: State<'_, AppState>,
    id: String,
    offset: usize,
    limit: usize,
) -> Result<Vec<ShownEvent>, AppError> {
    let store = state.store()?;
    let limit = limit.min(2000);
    match store.find_remote_run(&id)? {
        Some(run) if store.find_run(&id).is_err() => {
            let events = state.remote_transcript(&run, false)?;
            Ok(fold_usage(&events).into_iter().skip(offset).take(limit).collect())
        }
        _ => Ok(store.shown_page(&id, offset, limit)?),
    }
}

/// Aborts a run (and its active descendants).
#[tauri::command(async)]
pub fn abort_run(state: State<'_, AppState>, id: String) -> Result<Run, AppError> {
    let mut store = state.store()?;
    if store.find_run(&id).is_err() {
        if let Some(run) = store.find_remote_run(&id)? {
            corral::remote::act(&state.home, &run, &["abort".into(), run.id.clone().into()])?;
            return Ok(run);
        }
    }
    let config = corral::home::config::Config::load(&state.home)?;
    let result =
        corral::verbs::abort::abort(&mut store, &id, config.stop_grace + Duration::from_secs(2), &state.shepherd()?)?;
    Ok(result.run().clone())
}

/// Pauses (freezes) a running run, or resumes a paused one.
#[tauri::command(async)]
pub fn pause_run(state: State<'_, AppState>, id: String, paused: bool) -> Result<Run, AppError> {
    let mut store = state.store()?;
    Ok(corral::verbs::pause::pause(&mut store, &id, paused, corral::verbs::pause::PATIENCE, &state.shepherd()?)?)
}

/// Answers the ask of run `owner`'s budget: allow as much again
/// (`allow`), or stop it. Acts once: a second answer is refused.
#[tauri::command(async)]
pub fn answer_budget(state: State<'_, AppState>, owner: String, allow: bool) -> Result<(), AppError> {
    let mut store = state.store()?;
    let answer = if allow { corral::attention::ask::Answer::AllowMore } else { corral::attention::ask::Answer::Stop };
    Ok(corral::attention::ask::answer(&mut store, &owner, answer, &state.shepherd()?)?)
}

/// Launches a run again with the same preset, task, folder, model,
/// worktree choice and environment.
#[tauri::command(async)]
pub fn relaunch_run(state: State<'_, AppState>, id: String) -> Result<Run, AppError> {
    let mut store = state.store()?;
    Ok(corral::verbs::launch::relaunch(&mut store, &id, &state.shepherd()?)?)
}

/// "Clear finished"; returns how many runs were cleared.
#[tauri::command(async)]
pub fn clear_finished(state: State<'_, AppState>) -> Result<usize, AppError> {
    Ok(state.store()?.dismiss_finished()?)
}

/// Runs for the timeline, and today's spend.
#[derive(Serialize)]
pub struct Timeline {
    runs: Vec<Run>,
    today: Spend,
    now: String,
    /// The start of the period shown: the bars are drawn from it to now.
    since: String,
    /// What each preset spent per local day over the last 14 days.
    days: Vec<DaySpend>,
}

/// How many days the spend chart covers.
const CHART_DAYS: u32 = 14;

/// Runs created in the last `hours` hours (and any still active), oldest
/// first, with today's tokens and cost.
#[tauri::command(async)]
pub fn timeline(state: State<'_, AppState>, hours: f64) -> Result<Timeline, AppError> {
    let store = state.store()?;
    let now = time::now();
    let since = now - chrono::Duration::milliseconds((hours.clamp(0.1, 24.0 * 30.0) * 3_600_000.0) as i64);
    let since_text = time::format(since);
    let mut runs = store.runs(&RunFilter { include_dismissed: true, limit: Some(2000), ..RunFilter::default() })?;
    runs.extend(store.remote_runs(None)?);
    runs.retain(|r| r.created_at >= since_text || r.status.is_active());
    runs.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    // Today and the chart's days are the user's: local midnights.
    let local = chrono::Local::now().date_naive();
    let midnight = |day: chrono::NaiveDate| {
        day.and_hms_opt(0, 0, 0).and_then(|t| t.and_local_timezone(chrono::Local).earliest()).map(|t| t.to_utc())
    };
    let today = midnight(local).unwrap_or(now);
    let first_day = midnight(local - chrono::Days::new(u64::from(CHART_DAYS - 1))).unwrap_or(now);
    Ok(Timeline {
        runs,
        today: store.spend_since(today)?,
        days: store.spend_by_day(first_day)?,
        now: time::format(now),
        since: since_text,
    })
}
