//! The counts, as the menu's first (disabled) line.

use corral::store::Counts;
use tauri::menu::MenuItem;
use tauri::AppHandle;

pub const ID: &str = "counts";

pub fn item(app: &AppHandle, counts: &Counts) -> tauri::Result<MenuItem<tauri::Wry>> {
    MenuItem::with_id(app, ID, crate::tray::title(counts), false, None::<&str>)
}
