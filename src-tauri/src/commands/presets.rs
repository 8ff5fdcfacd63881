//! Presets as the window shows them: each with its file, what it
//! overrides, and the files that could not be used.

use corral::preset::{self, PresetSet, Roots};
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// The presets in effect for `cwd` (or only the global ones), each marked
/// if its agent cannot start (with this program's PATH, which runs
/// launched from the window get).
#[tauri::command(async)]
pub fn list_presets(state: State<'_, AppState>, cwd: Option<String>) -> Result<PresetSet, AppError> {
    let cwd = cwd.filter(|c| !c.is_empty()).map(std::path::PathBuf::from);
    let mut set = preset::discover(&Roots::new(&state.home, cwd.as_deref()));
    let folder = cwd.unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| "/".into()));
    set.mark_unavailable(std::env::var_os("PATH").as_deref(), &folder);
    Ok(set)
}
