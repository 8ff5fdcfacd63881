//! Linux notifications through the desktop's notification server
//! (org.freedesktop.Notifications) with a default action and an
//! "Open transcript" action.

use corral::announce::Announcement;
use notify_rust::{Hint, Notification, Timeout, Urgency};
use tauri::AppHandle;

/// Shows `note` and, on a thread of its own (notify-rust blocks), waits for
/// a click to open the run. A failure is critical and stays until
/// dismissed.
pub fn show(app: AppHandle, note: Announcement) {
    std::thread::spawn(move || {
        let (urgency, timeout, icon) = if note.urgent {
            (Urgency::Critical, Timeout::Never, "dialog-error")
        } else {
            (Urgency::Normal, Timeout::Default, "dialog-information")
        };
        let shown = Notification::new()
            .appname("Corral")
            .summary(&note.summary)
            .body(&note.body)
            .icon(icon)
            .action("default", "Open")
            .action("open", if note.run.is_some() { "Open transcript" } else { "Open runs" })
            .hint(Hint::Category("transfer.complete".into()))
            .hint(Hint::Urgency(urgency))
            .timeout(timeout)
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
