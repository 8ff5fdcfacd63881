//! Linux notifications through the desktop's notification server
//! (org.freedesktop.Notifications) with a default action and an
//! "Open transcript" action.

use corral::announce::Announcement;
use notify_rust::{Hint, Notification, Timeout, Urgency};

use super::{Opener, Refused};
use corral::window_route::Route;

/// Shows `note`, then waits for a click to `open` the run on a thread of
/// its own (notify-rust blocks). A failure is critical and stays until
/// dismissed. Returns once the server has taken it, or why not.
pub fn show(note: Announcement, open: Opener) -> Result<(), Refused> {
    let (urgency, timeout, icon) = if note.urgent {
        (Urgency::Critical, Timeout::Never, "dialog-error")
    } else {
        (Urgency::Normal, Timeout::Default, "dialog-information")
    };
    let handle = Notification::new()
        .appname("Corral")
        .summary(&note.summary)
        .body(&note.body)
        .icon(icon)
        .action("default", "Open")
        .action("open", if note.run.is_some() { "Open transcript" } else { "Open runs" })
        .hint(Hint::Category("transfer.complete".into()))
        .hint(Hint::Urgency(urgency))
        .timeout(timeout)
        .show()
        .map_err(|e| Refused(e.to_string()))?;
    let route = match (note.run, note.ended_since) {
        (Some(run), _) => Route::Run(run),
        (None, Some(since)) => Route::EndedSince(since),
        (None, None) => Route::Runs,
    };
    let waiter = std::thread::Builder::new().name("corral-notification".into()).spawn(move || {
        handle.wait_for_action(|action| {
            if action == "default" || action == "open" {
                open(&route);
            }
        })
    });
    if let Err(e) = waiter {
        tracing::warn!("cannot wait for the notification's click: {e}");
    }
    Ok(())
}

/// A plain notification about a problem.
pub fn problem(text: &str) -> Result<(), Refused> {
    Notification::new()
        .appname("Corral")
        .summary("Corral")
        .body(text)
        .icon("dialog-warning")
        .show()
        .map(drop)
        .map_err(|e| Refused(e.to_string()))
}
