//! Waiting for the store to change.
//!
//! Readers (`wait`, `tail --follow`, the app, the MCP server) learn of every
//! change from the database alone, by polling `PRAGMA data_version` on their
//! own connection: it changes when any other connection commits and costs no
//! disk read when nothing did. A 5 ms poll sees a commit within a few ms.

use std::time::{Duration, Instant};

use crate::store::{Store, StoreError};

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
