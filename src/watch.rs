//! Waiting for the store to change.
//!
//! Readers (`wait`, `tail --follow`, the app, the MCP server) learn of every
//! change from the database alone, by polling `PRAGMA data_version` on their
//! own connection: it changes when any other connection commits and costs no
//! disk read when nothing did. A 5 ms poll sees a commit within a few ms.
//!
//! The desktop processes (the tray, the window) follow the store with a
//! [`Follower`]: it heals as every waiting process must, and tells which
//! runs changed status and whose transcripts grew, so each process redraws
//! only what changed.

use std::time::{Duration, Instant};

use crate::heal::{heal, open_healed, HealError, HEAL_EVERY};
use crate::home::Home;
use crate::queue::ShepherdCommand;
use crate::store::{Counts, EventMark, Store, StoreError};

/// How often the data version is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Watches one connection's view of the database for commits by others.
pub struct Watcher {
    last: i64,
}

impl Watcher {
    /// Starts watching from the store's current state.
    pub fn new(store: &Store) -> Result<Watcher, StoreError> {
        Ok(Watcher { last: store.data_version()? })
    }

    /// Blocks until another connection commits or `deadline` passes.
    /// Returns false on the deadline.
    pub fn changed_before(&mut self, store: &Store, deadline: Option<Instant>) -> Result<bool, StoreError> {
        loop {
            let now = store.data_version()?;
            if now != self.last {
                self.last = now;
                return Ok(true);
            }
            let mut pause = POLL_INTERVAL;
            if let Some(deadline) = deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                pause = pause.min(left);
            }
            std::thread::sleep(pause);
        }
    }
}

/// How often a desktop process checks the store for changes.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(50);

/// What a [`Follower`] saw change in one round (what the window is told,
/// as is).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Change {
    /// A run was added, changed status, or was cleared or seen: lists and
    /// counts are stale. The counts come with it.
    pub counts: Option<Counts>,
    /// Runs whose transcripts gained events (only if transcripts are
    /// followed).
    pub transcripts: Vec<String>,
}

impl Change {
    /// True if nothing changed.
    pub fn is_empty(&self) -> bool {
        self.counts.is_none() && self.transcripts.is_empty()
    }
}

/// Follows the store for a desktop process, one round at a time, and heals
/// it at least every [`HEAL_EVERY`]. On an error the caller shows it and
/// calls [`Follower::round`] again later: the next round opens a fresh
/// connection. Runtime state only.
pub struct Follower {
    home: Home,
    shepherd: ShepherdCommand,
    store: Option<Store>,
    last_version: i64,
    /// The status version last reported.
    last_status: i64,
    healed_at: Option<Instant>,
    /// The next round reports the counts even if nothing changed.
    again: bool,
    /// Growing transcripts, if followed.
    transcripts: Option<Transcripts>,
}

/// What was told of growing transcripts. Runtime state only.
struct Transcripts {
    /// Told at most this often (statuses are told at once).
    every: Duration,
    /// The newest event told of.
    mark: EventMark,
    /// The store changed since it was last told.
    grew: bool,
    told_at: Option<Instant>,
}

impl Follower {
    /// Follows the store of `home`, healing with `shepherd`. With
    /// `transcripts_every`, it also tells whose transcripts grew, at most
    /// that often.
    pub fn new(home: Home, shepherd: ShepherdCommand, transcripts_every: Option<Duration>) -> Follower {
        Follower {
            home,
            shepherd,
            store: None,
            last_version: -1,
            last_status: -1,
            healed_at: None,
            again: true,
            transcripts: transcripts_every.map(|every| Transcripts {
                every,
                mark: EventMark::default(),
                grew: false,
                told_at: None,
            }),
        }
    }

    /// Looks at the store once: heals it if due, and says what changed
    /// since the last round. The first round (and the first after an error
    /// or [`Follower::again`]) reports the counts.
    pub fn round(&mut self) -> Result<Change, HealError> {
        let result = self.look();
        if result.is_err() {
            // A fresh connection next time: the old one may be the trouble.
            self.store = None;
        }
        result
    }

    /// Makes the next round report the counts (after something the store
    /// does not show changed, such as a redraw wanted by the user).
    pub fn again(&mut self) {
        self.again = true;
    }

    /// The connection of the last successful round.
    pub fn store(&mut self) -> Option<&mut Store> {
        self.store.as_mut()
    }

    fn look(&mut self) -> Result<Change, HealError> {
        let store = match &mut self.store {
            Some(store) => store,
            None => {
                self.again = true;
                self.healed_at = Some(Instant::now());
                let store = open_healed(&self.home, &self.shepherd)?;
                if let Some(t) = &mut self.transcripts {
                    t.mark = store.event_mark()?;
                }
                self.store.insert(store)
            }
        };
        let mut changed = std::mem::take(&mut self.again);
        if self.healed_at.is_none_or(|at| at.elapsed() >= HEAL_EVERY) {
            // A process does not see its own commits in the data version.
            changed |= heal(store, &self.shepherd)?.changed();
            self.healed_at = Some(Instant::now());
        }
        let version = store.data_version()?;
        if version != self.last_version || changed {
            self.last_version = version;
            if let Some(t) = &mut self.transcripts {
                t.grew = true;
            }
            // Transcript lines move the data version all the time; counts
            // only move with statuses (or the set of runs).
            let status = store.status_version()?;
            if status != self.last_status || changed {
                self.last_status = status;
                let transcripts = match &mut self.transcripts {
                    Some(t) => t.grown(store)?,
                    None => Vec::new(),
                };
                return Ok(Change { counts: Some(store.counts()?), transcripts });
            }
        }
        let transcripts = match &mut self.transcripts {
            Some(t) if t.due() => t.grown(store)?,
            _ => Vec::new(),
        };
        Ok(Change { counts: None, transcripts })
    }
}

impl Transcripts {
    fn due(&self) -> bool {
        self.grew && self.told_at.is_none_or(|at| at.elapsed() >= self.every)
    }

    fn grown(&mut self, store: &Store) -> Result<Vec<String>, StoreError> {
        let (runs, mark) = store.transcripts_changed_since(self.mark)?;
        self.mark = mark;
        self.grew = false;
        self.told_at = Some(Instant::now());
        Ok(runs)
    }
}
