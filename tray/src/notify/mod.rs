//! Notifications: what `corral::announce` decides (one per piece of work,
//! paced), shown on the desktop, whose click opens the run's transcript (or
//! the runs list for a summary) in the window. Nothing here steals focus:
//! the window opens only when the user clicks.
//!
//! They are shown on a thread of their own (the [`Herald`]): a notification
//! server that hangs stalls only the notifications, never the tray's count.
//!
//! Platform code is in one file per platform; Linux uses notify-rust over
//! D-Bus, with actions.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;

use std::sync::mpsc::{channel, Receiver, Sender};

use corral::announce::Announcement;
use corral::window_route::Route;

/// What a click on a notification does with where it leads (the window's
/// `open`, given by whoever starts the [`Herald`]).
pub type Opener = fn(&Route);

/// The desktop did not take a notification.
#[derive(Debug, thiserror::Error)]
#[error("the notification server did not take the notification: {0}")]
pub struct Refused(pub String);

/// Shows announcements one after another on its own thread, and hands
/// back the runs of those the notification server refused.
pub struct Herald {
    to_show: Sender<(Announcement, Vec<String>)>,
    refused: Receiver<Vec<String>>,
}

impl Herald {
    /// Starts the herald's thread; a click on a notification calls `open`.
    pub fn start(open: Opener) -> std::io::Result<Herald> {
        let (to_show, queue) = channel::<(Announcement, Vec<String>)>();
        let (refuse, refused) = channel();
        std::thread::Builder::new().name("corral-herald".into()).spawn(move || {
            for (note, runs) in queue {
                if let Err(e) = platform::show(note, open) {
                    tracing::warn!("{e}");
                    if refuse.send(runs).is_err() {
                        return;
                    }
                }
            }
        })?;
        Ok(Herald { to_show, refused })
    }

    /// Shows `note`, which speaks for `runs`, as soon as the server takes
    /// it (a click is waited for on a thread of its own).
    pub fn announce(&self, note: Announcement, runs: Vec<String>) {
        if self.to_show.send((note, runs)).is_err() {
            tracing::error!("the notifications' thread is gone");
        }
    }

    /// The runs of every announcement refused since the last call.
    pub fn refused(&self) -> Vec<String> {
        self.refused.try_iter().flatten().collect()
    }
}

/// Tells the user something the tray could not do for them (a window that
/// cannot start). Best effort: it is in the log too.
pub fn problem(text: &str) {
    if let Err(e) = platform::problem(text) {
        tracing::warn!("{e}");
    }
}
