//! The store's change sequence: each change to a run takes the next number
//! (triggers of migration 0013), so a follower that remembers the last
//! number it saw is sent everything after it, once, in commit order. What
//! `corral watch` streams, and what a desktop following a remote host reads.

use serde::Serialize;

use super::{Doing, Store, StoreError};
use crate::run::Run;

/// One change, as `corral watch --json` prints it.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Change {
    /// A run was added or changed: its state now.
    Run {
        /// The change's number.
        seq: i64,
        /// The run as it is.
        run: Box<Run>,
    },
    /// A run was removed (`rm`, `prune`).
    Removed {
        /// The change's number.
        seq: i64,
        /// The removed run's id.
        removed: String,
    },
}

impl Change {
    /// The change's number.
    pub fn seq(&self) -> i64 {
        match self {
            Change::Run { seq, .. } | Change::Removed { seq, .. } => *seq,
        }
    }
}

/// What [`Store::changes_since`] read: the changes, and how far they go.
#[derive(Debug, Clone)]
pub struct ChangesRead {
    /// The changes, oldest first.
    pub changes: Vec<Change>,
    /// Every change up to this number is in `changes` (or was superseded
    /// by a later one there): where a reader stands after them.
    pub upto: i64,
    /// More changes follow `upto` already: read again at once.
    pub more: bool,
}

impl Store {
    /// The number of the latest change.
    pub fn change_seq(&self) -> Result<i64, StoreError> {
        self.conn()
            .prepare_cached("SELECT seq FROM change_seq WHERE id = 1")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .doing("reading the change sequence")
    }

    /// Up to `limit` changes after `since`, oldest first: each changed run
    /// once, at its latest number, and each removal; and the number they go
    /// up to, read in the same snapshot (a change committed meanwhile comes
    /// next time, never skipped).
    pub fn changes_since(&self, since: i64, limit: usize) -> Result<ChangesRead, StoreError> {
        let doing = "reading changes";
        // One snapshot: the numbers and the runs' states agree.
        let snapshot = self.conn().unchecked_transaction().doing(doing)?;
        // (number, run id) pairs after `since`, in order, at most `limit`.
        let numbered = |sql: &str| -> Result<Vec<(i64, String)>, StoreError> {
            self.conn()
                .prepare_cached(sql)
                .doing(doing)?
                .query_map([since, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))
                .doing(doing)?
                .collect::<Result<_, _>>()
                .doing(doing)
        };
        let latest: i64 = self
            .conn()
            .prepare_cached("SELECT seq FROM change_seq WHERE id = 1")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .doing(doing)?;
        let changed = numbered("SELECT change_seq, id FROM runs WHERE change_seq > ?1 ORDER BY change_seq LIMIT ?2")?;
        let removed = numbered("SELECT seq, id FROM removed_runs WHERE seq > ?1 ORDER BY seq LIMIT ?2")?;
        // Each list was cut at `limit`: past the first cut's number, the
        // other list may lack changes, so nothing past it is sent yet.
        let cut_at = |list: &[(i64, String)]| (list.len() >= limit).then(|| list.last().map(|(seq, _)| *seq)).flatten();
        let cut = [cut_at(&changed), cut_at(&removed)].into_iter().flatten().min();
        let mut changes = Vec::with_capacity(changed.len() + removed.len());
        for (seq, id) in changed {
            // Read in the same breath as its number: a run changed since
            // comes again with its new number.
            match self.run(&id) {
                Ok(run) => changes.push(Change::Run { seq, run: Box::new(run) }),
                Err(StoreError::UnknownRun(_)) => {}
                Err(e) => return Err(e),
            }
        }
        drop(snapshot);
        changes.extend(removed.into_iter().map(|(seq, removed)| Change::Removed { seq, removed }));
        changes.retain(|c| cut.is_none_or(|cut| c.seq() <= cut));
        changes.sort_by_key(Change::seq);
        Ok(ChangesRead { changes, upto: cut.unwrap_or(latest.max(since)), more: cut.is_some() })
    }
}
