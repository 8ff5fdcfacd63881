//! "Clear finished": ended runs leave the total and the lists (they stay
//! in the store; `corral ls --all` shows them).

use tauri::menu::MenuItem;
use tauri::{AppHandle, Manager};

use crate::state::AppState;

pub const ID: &str = "clear";

pub fn item(app: &AppHandle) -> tauri::Result<MenuItem<tauri::Wry>> {
    MenuItem::with_id(app, ID, "Clear finished", true, None::<&str>)
}

pub fn clicked(app: &AppHandle) {
    let state = app.state::<AppState>();
    match state.store().and_then(|mut s| Ok(s.dismiss_finished()?)) {
        Ok(_) => {}
        Err(e) => tracing::error!("cannot clear finished runs: {e}"),
    }
}
