//! How the window learns of changes without polling the database itself:
//! a long poll on the watcher's change counter.

use std::time::{Duration, Instant};

use tauri::State;

use crate::state::AppState;

/// Returns the change counter once it differs from `since`, or after
/// `timeout_ms` (at most 30 s).
#[tauri::command(async)]
pub fn wait_for_change(state: State<'_, AppState>, since: u64, timeout_ms: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.min(30_000));
    loop {
        let now = state.generation();
        if now != since || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
