//! "Clear finished": ended runs leave the total and the lists (they stay
//! in the store; `corral ls --all` shows them).

use corral::Store;

use crate::panel::menu::Line;
use crate::state::TrayState;

pub const ID: &str = "clear";

pub fn line() -> Line {
    Line::Item { id: ID.into(), label: "Clear finished".into(), enabled: true }
}

/// Clears off the GTK thread (the store may be busy for a moment); the
/// watcher sees the change and redraws.
pub fn clicked(state: &TrayState) {
    let home = state.home.clone();
    let cleared = std::thread::Builder::new().name("corral-clear".into()).spawn(move || {
        if let Err(e) = Store::open(&home).and_then(|mut store| store.dismiss_finished()) {
            tracing::error!("cannot clear finished runs: {e}");
        }
    });
    if let Err(e) = cleared {
        tracing::error!("cannot clear finished runs: {e}");
    }
}
