//! What the window asks of the store as a whole: the counts for its header,
//! and the problem reading the store, if there is one. What changed reaches
//! it as an event (see `events`), never by polling.

use corral::store::Counts;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// Active and total runs, and unseen failures.
#[tauri::command(async)]
pub fn counts(state: State<'_, AppState>) -> Result<Counts, AppError> {
    Ok(state.store()?.counts()?)
}

/// Why the store cannot be read right now, if it cannot.
#[tauri::command]
pub fn store_problem(state: State<'_, AppState>) -> Option<String> {
    state.problem()
}
