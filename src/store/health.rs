//! What `corral doctor` asks of the database: its schema version, whether
//! SQLite finds it sound, and how it keeps space.

use super::{Doing, Store, StoreError};

/// The database's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `PRAGMA user_version`: the last migration applied.
    pub schema: i64,
    /// `ok`, or what `PRAGMA integrity_check` found (its first lines).
    pub integrity: String,
    /// Bytes in use and free inside the file.
    pub bytes: u64,
    /// Whether removed runs' pages go back to the disk (incremental vacuum).
    pub gives_space_back: bool,
    /// Runs recorded.
    pub runs: u64,
}

impl Store {
    /// Checks the database (reads all of it: seconds on a store of GBs).
    pub fn health(&self) -> Result<Health, StoreError> {
        let conn = self.conn();
        let schema = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).doing("reading the schema version")?;
        let mut stmt = conn.prepare("PRAGMA integrity_check(5)").doing("checking the database")?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .doing("checking the database")?
            .collect::<Result<_, _>>()
            .doing("checking the database")?;
        let auto_vacuum: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).doing("reading auto_vacuum")?;
        let runs: i64 = conn.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).doing("counting runs")?;
        Ok(Health {
            schema,
            integrity: lines.join("; "),
            bytes: self.database_bytes()?,
            gives_space_back: auto_vacuum == 2,
            runs: runs.max(0) as u64,
        })
    }
}
