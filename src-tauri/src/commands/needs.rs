//! What needs you, pinned at the top of the runs list: the one list of
//! `corral::attention` (the tray's red icon and its section read it too),
//! and its actions carried out as `corral` would.

use corral::attention::Needs;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// Everything that needs the user now, with what the list leaves out
/// counted.
#[tauri::command(async)]
pub fn needs(state: State<'_, AppState>) -> Result<Needs, AppError> {
    Ok(corral::attention::needs(&state.store()?)?)
}

/// Carries out one of the actions the list offers now (`corral ARGV`, by
/// the CLI beside the window): only those, so the page cannot run any
/// other command. Its refusal is the error, in its words.
#[tauri::command(async)]
pub fn act_on_need(state: State<'_, AppState>, argv: Vec<String>) -> Result<(), AppError> {
    if !corral::attention::still_offered(&state.store()?, &argv)? {
        return Err(AppError::Invalid("that action is no longer offered: the list changed meanwhile".into()));
    }
    let program = state.shepherd()?.program;
    let out = std::process::Command::new(&program).args(&argv).stdin(std::process::Stdio::null()).output()?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(AppError::Invalid(said.trim().trim_start_matches("corral: ").to_string()));
    }
    Ok(())
}
