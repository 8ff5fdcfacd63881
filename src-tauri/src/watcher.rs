//! Keeps the tray and notifications true to the store, whoever changed it
//! (the app, the CLI, an MCP server, a shepherd).
//!
//! One thread polls `PRAGMA data_version` every 50 ms; on a change it
//! refreshes the tray and announces newly ended runs. It also heals the
//! store (see `corral::heal`) at least every 250 ms: a shepherd killed with
//! SIGKILL commits nothing, and a freed slot must go to the queue.
//!
//! The watcher never dies. Any error (a typo in `config.toml`, a busy or
//! unreadable database) is shown in the tray's menu and tooltip, and the
//! next round tries again with a fresh connection.

use std::time::{Duration, Instant};

use corral::heal::{heal, HEAL_EVERY};
use corral::Store;
use tauri::{AppHandle, Manager};

use crate::error::AppError;
use crate::state::AppState;
use crate::{notify, tray};

/// How often the store is checked for changes.
const POLL: Duration = Duration::from_millis(50);
/// How long to wait before trying again after an error.
const RETRY: Duration = Duration::from_secs(1);
/// More ended runs than this at once are announced as one notification.
const GROUP_OVER: usize = 3;

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
                            watch.last_version = -1; // redraw what the problem hid
                        }
                        std::thread::sleep(POLL);
                    }
                    Err(e) => {
                        let text = e.to_string();
                        if watch.problem.as_deref() != Some(text.as_str()) {
                            tracing::error!("the store watcher will retry: {text}");
                            tray::set_problem(&app, Some(&text));
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
    healed_at: Option<Instant>,
    /// The first round announces what ended while the app was away.
    announced_once: bool,
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
                self.healed_at = Some(Instant::now());
                self.store.insert(corral::heal::open_healed(&state.home, &state.shepherd()?)?)
            }
        };
        let mut changed = false;
        if self.healed_at.is_none_or(|at| at.elapsed() >= HEAL_EVERY) {
            changed = heal(store, &state.shepherd()?)?.changed();
            self.healed_at = Some(Instant::now());
        }
        let version = store.data_version()?;
        if version == self.last_version && !changed {
            return Ok(());
        }
        self.last_version = version;
        state.bump_generation();
        tray::refresh(app, store)?;
        let ended = store.claim_notifications(500)?;
        // Runs that ended while the app was away are announced once,
        // grouped if there are many.
        if !self.announced_once && ended.len() > GROUP_OVER {
            notify::announce_group(app, &ended);
        } else {
            for run in &ended {
                notify::announce(app, run);
            }
        }
        self.announced_once = true;
        if !ended.is_empty() {
            self.last_version = store.data_version()?;
        }
        Ok(())
    }
}
