//! The `trusted_presets` table: which project preset files the user trusted,
//! by their content (see `crate::trust`).

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::text::time;

impl Store {
    /// Records that the user trusts the preset file `path` (canonical) as
    /// long as its content hashes to `sha256`.
    pub fn trust_preset(&mut self, path: &str, sha256: &str) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("trusting a preset", |tx| {
            tx.execute(
                "INSERT INTO trusted_presets (path, sha256, trusted_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, trusted_at = excluded.trusted_at",
                params![path, sha256, now],
            )
            .map(drop)
        })
    }

    /// The content hash the preset file `path` was trusted with, if it was.
    pub fn trusted_preset(&self, path: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .prepare_cached("SELECT sha256 FROM trusted_presets WHERE path = ?1")
            .and_then(|mut stmt| stmt.query_row([path], |r| r.get(0)).optional())
            .doing("reading a preset's trust")
    }
}
