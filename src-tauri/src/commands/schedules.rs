//! Schedules as the window shows them: each with its next fire, whether it
//! is paused and why, and its latest fires; pause, resume, run now.

use corral::schedule;
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// Fires shown per schedule.
const FIRES: usize = 10;

/// Every schedule (presets' in step with their files), as
/// `schedule::shown` has it, with its latest fires under `fires`.
#[tauri::command(async)]
pub fn list_schedules(state: State<'_, AppState>) -> Result<Vec<serde_json::Value>, AppError> {
    let mut store = state.store()?;
    let problems = schedule::presets::sync(&mut store)?;
    let mut values = Vec::new();
    for schedule in schedule::all(&store).map_err(invalid)? {
        let mut value = schedule::shown(&store, &schedule, "fires", FIRES).map_err(invalid)?;
        value["problems"] = serde_json::to_value(&problems).map_err(invalid)?;
        values.push(value);
    }
    Ok(values)
}

/// Pauses (`paused`) or resumes schedule `name`.
#[tauri::command(async)]
pub fn pause_schedule(state: State<'_, AppState>, name: String, paused: bool) -> Result<(), AppError> {
    let mut store = state.store()?;
    match paused {
        true => schedule::pause(&mut store, &name).map_err(invalid)?,
        false => schedule::resume(&mut store, &name).map_err(invalid)?,
    };
    Ok(())
}

/// Fires schedule `name` now, as a slot of its own: the fire.
#[tauri::command(async)]
pub fn run_schedule_now(state: State<'_, AppState>, name: String) -> Result<serde_json::Value, AppError> {
    let mut store = state.store()?;
    let shepherd = state.shepherd()?;
    let fire = schedule::run_now(&mut store, &name, &shepherd).map_err(invalid)?;
    serde_json::to_value(fire).map_err(invalid)
}

fn invalid(e: impl std::fmt::Display) -> AppError {
    AppError::Invalid(e.to_string())
}
