//! Following the store for a desktop process (the tray, the window): one
//! round at a time, each saying which runs changed status and whose
//! transcripts grew, so each process redraws only what changed.

use std::time::{Duration, Instant};

use super::Watcher;
use crate::home::Home;
use crate::process::{FolderWatch, Waker};
use crate::store::{Counts, EventMark, Store, StoreError};
use crate::upkeep::heal::{open_healed, HealError};
use crate::upkeep::queue::ShepherdCommand;

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

/// Follows the store for a desktop process, one round at a time: a
/// [`Follower::round`] says what changed, a [`Follower::wait`] sleeps until
/// the kernel says something happened (or the caller's own next moment).
/// It heals as every waiting process does. On an error the caller shows it
/// and calls [`Follower::round`] again later: the next round opens a fresh
/// connection. Runtime state only.
pub struct Follower {
    home: Home,
    shepherd: ShepherdCommand,
    /// The connection of the last successful round, and its watcher.
    store: Option<(Store, Watcher)>,
    /// Lets another thread end a wait (a redraw asked for by the menu).
    waker: Waker,
    last_version: i64,
    /// The status version last reported.
    last_status: i64,
    /// The next round reports the counts even if nothing changed.
    again: bool,
    /// When it last looked, and whether it found no status change then.
    looked_at: Option<Instant>,
    quiet: bool,
    /// Growing transcripts, if followed.
    transcripts: Option<Transcripts>,
    /// `config.toml` written whole: healed at once (a typo is shown, a
    /// wider `max_parallel` starts queued runs), as no commit tells of it.
    settings: Option<FolderWatch>,
    /// The settings were written since the last look.
    settings_written: bool,
}

/// The shortest time between two looks of a desktop process at the store:
/// while runs stream, every commit would wake it; a status change still
/// shows within this.
pub const LOOK_AT_MOST_EVERY: Duration = Duration::from_millis(50);

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
    pub fn new(
        home: Home,
        shepherd: ShepherdCommand,
        transcripts_every: Option<Duration>,
    ) -> std::io::Result<Follower> {
        let settings = FolderWatch::written_whole(home.config_dir(), "config.toml").ok();
        Ok(Follower {
            home,
            shepherd,
            store: None,
            waker: Waker::new()?,
            last_version: -1,
            last_status: -1,
            again: true,
            looked_at: None,
            quiet: false,
            transcripts: transcripts_every.map(|every| Transcripts {
                every,
                mark: EventMark::default(),
                grew: false,
                told_at: None,
            }),
            settings,
            settings_written: false,
        })
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

    /// Sleeps until the store may have changed (a commit, a followed
    /// process's exit, a heal due, transcripts due to be told), the waker
    /// wakes, or `until`.
    pub fn wait(&mut self, until: Option<Instant>) -> Result<(), StoreError> {
        // Streaming runs commit many times a second; after a look that found
        // no status change, a desktop process looks again no sooner than
        // LOOK_AT_MOST_EVERY (a status change still shows within it).
        if let Some(next) = self.looked_at.filter(|_| self.quiet).map(|at| at + LOOK_AT_MOST_EVERY) {
            let now = Instant::now();
            if next > now && until.is_none_or(|u| u > now) {
                std::thread::sleep((next - now).min(until.map_or(Duration::MAX, |u| u - now)));
            }
        }
        let due = self.transcripts.as_ref().filter(|t| t.grew).and_then(|t| t.told_at.map(|at| at + t.every));
        let until = [until, due].into_iter().flatten().min();
        let Some((store, watcher)) = &mut self.store else { return Ok(()) };
        let extra: Vec<std::os::fd::BorrowedFd<'_>> = self.settings.iter().map(std::os::fd::AsFd::as_fd).collect();
        if let super::Wake::Extra(_) = watcher.wait(store, until, &extra)? {
            self.settings_written |= self.settings.as_ref().is_some_and(FolderWatch::drain);
        }
        Ok(())
    }

    /// Wakes a [`Follower::wait`] from another thread.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// Makes the next round report the counts (after something the store
    /// does not show changed, such as a redraw wanted by the user).
    pub fn again(&mut self) {
        self.again = true;
    }

    /// The connection of the last successful round.
    pub fn store(&mut self) -> Option<&mut Store> {
        self.store.as_mut().map(|(store, _)| store)
    }

    fn look(&mut self) -> Result<Change, HealError> {
        self.looked_at = Some(Instant::now());
        self.quiet = true;
        let (store, watcher) = match &mut self.store {
            Some(open) => open,
            None => {
                self.again = true;
                let store = open_healed(&self.home, &self.shepherd)?;
                let mut watcher = Watcher::new(&store)?.with_waker(self.waker.clone());
                watcher.healed_now();
                if let Some(t) = &mut self.transcripts {
                    t.mark = store.event_mark()?;
                }
                self.store.insert((store, watcher))
            }
        };
        let mut changed = std::mem::take(&mut self.again);
        // A process does not see its own commits in the data version.
        changed |= match std::mem::take(&mut self.settings_written) {
            true => watcher.heal_now(store, &self.shepherd)?,
            false => watcher.heal_if_due(store, &self.shepherd)?,
        };
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
                self.quiet = false;
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
