//! The `sandbox_allows` table: what a run's sandbox was widened to after it
//! started, read by its shepherd at each turn and when nudged.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::sandbox::Widening;
use crate::text::time;

impl Store {
    /// Widens run `id`'s sandbox by `widening`; true if it allowed anything
    /// new.
    pub fn allow_in_sandbox(&mut self, id: &str, widening: &Widening) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("widening a run's sandbox", |tx| {
            let mut added = 0;
            for (kind, value) in widening.entries() {
                added += tx.execute(
                    "INSERT INTO sandbox_allows (run_id, kind, value, allowed_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING",
                    params![id, kind, value, now],
                )?;
            }
            Ok(added > 0)
        })
    }

    /// What run `id`'s sandbox was widened to, oldest first.
    pub fn sandbox_allows(&self, id: &str) -> Result<Widening, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT kind, value FROM sandbox_allows WHERE run_id = ?1 ORDER BY allowed_at, value")
            .doing("reading a run's sandbox")?;
        let rows = stmt
            .query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .doing("reading a run's sandbox")?;
        let mut widening = Widening::default();
        for row in rows {
            let (kind, value) = row.doing("reading a run's sandbox")?;
            match kind.as_str() {
                "write" => widening.write.push(value),
                _ => widening.hosts.push(value),
            }
        }
        Ok(widening)
    }
}
