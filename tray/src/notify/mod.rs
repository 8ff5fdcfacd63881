//! Notifications: what `corral::attention::announce` decides (one per piece of work,
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

use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};

use corral::attention::announce::Announcement;
use corral::attention::ask::{Answer, Ask};
use corral::attention::window_route::Route;

/// What a click on a notification does with where it leads (the window's
/// `open`, given by whoever starts the [`Herald`]).
pub type Opener = fn(&Route);

/// What a button of an ask does: answers the ask of the budget of that
/// run (given by whoever starts the [`Herald`]).
pub type Answerer = fn(&str, Answer);

/// What the herald's thread is given to do, in order.
enum Job {
    /// An announcement, speaking for these runs.
    Announce(Announcement, Vec<String>),
    /// An ask, shown until answered (here or anywhere else).
    Ask(Box<Ask>),
    /// The ask of this run's budget was answered: its notification goes.
    Withdraw(String),
}

/// The desktop did not take a notification.
#[derive(Debug, thiserror::Error)]
#[error("the notification server did not take the notification: {0}")]
pub struct Refused(pub String);

/// Shows announcements one after another on its own thread, and hands
/// back the runs of those the notification server refused.
pub struct Herald {
    to_show: Sender<Job>,
    refused: Receiver<Vec<String>>,
}

impl Herald {
    /// Starts the herald's thread; a click on a notification calls `open`,
    /// a button of an ask `answer`.
    pub fn start(open: Opener, answer: Answerer) -> std::io::Result<Herald> {
        let (to_show, queue) = channel::<Job>();
        let (refuse, refused) = channel();
        std::thread::Builder::new().name("corral-herald".into()).spawn(move || {
            // The asks on the desktop, by the run whose budget they ask about.
            let mut asking: HashMap<String, platform::Shown> = HashMap::new();
            for job in queue {
                match job {
                    Job::Announce(note, runs) => {
                        if let Err(e) = platform::show(note, open) {
                            tracing::warn!("{e}");
                            if refuse.send(runs).is_err() {
                                return;
                            }
                        }
                    }
                    Job::Ask(ask) => match platform::ask(&ask, open, answer) {
                        Ok(shown) => {
                            if let Some(old) = asking.insert(ask.owner().to_string(), shown) {
                                platform::withdraw(old);
                            }
                        }
                        Err(e) => tracing::warn!("{e}"),
                    },
                    Job::Withdraw(owner) => {
                        if let Some(shown) = asking.remove(&owner) {
                            platform::withdraw(shown);
                        }
                    }
                }
            }
        })?;
        Ok(Herald { to_show, refused })
    }

    /// Shows `note`, which speaks for `runs`, as soon as the server takes
    /// it (a click is waited for on a thread of its own).
    pub fn announce(&self, note: Announcement, runs: Vec<String>) {
        self.send(Job::Announce(note, runs));
    }

    /// Shows `ask` with its buttons, until it is answered or withdrawn.
    pub fn ask(&self, ask: Ask) {
        self.send(Job::Ask(Box::new(ask)));
    }

    /// Takes back the ask of run `owner`'s budget: answered elsewhere.
    pub fn withdraw(&self, owner: &str) {
        self.send(Job::Withdraw(owner.to_string()));
    }

    fn send(&self, job: Job) {
        if self.to_show.send(job).is_err() {
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

/// Shows what a menu action asked to see (a schedule's latest fires).
pub fn shown(title: &str, text: &str) {
    if let Err(e) = platform::shown(title, text) {
        tracing::warn!("{e}");
    }
}
