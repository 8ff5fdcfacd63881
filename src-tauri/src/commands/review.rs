//! A run's changes and conversation in the window: its worktree's diff,
//! Merge, Discard, Open folder, Open terminal, the reply box, and the disk
//! space worktrees take. The rules are the core's (`corral::verbs::review`,
//! `corral::verbs::reply`), shared with the CLI and the MCP server.

use std::path::PathBuf;

use corral::worktree::{Changes, DiskUsage};
use corral::Run;
use serde::Serialize;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// What a run changed: files with counts, and the unified diff.
#[derive(Serialize)]
pub struct RunChanges {
    changes: Changes,
    patch: String,
}

/// Everything run `id` changed against its base, measured now.
#[tauri::command(async)]
pub fn run_changes(state: State<'_, AppState>, id: String) -> Result<RunChanges, AppError> {
    let mut store = state.store()?;
    let (run, changes) = corral::verbs::review::changes(&mut store, &id)?;
    let worktree = corral::verbs::review::worktree_of(&run).map_err(corral::verbs::review::ReviewError::from)?;
    let patch = corral::worktree::patch(worktree).map_err(corral::verbs::review::ReviewError::from)?;
    Ok(RunChanges { changes, patch })
}

/// Brings run `id`'s changes into the branch it started from; returns the
/// new commit.
#[tauri::command(async)]
pub fn merge_run(state: State<'_, AppState>, id: String, keep_commits: bool) -> Result<String, AppError> {
    Ok(corral::verbs::review::merge(&mut state.store()?, &id, keep_commits)?.commit)
}

/// Opens a pull request for run `id`'s work (or pushes to the one it has),
/// as `corral pr` does: the person at the window asked. `together`: more
/// runs whose work goes in it, merged after `id`'s in that order.
#[tauri::command(async)]
pub fn open_pull_request(
    state: State<'_, AppState>,
    id: String,
    together: Option<Vec<String>>,
    draft: bool,
) -> Result<corral::forge::Opened, AppError> {
    let options = corral::forge::Options { draft, ..Default::default() };
    let ids: Vec<String> = std::iter::once(id).chain(together.into_iter().flatten()).collect();
    Ok(corral::forge::open_together(&mut state.store()?, &ids, &options)?)
}

/// Run `id`'s pull request, if one was opened.
#[tauri::command(async)]
pub fn pull_request(state: State<'_, AppState>, id: String) -> Result<Option<corral::store::PullRequestRow>, AppError> {
    Ok(state.store()?.pull_request(&id)?)
}

/// Several runs' changes judged together: grouped by file, and the pairs
/// that change the same lines.
#[derive(Serialize)]
pub struct Together {
    files: Vec<corral::verbs::review::FileAcross>,
    conflicts: Vec<corral::worktree::Conflict>,
}

/// Runs `ids`' changes together, and which pairs conflict.
#[tauri::command(async)]
pub fn review_runs(state: State<'_, AppState>, ids: Vec<String>) -> Result<Together, AppError> {
    let store = state.store()?;
    let files = corral::verbs::review::diff_together(&store, &ids)?;
    let (_, conflicts) = corral::verbs::review::conflicts(&store, &ids, std::path::Path::new("/"))?;
    Ok(Together { files, conflicts })
}

/// Merges runs `ids` in that order, one commit each: refused before any
/// is merged if two conflict. Returns the new commits.
#[tauri::command(async)]
pub fn merge_runs(state: State<'_, AppState>, ids: Vec<String>) -> Result<Vec<String>, AppError> {
    let merged = corral::verbs::review::merge_together(&mut state.store()?, &ids, false)?;
    Ok(merged.into_iter().map(|m| m.commit).collect())
}

/// Removes run `id`'s worktree and branch (the window asks first).
#[tauri::command(async)]
pub fn discard_run(state: State<'_, AppState>, id: String) -> Result<Run, AppError> {
    Ok(corral::verbs::review::discard(&mut state.store()?, &id)?)
}

/// Opens the run's folder (its worktree, if it has one) in the file manager.
#[tauri::command(async)]
pub fn open_run_folder(state: State<'_, AppState>, id: String) -> Result<(), AppError> {
    Ok(crate::open::folder(&work_folder(&state, &id)?)?)
}

/// Opens a terminal in the run's folder (its worktree, if it has one).
#[tauri::command(async)]
pub fn open_run_terminal(state: State<'_, AppState>, id: String) -> Result<(), AppError> {
    Ok(crate::open::terminal(&work_folder(&state, &id)?)?)
}

fn work_folder(state: &AppState, id: &str) -> Result<PathBuf, AppError> {
    let run = state.store()?.find_run(id)?;
    Ok(PathBuf::from(run.worktree.map_or(run.cwd, |w| w.path)))
}

/// Says `text` to run `id`'s agent in a new turn of its session; with
/// `allow_denied`, that turn may use the tool calls it was refused and
/// what its sandbox refused.
#[tauri::command(async)]
pub fn reply_run(state: State<'_, AppState>, id: String, text: String, allow_denied: bool) -> Result<Run, AppError> {
    let mut store = state.store()?;
    let shepherd = state.shepherd()?;
    if allow_denied {
        return Ok(corral::verbs::allow::allow_denied(&mut store, &id, &text, &shepherd)?.run);
    }
    Ok(corral::verbs::reply::reply(&mut store, &id, &text, false, &shepherd)?.run)
}

/// Replies said to run `id`, oldest first.
#[tauri::command(async)]
pub fn run_replies(state: State<'_, AppState>, id: String) -> Result<Vec<corral::store::Reply>, AppError> {
    Ok(state.store()?.replies(&id)?)
}

/// The disk space runs' worktrees take.
#[tauri::command(async)]
pub fn worktrees_usage(state: State<'_, AppState>) -> DiskUsage {
    corral::worktree::disk_usage(&state.home.worktrees_dir())
}
