//! "Do not disturb": pauses notifications; what ends meanwhile is announced
//! as one summary when they resume. A check item; runtime state only.

use tauri::menu::CheckMenuItem;
use tauri::{AppHandle, Manager};

use crate::state::AppState;

pub const ID: &str = "quiet";

pub fn item(app: &AppHandle, quiet: bool) -> tauri::Result<CheckMenuItem<tauri::Wry>> {
    CheckMenuItem::with_id(app, ID, "Do not disturb", true, quiet, None::<&str>)
}

pub fn clicked(app: &AppHandle) {
    let state = app.state::<AppState>();
    state.set_quiet(!state.quiet());
    // The watcher announces what waited when notifications resume; the
    // menu shows the new state now.
    match state.store() {
        Ok(store) => {
            let refreshed =
                store.counts().map_err(Into::into).and_then(|counts| crate::tray::refresh(app, &store, counts));
            if let Err(e) = refreshed {
                tracing::warn!("cannot redraw the tray: {e}");
            }
        }
        Err(e) => tracing::warn!("cannot redraw the tray: {e}"),
    }
}
