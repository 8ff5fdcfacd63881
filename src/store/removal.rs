//! Deleting runs from the database: the rows of a run and of everything
//! that belongs to it (transcript, replies, waits), in one transaction.
//! Which runs may go, and their files, is decided in `remove`.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::run::RunStatus;

impl Store {
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
        let terminal = RunStatus::sql_list(RunStatus::TERMINAL);
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
            .prepare(
                "SELECT run_id, sum(length(CAST(text AS BLOB)) + coalesce(length(CAST(json AS BLOB)), 0)) AS bytes
                 FROM events GROUP BY run_id ORDER BY bytes DESC LIMIT ?1",
            )
            .doing("measuring transcripts")?;
        let rows = stmt
            .query_map([limit as i64], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .doing("measuring transcripts")?;
        rows.collect::<Result<_, _>>().doing("measuring transcripts")
    }
}
