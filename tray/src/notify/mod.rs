//! Notifications: what `corral::announce` decides (one per piece of work,
//! paced), shown on the desktop, whose click opens the run's transcript (or
//! the runs list for a summary) in the window. Nothing here steals focus:
//! the window opens only when the user clicks.
//!
//! Platform code is in one file per platform; Linux uses notify-rust over
//! D-Bus, with actions.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;

use corral::announce::Announcement;

/// The desktop did not take a notification.
#[derive(Debug, thiserror::Error)]
#[error("the notification server did not take the notification: {0}")]
pub struct Refused(pub String);

/// Shows one announcement; returns once the notification server accepted
/// it (a click is waited for on a thread of its own).
pub fn show(note: Announcement) -> Result<(), Refused> {
    platform::show(note)
}

/// Tells the user something the tray could not do for them (a window that
/// cannot start). Best effort: it is in the log too.
pub fn problem(text: &str) {
    if let Err(e) = platform::problem(text) {
        tracing::warn!("{e}");
    }
}
