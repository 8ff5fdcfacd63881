//! The window's runtime state. Nothing here is persisted: runs live in the
//! store, recent folders in their own file (`corral::recent_folders`).

use std::sync::Mutex;

use corral::queue::ShepherdCommand;
use corral::{Home, Store};

use crate::error::AppError;

/// Shared by commands and the watcher.
pub struct AppState {
    /// Corral's folders.
    pub home: Home,
    /// Why the store cannot be read, while it cannot (set by the watcher).
    problem: Mutex<Option<String>>,
}

impl AppState {
    pub fn new(home: Home) -> AppState {
        AppState { home, problem: Mutex::new(None) }
    }

    /// A connection to the store (cheap: one per call keeps commands
    /// independent and lets them run on any thread).
    pub fn store(&self) -> Result<Store, AppError> {
        Ok(Store::open(&self.home)?)
    }

    /// How shepherds start: the `corral` CLI beside the window if it is
    /// installed, else the window's own program (`corral-app shepherd <id>`).
    pub fn shepherd(&self) -> Result<ShepherdCommand, AppError> {
        Ok(ShepherdCommand::lightest()?)
    }

    /// Why the store cannot be read, while it cannot.
    pub fn problem(&self) -> Option<String> {
        self.problem.lock().expect("problem").clone()
    }

    /// Records the store's problem (`None`: readable again).
    pub fn set_problem(&self, problem: Option<String>) {
        *self.problem.lock().expect("problem") = problem;
    }
}
