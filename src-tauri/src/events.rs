//! Events the app sends the window, typed: the window is told what changed
//! and redraws only that, instead of polling the store.

use corral::store::Counts;
use serde::Serialize;
use tauri::{AppHandle, Emitter};

/// The store changed (sent at most once per watcher round, 50 ms).
pub const STORE_CHANGED: &str = "store-changed";
/// The store became unreadable, or readable again.
pub const STORE_PROBLEM: &str = "store-problem";

/// What changed in the store since the last event.
#[derive(Debug, Clone, Serialize)]
pub struct StoreChanged {
    /// A run was added, changed status, or was cleared or seen: lists and
    /// counts are stale. The counts come with it.
    pub counts: Option<Counts>,
    /// Runs whose transcripts gained events.
    pub transcripts: Vec<String>,
}

/// Tells the window (if one is open) what changed.
pub fn store_changed(app: &AppHandle, change: &StoreChanged) {
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
