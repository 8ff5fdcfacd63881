//! Deleting runs from the database: the rows of a run and of everything
//! that belongs to it (transcript, replies, waits), in one transaction.
//! Which runs may go, and their files, is decided in `remove`.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::run::RunStatus;

/// Pages of the search index merged per transaction when giving space back.
const MERGE_STEP_PAGES: u32 = 256;

/// What giving space back did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Reclaimed {
    /// The database's bytes before.
    pub before: u64,
    /// And after.
    pub after: u64,
}

impl Store {
    /// Gives the pages of deleted rows back to the disk: an incremental
    /// vacuum, or, for a database made before Corral turned that on, one
    /// full `VACUUM` that turns it on (it needs a moment without other
    /// writers; busy, it is left for the next removal).
    pub fn reclaim(&mut self) -> Result<Reclaimed, StoreError> {
        let before = self.database_bytes()?;
        // Removed runs' words leave the full-text indexes as tombstones;
        // merging the index's segments drops them and frees their pages. A
        // step at a time, each its own transaction, so shepherds' commits
        // go on between steps.
        for index in ["events_fts", "runs_fts"] {
            let step = format!("INSERT INTO {index}({index}, rank) VALUES ('merge', -{MERGE_STEP_PAGES})");
            loop {
                let before = self.conn().total_changes();
                self.write("compacting the search index", |tx| tx.execute_batch(&step))?;
                if self.conn().total_changes() - before <= 1 {
                    break;
                }
            }
        }
        let mode: i64 = self.conn().query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).doing("reading auto_vacuum")?;
        const INCREMENTAL: i64 = 2;
        if mode == INCREMENTAL {
            // One page a step: stepped to the end.
            let mut stmt = self.conn().prepare("PRAGMA incremental_vacuum").doing("giving space back")?;
            let mut rows = stmt.query([]).doing("giving space back")?;
            while rows.next().doing("giving space back")?.is_some() {}
        } else {
            let conn = self.conn();
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL").doing("turning on incremental vacuum")?;
            conn.execute_batch("VACUUM").doing("vacuuming the database")?;
        }
        // The file shrinks once the WAL is checkpointed into it.
        self.conn().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).doing("checkpointing")?;
        Ok(Reclaimed { before, after: self.database_bytes()? })
    }

    /// The database's size: its pages in use and free.
    pub fn database_bytes(&self) -> Result<u64, StoreError> {
        let pages: i64 =
            self.conn().query_row("PRAGMA page_count", [], |r| r.get(0)).doing("measuring the database")?;
        let size: i64 = self.conn().query_row("PRAGMA page_size", [], |r| r.get(0)).doing("measuring the database")?;
        Ok((pages * size).max(0) as u64)
    }

    /// Run `id` and every run it launched, at any depth (itself first).
    pub fn tree_of(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut tree = vec![id.to_string()];
        let mut at = 0;
        while at < tree.len() {
            let children = self.children(&tree[at])?;
            tree.extend(children);
            at += 1;
        }
        Ok(tree)
    }

    /// Deletes the rows of `ids` (children before parents) and everything
    /// of theirs, if none is active; false (nothing deleted) if one became
    /// active meanwhile.
    pub fn delete_runs(&mut self, ids: &[String]) -> Result<bool, StoreError> {
        let active = RunStatus::sql_list(RunStatus::ACTIVE);
        self.write("deleting runs", |tx| {
            for id in ids {
                let live: bool = tx.query_row(
                    &format!("SELECT count(*) > 0 FROM runs WHERE id = ?1 AND status IN {active}"),
                    [id],
                    |r| r.get(0),
                )?;
                if live {
                    return Ok(false);
                }
            }
            // Deepest first: a parent row is referenced by its children's.
            for id in ids.iter().rev() {
                tx.execute("DELETE FROM wait_targets WHERE run_id = ?1", params![id])?;
                tx.execute("DELETE FROM waits WHERE run_id = ?1", params![id])?;
                tx.execute("DELETE FROM replies WHERE run_id = ?1", params![id])?;
                tx.execute("DELETE FROM events WHERE run_id = ?1", params![id])?;
                tx.execute("DELETE FROM runs WHERE id = ?1", params![id])?;
            }
            Ok(true)
        })
    }

    /// Ended runs launched by no other run whose tree ended before `before`
    /// (RFC 3339), oldest first: what `prune` may remove.
    pub fn prunable(&self, before: &str) -> Result<Vec<String>, StoreError> {
        let terminal = RunStatus::terminal_sql();
        let mut stmt = self
            .conn()
            .prepare(&format!(
                "SELECT id FROM runs WHERE parent_id IS NULL AND status IN {terminal}
                   AND coalesce(completed_at, created_at) < ?1 ORDER BY num"
            ))
            .doing("finding old runs")?;
        let ids = stmt.query_map([before], |r| r.get::<_, String>(0)).doing("finding old runs")?;
        ids.collect::<Result<_, _>>().doing("finding old runs")
    }

    /// The runs whose transcripts take the most room in the database, with
    /// their bytes, largest first.
    pub fn largest_transcripts(&self, limit: usize) -> Result<Vec<(String, u64)>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT id, transcript_bytes FROM runs ORDER BY transcript_bytes DESC LIMIT ?1")
            .doing("measuring transcripts")?;
        let rows = stmt
            .query_map([limit as i64], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .doing("measuring transcripts")?;
        rows.collect::<Result<_, _>>().doing("measuring transcripts")
    }
}
