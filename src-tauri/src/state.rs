//! The window's runtime state. Nothing here is persisted: runs live in the
//! store, recent folders in their own file (`corral::home::recent_folders`).

use std::sync::{Arc, Mutex};

use corral::store::StoredEvent;
use corral::upkeep::queue::ShepherdCommand;
use corral::{Home, Run, Store};

use crate::error::AppError;

/// Shared by commands and the watcher.
pub struct AppState {
    /// Corral's folders.
    pub home: Home,
    /// Why the store cannot be read, while it cannot (set by the watcher).
    problem: Mutex<Option<String>>,
    /// The transcript of the other host's run on screen, fetched once when
    /// it was opened: its pages are read from here, not over SSH again.
    remote_transcript: Mutex<Option<(String, Arc<Vec<StoredEvent>>)>>,
}

/// Lines of another host's transcript fetched for the run view.
const REMOTE_LINES: usize = 2000;

impl AppState {
    pub fn new(home: Home) -> AppState {
        AppState { home, problem: Mutex::new(None), remote_transcript: Mutex::new(None) }
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

    /// The transcript of `run`, of another host: fetched now when `fetch`
    /// (the run was opened) or not fetched yet, else as fetched.
    pub fn remote_transcript(&self, run: &Run, fetch: bool) -> Result<Arc<Vec<StoredEvent>>, AppError> {
        let mut kept = self.remote_transcript.lock().expect("remote transcript");
        match kept.as_ref() {
            Some((id, events)) if id == &run.id && !fetch => Ok(events.clone()),
            _ => {
                let events = Arc::new(corral::remote::transcript(&self.home, run, REMOTE_LINES)?);
                *kept = Some((run.id.clone(), events.clone()));
                Ok(events)
            }
        }
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
