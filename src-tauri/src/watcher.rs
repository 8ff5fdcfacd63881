//! Keeps the tray and notifications true to the store, whoever changed it
//! (the app, the CLI, an MCP server, a shepherd).
//!
//! One thread polls `PRAGMA data_version` every 50 ms; on a change it tells
//! the window what changed (which transcripts; the counts, if a status
//! did), and when a status changed it refreshes the tray and claims newly
//! ended runs, which it announces as
//! `corral::announce` decides: one notification per piece of work, endings
//! close together as one summary, a few a minute at most (what ended while
//! the app was away, as one). It also heals the
//! store (see `corral::heal`) at least every 250 ms: a shepherd killed with
//! SIGKILL commits nothing, and a freed slot must go to the queue.
//!
//! The watcher never dies. Any error (a typo in `config.toml`, a busy or
//! unreadable database) is shown in the tray's menu and tooltip, and the
//! next round tries again with a fresh connection.

use std::time::{Duration, Instant};

use corral::announce::{self, Pacer, Release};
use corral::heal::{heal, HEAL_EVERY};
use corral::Store;
use tauri::{AppHandle, Manager};

use crate::error::AppError;
use crate::events::{self, StoreChanged};
use crate::state::AppState;
use crate::{notify, tray};

/// How often the store is checked for changes.
const POLL: Duration = Duration::from_millis(50);
/// How long to wait before trying again after an error.
const RETRY: Duration = Duration::from_secs(1);
/// How often, at most, the window is told that transcripts grew (it draws
/// them at most 4 times a second; status changes are told at once).
const TELL_TRANSCRIPTS_EVERY: Duration = Duration::from_millis(250);
/// How long to wait before announcing again what the notification server
/// refused (none runs yet, at login).
const NOTIFY_RETRY: Duration = Duration::from_secs(5);

/// Starts the watcher thread.
pub fn start(app: AppHandle) {
    std::thread::Builder::new()
        .name("corral-watcher".into())
        .spawn(move || {
            let mut watch = Watch::default();
            loop {
                match watch.round(&app) {
                    Ok(()) => {
                        if watch.problem.take().is_some() {
                            tray::set_problem(&app, None);
                            app.state::<AppState>().set_problem(None);
                            events::store_problem(&app, None);
                            // Redraw what the problem hid.
                            watch.last_version = -1;
                            watch.last_status = -1;
                        }
                        std::thread::sleep(POLL);
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if watch.problem.as_deref() != Some(text.as_str()) {
                            tracing::error!("the store watcher will retry: {text}");
                            tray::set_problem(&app, Some(&text));
                            app.state::<AppState>().set_problem(Some(text.clone()));
                            events::store_problem(&app, Some(&text));
                            watch.problem = Some(text);
                        }
                        // A fresh connection next time: the old one may be
                        // the trouble.
                        watch.store = None;
                        std::thread::sleep(RETRY);
                    }
                }
            }
        })
        .expect("spawn the watcher");
}

/// What the watcher keeps between rounds. Runtime state only.
#[derive(Default)]
struct Watch {
    store: Option<Store>,
    last_version: i64,
    /// The store's status version last shown in the tray.
    last_status: i64,
    /// What the window was told of transcripts.
    transcripts: Transcripts,
    healed_at: Option<Instant>,
    /// The first round announces what ended while the app was away.
    announced_once: bool,
    /// Endings waiting to be announced.
    announcer: Announcer,
    /// The error shown in the tray, while there is one.
    problem: Option<String>,
}

