//! Linux notifications through the desktop's notification server
//! (org.freedesktop.Notifications) with a default action and an
//! "Open transcript" action.

use corral::attention::announce::Announcement;
use corral::attention::ask::{Answer, Ask};
use notify_rust::{ActionResponse, Hint, Notification, NotificationHandle, Timeout, Urgency};

use super::{Answerer, Opener, Refused};
use corral::attention::window_route::Route;

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
        .body(&as_text(&note.body))
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

/// An ask on the desktop, to be withdrawn once answered.
pub struct Shown(NotificationHandle);

/// Shows `ask` with its buttons ("Allow $2 more", "Stop", "Open"); a
/// button calls `answer` (or `open`) on a thread of its own. It stays
/// until answered.
pub fn ask(ask: &Ask, open: Opener, answer: Answerer) -> Result<Shown, Refused> {
    let handle = Notification::new()
        .appname("Corral")
        .summary(&ask.summary())
        .body(&as_text(&ask.body()))
        .icon("dialog-question")
        .action("allow", &ask.allow_words())
        .action("stop", "Stop")
        .action("default", "Open")
        .hint(Hint::Urgency(Urgency::Critical))
        .timeout(Timeout::Never)
        .show()
        .map_err(|e| Refused(e.to_string()))?;
    let id = handle.id();
    let owner = ask.owner().to_string();
    let waiter = std::thread::Builder::new().name("corral-ask".into()).spawn(move || {
        let acted = notify_rust::handle_action(id, |response: &ActionResponse<'_>| match response {
            ActionResponse::Custom("allow") => answer(&owner, Answer::AllowMore),
            ActionResponse::Custom("stop") => answer(&owner, Answer::Stop),
            ActionResponse::Custom("default" | "open") => open(&Route::Run(owner.clone())),
            _ => {}
        });
        if let Err(e) = acted {
            tracing::warn!("cannot wait for the ask's answer: {e}");
        }
    });
    if let Err(e) = waiter {
        tracing::warn!("cannot wait for the ask's answer: {e}");
    }
    Ok(Shown(handle))
}

/// Takes an ask off the desktop.
pub fn withdraw(shown: Shown) {
    shown.0.close();
}

/// A plain notification of what the user asked to see.
pub fn shown(title: &str, text: &str) -> Result<(), Refused> {
    Notification::new()
        .appname("Corral")
        .summary(title)
        .body(&as_text(text))
        .icon("dialog-information")
        .timeout(Timeout::Never)
        .show()
        .map(drop)
        .map_err(|e| Refused(e.to_string()))
}

/// A plain notification about a problem.
pub fn problem(text: &str) -> Result<(), Refused> {
    Notification::new()
        .appname("Corral")
        .summary("Corral")
        .body(&as_text(text))
        .icon("dialog-warning")
        .show()
        .map(drop)
        .map_err(|e| Refused(e.to_string()))
}

/// `text` as the notification server shows it as written: a server that
/// reads markup in bodies (dunst, GNOME Shell) would take an agent's
/// "expected `Vec<String>`" for a tag and its `<a href>` for a live link,
/// so `&`, `<` and `>` are escaped for it, and only for it.
fn as_text(text: &str) -> String {
    static MARKUP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let markup = *MARKUP
        .get_or_init(|| notify_rust::get_capabilities().is_ok_and(|caps| caps.iter().any(|c| c == "body-markup")));
    match markup {
        true => text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;"),
        false => text.to_string(),
    }
}
