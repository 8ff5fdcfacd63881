//! A run's end, written beside its folder before the bell rings, so that a
//! waiter woken by the bell learns it without a read of the store.
//!
//! A thousand `corral wait`s on one run each read it from SQLite when it
//! ended: a read lock each (every `fcntl` walking the other connections'
//! locks), a run read, a store closed. The process that ends a run reads
//! it once instead and writes it as `ended.json` in the run's folder; a
//! woken waiter reads that file.
//!
//! Every change of state goes through [`Store::write`], so the rule lives
//! there, not in each transition: temporary triggers of this connection
//! note which runs a write ends and which it brings back (a status leaving
//! the terminal ones, or a reply that will reopen an ended run). Before the
//! commit, the brought-back runs' files are removed; after it, the ended
//! runs are read under the write lock again and their files written, then
//! the bell rings. A reply racing an end is ordered by that lock: either
//! the end's reader sees the reply and writes nothing, or the reply's
//! write, which comes later, removes the file.
//!
//! The file only ever says what the store said at a commit; a missing one
//! says nothing (a waiter reads the store, as it does when a shepherd dies
//! or a heal is due).

use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::Transaction;

use super::{Store, StoreError};
use crate::home::Home;
use crate::run::{Run, RunStatus};

/// The file of a run's end in its folder.
pub fn ended_file(run_dir: &Path) -> PathBuf {
    run_dir.join("ended.json")
}

/// The run as its end was written, if it ended and was not brought back
/// since; `None` when there is no such file or it cannot be read whole.
pub fn read_ended(run_dir: &Path) -> Option<Run> {
    let bytes = std::fs::read(ended_file(run_dir)).ok()?;
    serde_json::from_slice::<Run>(&bytes).ok().filter(|run| run.status.is_terminal())
}

/// The temporary table and triggers that note, per write of this
/// connection, which runs it ended, or ended otherwise (1), or brought back
/// (0).
pub(super) fn arm(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let terminal = RunStatus::terminal_sql();
    // The table holds a few rows for a moment: in memory (no temporary
    // file made by every writing process), with a page cache of 8 pages
    // (its own default is 2 MB of every shepherd's heap).
    conn.execute_batch(&format!(
        "PRAGMA temp_store = MEMORY;
         PRAGMA temp.cache_size = 8;
         CREATE TEMP TABLE IF NOT EXISTS run_ends (run_id TEXT PRIMARY KEY, ended INTEGER NOT NULL);
         CREATE TEMP TRIGGER IF NOT EXISTS run_ends_status AFTER UPDATE OF status ON main.runs
           WHEN old.status <> new.status AND (old.status IN {terminal} OR new.status IN {terminal})
           BEGIN INSERT OR REPLACE INTO run_ends VALUES (new.id, new.status IN {terminal}); END;
         CREATE TEMP TRIGGER IF NOT EXISTS run_ends_reply AFTER INSERT ON main.replies
           WHEN new.reopens = 1
           BEGIN INSERT OR REPLACE INTO run_ends VALUES (new.run_id, 0); END;"
    ))
}

/// What the write in `tx` ended and brought back, taken from the table
/// (so a later write starts empty): `(ended, brought_back)`.
pub(super) fn moved_in(tx: &Transaction<'_>) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let mut stmt = tx.prepare_cached("SELECT run_id, ended FROM temp.run_ends")?;
    let rows: Vec<(String, bool)> = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    if rows.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    tx.execute("DELETE FROM temp.run_ends", [])?;
    let (ended, back): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(_, ended)| *ended);
    Ok((ended.into_iter().map(|(id, _)| id).collect(), back.into_iter().map(|(id, _)| id).collect()))
}

/// Removes the end files of runs a write is bringing back, before it
/// commits: from then on no waiter can take them as ended. One that cannot
/// be removed fails the write: the run is not brought back while a file
/// says it ended.
pub(super) fn unwrite(home: &Home, ids: &[String]) -> Result<(), StoreError> {
    for id in ids {
        let path = ended_file(&home.run_dir(id));
        match std::fs::remove_file(&path) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::RunFolder { path, source })
            }
            _ => {}
        }
    }
    Ok(())
}

impl Store {
    /// Writes the end files of runs a write just ended, as the store has
    /// them under its write lock: an ended run a reply will reopen gets
    /// none. A file that cannot be written is left out (its waiters read
    /// the store when its shepherd exits).
    pub(super) fn write_ends(&mut self, ids: &[String]) -> Result<(), StoreError> {
        let doing = |source| StoreError::Sql { doing: "writing runs' ends", source };
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(doing)?;
        let written = ids.iter().try_for_each(|id| self.write_end(id));
        // Nothing was written to the database: this only lets the lock go.
        let ended = self.conn.execute_batch("COMMIT").map_err(doing);
        written.and(ended)
    }

    fn write_end(&self, id: &str) -> Result<(), StoreError> {
        let run = match self.run(id) {
            Ok(run) => run,
            Err(StoreError::UnknownRun(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if !run.status.is_terminal() || self.reopens_soon(id)? {
            return Ok(());
        }
        let file = ended_file(&self.home.run_dir(id));
        let bytes = serde_json::to_vec(&run).map_err(std::io::Error::from);
        if let Err(e) = bytes.and_then(|bytes| write_private(&file, &bytes)) {
            tracing::debug!(run = id, "cannot write its end beside it ({}): {e}", file.display());
        }
        Ok(())
    }
}

/// Writes `bytes` to `path` whole or not at all (a file beside it, moved
/// over it), readable by the user only. A missing folder is an error.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("json.tmp");
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(crate::home::FILE_MODE).open(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path)
}
