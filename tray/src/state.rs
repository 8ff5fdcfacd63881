//! The tray's runtime state, shared by the menu's handlers (on the GTK
//! thread) and the watcher. Nothing here is persisted: runs live in the
//! store, and "Do not disturb" lasts until the tray ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use corral::process::Waker;
use corral::Home;

/// Shared by the menu and the watcher.
pub struct TrayState {
    /// Corral's folders.
    pub home: Home,
    /// "Do not disturb": notifications wait.
    quiet: AtomicBool,
    /// The menu must be redrawn though the store did not change.
    redraw: AtomicBool,
    /// Wakes the store watcher (set once it starts).
    waker: OnceLock<Waker>,
}

impl TrayState {
    pub fn new(home: Home) -> TrayState {
        TrayState { home, quiet: AtomicBool::new(false), redraw: AtomicBool::new(false), waker: OnceLock::new() }
    }

    /// True while notifications are paused.
    pub fn quiet(&self) -> bool {
        self.quiet.load(Ordering::SeqCst)
    }

    /// Pauses or resumes notifications; the menu shows it next round.
    pub fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::SeqCst);
        self.redraw.store(true, Ordering::SeqCst);
        if let Some(waker) = self.waker.get() {
            waker.wake();
        }
    }

    /// How the watcher is woken when the menu asks for a redraw.
    pub fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }

    /// True once after a redraw was asked for.
    pub fn take_redraw(&self) -> bool {
        self.redraw.swap(false, Ordering::SeqCst)
    }
}