impl Watch {
    fn round(&mut self, app: &AppHandle) -> Result<(), AppError> {
        let state = app.state::<AppState>();
        let store = match &mut self.store {
            Some(store) => store,
            None => {
                self.last_version = -1;
                self.last_status = -1;
                self.healed_at = Some(Instant::now());
                let store = corral::heal::open_healed(&state.home, &state.shepherd()?)?;
                self.transcripts.mark = store.event_mark()?;
                self.store.insert(store)
            }
        };
        // Endings the notification server refused were given back: claim
        // them again.
        let mut changed = self.announcer.refused_until.take_if(|until| Instant::now() >= *until).is_some();
        if self.healed_at.is_none_or(|at| at.elapsed() >= HEAL_EVERY) {
            changed = heal(store, &state.shepherd()?)?.changed();
            self.healed_at = Some(Instant::now());
        }
        let quiet = state.quiet();
        self.announcer.release(app, store, quiet)?;
        let version = store.data_version()?;
        if version == self.last_version && !changed {
            return self.transcripts.tell(app, store);
        }
        self.last_version = version;
        self.transcripts.grew = true;
        // Transcript lines move the data version all the time; the tray and
        // notifications only care when a status (or the set of runs) does,
        // and the window only about what it shows.
        let status = store.status_version()?;
        if status == self.last_status && !changed {
            return self.transcripts.tell(app, store);
        }
        self.last_status = status;
        let transcripts = self.transcripts.grown(store)?;
        // One count for the window and the tray.
        let counts = store.counts()?;
        events::store_changed(app, &StoreChanged { counts: Some(counts), transcripts });
        tray::refresh(app, store, counts)?;
        let claimed = store.claim_notifications(usize::MAX >> 1)?;
        let claimed_any = !claimed.is_empty();
        let speakers = announce::speakers(store, claimed)?;
        if !self.announced_once {
            // What ended while the app was away: one announcement.
            let note = match speakers.as_slice() {
                [] => None,
                [one] => Some(announce::single(store, one)?),
                many => Some(announce::summary(many, true)),
            };
            if let Some(note) = note {
                let ids: Vec<String> = speakers.iter().map(|r| r.id.clone()).collect();
                self.announcer.show(app, store, note, &ids)?;
            }
            self.announced_once = true;
        } else {
            self.announcer.pacer.push(speakers, Instant::now());
            self.announcer.release(app, store, quiet)?;
        }
        if claimed_any {
            self.last_version = store.data_version()?;
        }
        Ok(())
    }
}

/// What the window was told of growing transcripts. Runtime state only.
#[derive(Default)]
struct Transcripts {
    /// The newest event it was told of.
    mark: corral::store::EventMark,
    /// The store changed since it was last told.
    grew: bool,
    /// When it was last told.
    told_at: Option<Instant>,
}

impl Transcripts {
    /// The runs whose transcripts grew since the window was last told.
    fn grown(&mut self, store: &Store) -> Result<Vec<String>, AppError> {
        let (runs, mark) = store.transcripts_changed_since(self.mark)?;
        self.mark = mark;
        self.grew = false;
        self.told_at = Some(Instant::now());
        Ok(runs)
    }

    /// Tells the window which transcripts grew, at most every
    /// [`TELL_TRANSCRIPTS_EVERY`] (it draws them no more often).
    fn tell(&mut self, app: &AppHandle, store: &Store) -> Result<(), AppError> {
        if !self.grew || self.told_at.is_some_and(|at| at.elapsed() < TELL_TRANSCRIPTS_EVERY) {
            return Ok(());
        }
        let transcripts = self.grown(store)?;
        if !transcripts.is_empty() {
            events::store_changed(app, &StoreChanged { counts: None, transcripts });
        }
        Ok(())
    }
}

/// Endings on their way to the desktop. Runtime state only.
#[derive(Default)]
struct Announcer {
    pacer: Pacer,
    /// "Do not disturb" was on at the last round.
    was_quiet: bool,
    /// The notification server refused an announcement; its endings were
    /// given back to the store, to be claimed again from then on.
    refused_until: Option<Instant>,
}

impl Announcer {
    /// Shows what the pacer lets out now: nothing while "Do not disturb" is
    /// on, everything that waited (as one summary) when it goes off.
    fn release(&mut self, app: &AppHandle, store: &mut Store, quiet: bool) -> Result<(), AppError> {
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
                (announce::summary(&runs, false), runs.into_iter().map(|r| r.id).collect::<Vec<_>>())
            }
            None => return Ok(()),
        };
        self.show(app, store, note, &ids)
    }

    /// Shows `note`, which speaks for the runs `ids`. If the notification
    /// server does not take it, their claims go back to the store (so a
    /// later round announces them: never lost, never twice).
    fn show(
        &mut self,
        app: &AppHandle,
        store: &mut Store,
        note: announce::Announcement,
        ids: &[String],
    ) -> Result<(), AppError> {
        if let Err(refused) = notify::show(app, note) {
            tracing::warn!("{refused}; announcing again in {NOTIFY_RETRY:?}");
            store.unclaim_notifications(ids)?;
            self.refused_until = Some(Instant::now() + NOTIFY_RETRY);
        }
        Ok(())
    }
}
