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

/// The desktop did not take a notification.
#[derive(Debug, thiserror::Error)]
#[error("the notification server did not take the notification: {0}")]
pub struct Refused(pub String);

/// Shows one announcement; returns once the notification server accepted
/// it (a click is waited for on a thread of its own).
pub fn show(app: &AppHandle, note: Announcement) -> Result<(), Refused> {
    platform::show(app.clone(), note)
}
