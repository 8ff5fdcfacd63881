//! Keeps the tray and notifications true to the store, whoever changed it
//! (the app, the CLI, an MCP server, a shepherd).
//!
//! One thread polls `PRAGMA data_version` every 50 ms; on a change it
//! refreshes the tray and announces newly ended runs. Every second it also
//! reconciles (a shepherd killed with SIGKILL commits nothing) and moves
//! the queue.

use std::time::{Duration, Instant};

use corral::config::Config;
use tauri::{AppHandle, Manager};

use crate::state::AppState;
use crate::{notify, tray};

/// How often the store is checked for changes.
const POLL: Duration = Duration::from_millis(50);
/// How often shepherds are checked even without changes.
const RECONCILE: Duration = Duration::from_secs(1);
/// More ended runs than this at once are announced as one notification.
const GROUP_OVER: usize = 3;

/// Starts the watcher thread.
pub fn start(app: AppHandle) {
    std::thread::Builder::new()
        .name("corral-watcher".into())
        .spawn(move || {
            if let Err(e) = watch(&app) {
                tracing::error!("the store watcher stopped: {e}");
            }
        })
        .expect("spawn the watcher");
}

fn watch(app: &AppHandle) -> Result<(), crate::error::AppError> {
    let state = app.state::<AppState>();
    let mut store = state.store()?;
    let shepherd = state.shepherd()?;
    let mut last_version = -1;
    let mut last_reconcile = Instant::now() - RECONCILE;
    let mut first = true;
    loop {
        if last_reconcile.elapsed() >= RECONCILE {
            corral::reconcile::reconcile(&mut store)?;
            let config = Config::load(&state.home)?;
            corral::queue::start_queued(&mut store, &config, &shepherd)?;
            last_reconcile = Instant::now();
        }
        let version = store.data_version()?;
        if version != last_version {
            last_version = version;
            state.bump_generation();
            tray::refresh(app, &store)?;
            let ended = store.claim_notifications(500)?;
            // Runs that ended while the app was away are announced once,
            // grouped if there are many.
            if first && ended.len() > GROUP_OVER {
                notify::announce_group(app, &ended);
            } else {
                for run in &ended {
                    notify::announce(app, run);
                }
            }
            first = false;
            if !ended.is_empty() {
                last_version = store.data_version()?;
            }
        }
        std::thread::sleep(POLL);
    }
}
