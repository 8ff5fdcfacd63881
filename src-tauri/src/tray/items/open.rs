//! "Open Corral": shows the runs window.

use tauri::menu::MenuItem;
use tauri::AppHandle;

pub const ID: &str = "open";

pub fn item(app: &AppHandle) -> tauri::Result<MenuItem<tauri::Wry>> {
    MenuItem::with_id(app, ID, "Open Corral", true, None::<&str>)
}

pub fn clicked(app: &AppHandle) {
    crate::window::open(app, None);
}
