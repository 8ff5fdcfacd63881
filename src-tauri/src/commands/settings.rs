//! App settings: where Corral keeps its files, and starting at login.

use serde::Serialize;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

#[derive(Serialize)]
pub struct Settings {
    autostart: bool,
    data_dir: String,
    config_file: String,
}

#[tauri::command(async)]
pub fn settings(state: State<'_, AppState>) -> Settings {
    Settings {
        autostart: corral::home::autostart::enabled(),
        data_dir: state.home.data_dir().display().to_string(),
        config_file: state.home.config_file().display().to_string(),
    }
}

/// Turns starting the tray (`corral-tray`, installed beside the window's
/// program) at login on or off; the window opens from it.
#[tauri::command(async)]
pub fn set_autostart(on: bool) -> Result<bool, AppError> {
    corral::home::autostart::set(on)?;
    Ok(corral::home::autostart::enabled())
}

/// What works on this machine and how to fix what does not: the same
/// report as `corral doctor`.
#[tauri::command(async)]
pub fn doctor(state: State<'_, AppState>) -> corral::doctor::Report {
    corral::doctor::examine(&state.home)
}
