//! Notifications: what `corral::announce` decides (one per piece of work,
//! paced), shown on the desktop, whose click opens the run's transcript (or
//! the runs list for a summary). Nothing here steals focus: the window
//! opens only when the user clicks.
//!
//! Platform code is in one file per platform; Linux uses notify-rust over
//! D-Bus with actions (Tauri's notification plugin has no click events).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;

use corral::announce::Announcement;
use tauri::AppHandle;

/// Shows one announcement.
pub fn show(app: &AppHandle, note: Announcement) {
    platform::show(app.clone(), note);
}
