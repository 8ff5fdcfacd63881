//! Linux notifications through the desktop's notification server
//! (org.freedesktop.Notifications) with a default action and an
//! "Open transcript" action.

use notify_rust::{Hint, Notification, Timeout};
use tauri::AppHandle;

use super::Note;

/// Shows `note` and, on a thread of its own (notify-rust blocks), waits for
/// a click to open the run.
pub fn show(app: AppHandle, note: Note) {
    std::thread::spawn(move || {
        let shown = Notification::new()
            .appname("Corral")
            .summary(&note.summary)
            .body(&note.body)
            .icon("dialog-information")
            .action("default", "Open")
            .action("open", "Open transcript")
            .hint(Hint::Category("transfer.complete".into()))
            .timeout(Timeout::Default)
            .show();
        match shown {
            Ok(handle) => handle.wait_for_action(|action| {
                if action == "default" || action == "open" {
                    crate::window::open(&app, note.run.as_deref());
                }
            }),
            Err(e) => tracing::warn!("cannot show a notification: {e}"),
        }
    });
}
