//! "Quit": the app ends; runs keep going under their shepherds, and the
//! app shows them as they are when it starts again.

use tauri::menu::MenuItem;
use tauri::{AppHandle, Manager};

use crate::state::AppState;

pub const ID: &str = "quit";

pub fn item(app: &AppHandle) -> tauri::Result<MenuItem<tauri::Wry>> {
    MenuItem::with_id(app, ID, "Quit (runs keep going)", true, None::<&str>)
}

pub fn clicked(app: &AppHandle) {
    app.state::<AppState>().set_quitting();
    app.exit(0);
}
