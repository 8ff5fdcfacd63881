//! The launch form's commands: launch, pick a folder, recent folders.

use std::path::PathBuf;

use corral::launch::{launch, LaunchRequest};
use corral::Run;
use tauri::{AppHandle, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::AppError;
use crate::state::AppState;

/// Launches `preset` with `task` in `cwd`, and remembers the folder.
#[tauri::command(async)]
pub fn launch_run(
    state: State<'_, AppState>,
    preset: String,
    task: String,
    cwd: String,
    model: Option<String>,
    worktree: Option<bool>,
) -> Result<Run, AppError> {
    let cwd = PathBuf::from(cwd.trim());
    if !cwd.is_absolute() {
        return Err(AppError::Invalid(format!("choose a folder (an absolute path), not '{}'", cwd.display())));
    }
    let mut store = state.store()?;
    let request = LaunchRequest {
        preset,
        task,
        cwd: cwd.clone(),
        model: model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty()),
        parent: None,
        env: None,
        worktree,
        base: None,
    };
    let run = launch(&mut store, &request, &state.shepherd()?)?;
    corral::recent_folders::remember(&state.home, &cwd)?;
    Ok(run)
}

/// The system's folder picker; `None` if cancelled.
#[tauri::command(async)]
pub fn pick_folder(app: AppHandle) -> Option<String> {
    app.dialog().file().blocking_pick_folder().and_then(|p| p.into_path().ok()).map(|p| p.display().to_string())
}

/// Recently used folders, most recent first.
#[tauri::command(async)]
pub fn recent_folders(state: State<'_, AppState>) -> Vec<String> {
    corral::recent_folders::recent(&state.home).into_iter().map(|p| p.display().to_string()).collect()
}
