//! The launch form's commands: launch, pick a folder, recent folders.

use std::path::PathBuf;

use corral::verbs::launch::{launch, LaunchRequest};
use corral::Run;
use tauri::{AppHandle, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::AppError;
use crate::state::AppState;

/// Launches `preset` with `task` in `cwd`, and remembers the folder.
/// `budget` is written as `corral launch --budget` takes it (`2`, `$2`,
/// `500k`, `usd=2,tokens=1M`); empty: the preset's or config.toml's.
#[allow(clippy::too_many_arguments)] // one per field of the form
#[tauri::command(async)]
pub fn launch_run(
    state: State<'_, AppState>,
    preset: String,
    task: String,
    cwd: String,
    model: Option<String>,
    worktree: Option<bool>,
    host: Option<String>,
    budget: Option<String>,
) -> Result<Run, AppError> {
    let model = model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty());
    let budget = match budget.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        Some(text) => Some(corral::cost::budget::Budget::parse(text)?),
        None => None,
    };
    if let Some(name) = host.filter(|h| !h.is_empty()) {
        // A folder of that host (its user's home when empty).
        let config = corral::home::config::Config::load(&state.home)?;
        let host = config.host(&name).map_err(|e| AppError::Invalid(e.to_string()))?;
        let options = corral::remote::RemoteLaunch {
            cwd: Some(cwd.trim().to_string()).filter(|c| !c.is_empty()),
            model,
            worktree,
            base: None,
            budget,
            fire: None,
        };
        let mut store = state.store()?;
        return Ok(corral::remote::launch(&state.home, &mut store, host, &preset, &task, &options)?);
    }
    let cwd = PathBuf::from(cwd.trim());
    if !cwd.is_absolute() {
        return Err(AppError::Invalid(format!("choose a folder (an absolute path), not '{}'", cwd.display())));
    }
    let mut store = state.store()?;
    let request = LaunchRequest {
        preset,
        task,
        cwd: cwd.clone(),
        model,
        parent: None,
        env: None,
        worktree,
        base: None,
        budget,
        fire: None,
        request: None,
        scope_own: false,
    };
    let run = launch(&mut store, &request, &state.shepherd()?)?;
    corral::home::recent_folders::remember(&state.home, &cwd)?;
    Ok(run)
}

/// The system's folder picker; `None` if cancelled.
#[tauri::command(async)]
pub fn pick_folder(app: AppHandle) -> Option<String> {
    app.dialog().file().blocking_pick_folder().and_then(|p| p.into_path().ok()).map(|p| p.display().to_string())
}

/// Recently used folders, most recent first: those the window launched
/// in, then the folders of the latest runs (launched from the CLI, an
/// agent or a schedule), so the form and the Presets view open on a
/// project, not on no folder.
#[tauri::command(async)]
pub fn recent_folders(state: State<'_, AppState>) -> Vec<String> {
    let folders = match state.store() {
        Ok(store) => corral::home::recent_folders::with_runs(&state.home, &store),
        Err(_) => corral::home::recent_folders::recent(&state.home),
    };
    folders.into_iter().map(|p| p.display().to_string()).collect()
}
