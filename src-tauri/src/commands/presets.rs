//! Presets as the window shows them: each with its file, what it
//! overrides, and the files that could not be used.

use corral::preset::{self, PresetSet, Roots};
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// The presets in effect for `cwd` (or only the global ones).
#[tauri::command(async)]
pub fn list_presets(state: State<'_, AppState>, cwd: Option<String>) -> Result<PresetSet, AppError> {
    let cwd = cwd.filter(|c| !c.is_empty()).map(std::path::PathBuf::from);
    Ok(preset::discover(&Roots::new(&state.home, cwd.as_deref())))
}
