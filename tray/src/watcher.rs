//! Keeps the tray and notifications true to the store, whoever changed it
//! (the window, the CLI, an MCP server, a shepherd).
//!
//! One thread follows the store (`corral::watch::Follower`: asleep until
//! the kernel tells it the store's files were written or a shepherd
//! exited, or the menu wakes it); when a status changed it sends the panel
//! a fresh view and claims newly ended runs, which it announces as
//! `corral::attention::announce` decides: one notification per piece of work, endings
//! close together as one summary, a few a minute at most (what ended while
//! the tray was away, as one).
//!
//! The watcher never dies. Any error (a typo in `config.toml`, a busy or
//! unreadable database) is shown in the tray's menu, and the next round
//! tries again with a fresh connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral::attention::announce::{self, Pacer, Release};
use corral::upkeep::queue::ShepherdCommand;
use corral::watch::Follower;
use corral::Store;

use crate::asks::Asking;
use crate::error::TrayError;
use crate::notify::Herald;
use crate::panel;
use crate::state::TrayState;
use crate::view::TrayView;

/// How long to wait before trying again after an error.
const RETRY: Duration = Duration::from_secs(1);
/// How long to wait before announcing again what the notification server
/// refused (none runs yet, at login).
const NOTIFY_RETRY: Duration = Duration::from_secs(5);

/// Starts the watcher thread.
pub fn start(state: Arc<TrayState>) -> Result<(), TrayError> {
    let shepherd = ShepherdCommand::lightest().map_err(TrayError::Shepherd)?;
    let follower = Follower::new(state.home.clone(), shepherd, None).map_err(TrayError::Watcher)?;
    state.set_waker(follower.waker());
    let herald = Herald::start(crate::window::open, crate::asks::answer).map_err(TrayError::Watcher)?;
    let spawned = std::thread::Builder::new().name("corral-watcher".into()).spawn(move || {
        let announcer = Announcer { herald, pacer: Pacer::default(), was_quiet: false, refused_until: None };
        let asking = Asking::default();
        let mut watch = Watch { follower, announcer, asking, announced_once: false, problem: None };
        loop {
            match watch.round(&state) {
                Ok(()) => {
                    if watch.problem.take().is_some() {
                        panel::show_problem(None);
                    }
                    let until = watch.announcer.next_moment();
                    if let Err(e) = watch.follower.wait(until) {
                        tracing::warn!("waiting for the store: {e}");
                        std::thread::sleep(RETRY);
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    if watch.problem.as_deref() != Some(text.as_str()) {
                        tracing::error!("the store watcher will retry: {text}");
                        panel::show_problem(Some(text.clone()));
                        watch.problem = Some(text);
                    }
                    std::thread::sleep(RETRY);
                }
            }
        }
    });
    spawned.map(drop).map_err(TrayError::Watcher)
}

/// What the watcher keeps between rounds. Runtime state only.
struct Watch {
    follower: Follower,
    /// Endings waiting to be announced.
    announcer: Announcer,
    /// Budgets reached, asked on the desktop.
    asking: Asking,
    /// The first round announces what ended while the tray was away.
    announced_once: bool,
    /// The error shown in the tray, while there is one.
    problem: Option<String>,
}

impl Watch {
    fn round(&mut self, state: &TrayState) -> Result<(), TrayError> {
        // A redraw asked for by the menu, or endings the notification
        // server refused (given back to the store): look again.
        if state.take_redraw() || self.announcer.refused_until.take_if(|until| Instant::now() >= *until).is_some() {
            self.follower.again();
        }
        let change = self.follower.round()?;
        let store = self.follower.store().expect("a round succeeded, so a store is open");
        self.announcer.take_back_refused(store)?;
        let quiet = state.quiet();
        self.announcer.release(store, quiet)?;
        let Some(counts) = change.counts else { return Ok(()) };
        panel::show(TrayView::read(store, &state.home, counts, quiet)?);
        self.asking.follow(store, &self.announcer.herald, quiet)?;
        let mut claimed = store.claim_notifications(usize::MAX >> 1)?;
        // Other hosts' work: their top-level runs (a child's end is told
        // with its parent's, there as here).
        claimed.extend(store.claim_remote_endings(usize::MAX >> 1)?.into_iter().filter(|r| r.parent_id.is_none()));
        let speakers = announce::speakers(store, claimed)?;
        if !self.announced_once {
            // What ended while the tray was away: one announcement.
            let note = match speakers.as_slice() {
                [] => None,
                [one] => Some(announce::single(store, one)?),
                many => Some(announce::summary(store, many, true)?),
            };
            if let Some(note) = note {
                let ids: Vec<String> = speakers.iter().map(|r| r.id.clone()).collect();
                self.announcer.herald.announce(note, ids);
            }
            self.announced_once = true;
        } else {
            self.announcer.pacer.push(speakers, Instant::now());
            self.announcer.release(store, quiet)?;
        }
        Ok(())
    }
}

/// Endings on their way to the desktop. Runtime state only.
struct Announcer {
    herald: Herald,
    pacer: Pacer,
    /// "Do not disturb" was on at the last round.
    was_quiet: bool,
    /// The notification server refused an announcement; its endings were
    /// given back to the store, to be claimed again from then on.
    refused_until: Option<Instant>,
}

impl Announcer {
    /// The next moment it has something to do without being told: a paced
    /// release, or showing again what the notification server refused.
    fn next_moment(&self) -> Option<Instant> {
        [self.pacer.next_release(), self.refused_until].into_iter().flatten().min()
    }

    /// Shows what the pacer lets out now: nothing while "Do not disturb" is
    /// on, everything that waited (as one summary) when it goes off.
    fn release(&mut self, store: &mut Store, quiet: bool) -> Result<(), TrayError> {
        let resumed = self.was_quiet && !quiet;
        self.was_quiet = quiet;
        let released = match (quiet, resumed) {
            (true, _) => None,
            (false, true) => self.pacer.release_all(Instant::now()),
            (false, false) => self.pacer.release(Instant::now()),
        };
        let (note, ids) = match released {
            Some(Release::One(run)) => (announce::single(store, &run)?, vec![run.id]),
            Some(Release::Many(runs)) => {
                (announce::summary(store, &runs, false)?, runs.into_iter().map(|r| r.id).collect::<Vec<_>>())
            }
            None => return Ok(()),
        };
        self.herald.announce(note, ids);
        Ok(())
    }

    /// Gives back to the store the claims of announcements the
    /// notification server refused, so a later round announces them again:
    /// never lost, never twice.
    fn take_back_refused(&mut self, store: &mut Store) -> Result<(), TrayError> {
        let refused = self.herald.refused();
        if !refused.is_empty() {
            tracing::warn!("{} endings given back; announcing again in {NOTIFY_RETRY:?}", refused.len());
            store.unclaim_notifications(&refused)?;
            self.refused_until = Some(Instant::now() + NOTIFY_RETRY);
        }
        Ok(())
    }
}
