//! Keeps the window true to the store, whoever changed it (the tray, the
//! CLI, an MCP server, a shepherd): one thread follows the store
//! (`corral::watch::Follower`, asleep until the kernel tells it the store's
//! files were written or a shepherd exited) and tells the webview what changed — at once with the counts when a
//! status changed, and which transcripts grew at most every 250 ms (the
//! window draws them no more often).
//!
//! The watcher never dies. An error (a typo in `config.toml`, an unreadable
//! database) is shown as a banner in the window, and the next round tries
//! again with a fresh connection.

use std::time::Duration;

use corral::watch::Follower;
use tauri::{AppHandle, Manager};

use crate::error::AppError;
use crate::events;
use crate::state::AppState;

/// How long to wait before trying again after an error.
const RETRY: Duration = Duration::from_secs(1);
/// How often, at most, the window is told that transcripts grew.
const TELL_TRANSCRIPTS_EVERY: Duration = Duration::from_millis(250);

/// Starts the watcher thread.
pub fn start(app: AppHandle) -> Result<(), AppError> {
    let state = app.state::<AppState>();
    let mut follower = Follower::new(state.home.clone(), state.shepherd()?, Some(TELL_TRANSCRIPTS_EVERY))?;
    std::thread::Builder::new().name("corral-watcher".into()).spawn(move || {
        let state = app.state::<AppState>();
        loop {
            match follower.round() {
                Ok(change) => {
                    if state.problem().is_some() {
                        state.set_problem(None);
                        events::store_problem(&app, None);
                    }
                    if !change.is_empty() {
                        events::store_changed(&app, &change);
                    }
                    if let Err(e) = follower.wait(None) {
                        tracing::warn!("waiting for the store: {e}");
                        std::thread::sleep(RETRY);
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    if state.problem().as_deref() != Some(text.as_str()) {
                        tracing::error!("the store watcher will retry: {text}");
                        state.set_problem(Some(text.clone()));
                        events::store_problem(&app, Some(&text));
                    }
                    std::thread::sleep(RETRY);
                }
            }
        }
    })?;
    Ok(())
}
