//! The tray menu's items, one file each: its id, its text, its handler.

pub mod clear;
pub mod counts;
pub mod launch;
pub mod open;
pub mod problem;
pub mod quiet;
pub mod quit;
pub mod recent;

use tauri::AppHandle;

/// Routes a menu click to its item.
pub fn handle(app: &AppHandle, id: &str) {
    if let Some(run) = id.strip_prefix(recent::PREFIX) {
        recent::clicked(app, run);
    } else if let Some(entry) = id.strip_prefix(launch::PREFIX) {
        launch::clicked(app, entry);
    } else {
        match id {
            open::ID => open::clicked(app),
            clear::ID => clear::clicked(app),
            quiet::ID => quiet::clicked(app),
            quit::ID => quit::clicked(app),
            _ => {}
        }
    }
}
