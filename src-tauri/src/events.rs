//! Events the app sends the window, typed: the window is told what changed
//! and redraws only that, instead of polling the store.

use corral::watch::Change;
use tauri::{AppHandle, Emitter};

/// The store changed (sent at most once per watcher round, 50 ms): the
/// counts if a status changed, and the runs whose transcripts grew.
pub const STORE_CHANGED: &str = "store-changed";
/// The store became unreadable, or readable again.
pub const STORE_PROBLEM: &str = "store-problem";

/// Tells the window (if one is open) what changed.
pub fn store_changed(app: &AppHandle, change: &Change) {
    if let Err(e) = app.emit(STORE_CHANGED, change) {
        tracing::warn!("cannot tell the window what changed: {e}");
    }
}

/// Tells the window the store's problem (`None`: it is readable again).
pub fn store_problem(app: &AppHandle, problem: Option<&str>) {
    if let Err(e) = app.emit(STORE_PROBLEM, problem) {
        tracing::warn!("cannot tell the window of the store's problem: {e}");
    }
}
