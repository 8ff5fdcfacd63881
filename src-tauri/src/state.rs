//! The app's runtime state. Nothing here is persisted: runs live in the
//! store, recent folders in their own file (`folders`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use corral::queue::ShepherdCommand;
use corral::{Home, Store};

use crate::error::AppError;

/// Shared by commands, the tray and the watcher.
pub struct AppState {
    /// Corral's folders.
    pub home: Home,
    quitting: AtomicBool,
    /// "Do not disturb": notifications wait.
    quiet: AtomicBool,
    /// Bumped by the watcher on every store change the window should see.
    generation: AtomicU64,
}

impl AppState {
    pub fn new(home: Home) -> AppState {
        AppState {
            home,
            quitting: AtomicBool::new(false),
            quiet: AtomicBool::new(false),
            generation: AtomicU64::new(1),
        }
    }

    /// A connection to the store (cheap: one per call keeps commands
    /// independent and lets them run on any thread).
    pub fn store(&self) -> Result<Store, AppError> {
        Ok(Store::open(&self.home)?)
    }

    /// The app binary runs shepherds itself (`corral-app shepherd <id>`).
    pub fn shepherd(&self) -> Result<ShepherdCommand, AppError> {
        Ok(ShepherdCommand::current_exe()?)
    }

    /// Quit was chosen: let the event loop end.
    pub fn set_quitting(&self) {
        self.quitting.store(true, Ordering::SeqCst);
    }

    /// The store changed.
    pub fn bump_generation(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The current change counter.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// True while notifications are paused ("Do not disturb").
    pub fn quiet(&self) -> bool {
        self.quiet.load(Ordering::SeqCst)
    }

    /// Pauses or resumes notifications.
    pub fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::SeqCst);
    }

    pub fn quitting(&self) -> bool {
        self.quitting.load(Ordering::SeqCst)
    }
}
