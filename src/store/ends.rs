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
//! there, not in each transition: SQLite's update hook on this connection
//! notes which runs a write ends and which it brings back (a status leaving
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

use rusqlite::OptionalExtension;

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

/// The rows of `runs` and `replies` this connection's write changed, noted
/// by SQLite's update hook as each changes (temporary triggers cost every
/// writing process a schema of its own and 50 KB of heap; the hook is a
/// function call).
#[derive(Debug, Default)]
pub(super) struct Touched {
    runs: Vec<i64>,
    replies: Vec<i64>,
}

impl Touched {
    /// Forgets what was noted: at a write's start (a write that rolled
    /// back, or a change made outside [`Store::write`], says nothing).
    pub(super) fn clear(&mut self) {
        self.runs.clear();
        self.replies.clear();
    }

    /// What was noted, taken so the next write starts empty.
    pub(super) fn take(&mut self) -> Touched {
        std::mem::take(self)
    }
}

/// Sets the hook on `conn` that notes into `touched` each run updated and
/// each reply said.
pub(super) fn arm(
    conn: &mut rusqlite::Connection,
    touched: std::sync::Arc<std::sync::Mutex<Touched>>,
) -> rusqlite::Result<()> {
    use rusqlite::hooks::Action;
    // A writer's statement journals go to the temporary database: kept
    // in memory, 8 pages of cache, rather than a temporary file with a
    // pager of its own (100 KB more of every shepherd's heap, measured).
    conn.execute_batch("PRAGMA temp_store = MEMORY; PRAGMA temp.cache_size = 8")?;
    conn.update_hook(Some(move |action, db: &str, table: &str, rowid| {
        if db != "main" {
            return;
        }
        // A poisoned lock only means a panic mid-note: the notes stand.
        let mut touched = touched.lock().unwrap_or_else(|e| e.into_inner());
        let rows = match (action, table) {
            (Action::SQLITE_UPDATE, "runs") => &mut touched.runs,
            (Action::SQLITE_INSERT, "replies") => &mut touched.replies,
            _ => return,
        };
        if !rows.contains(&rowid) {
            rows.push(rowid);
        }
    }))
}

/// What the write in `tx` ended and brought back: `(ended, brought_back)`.
/// A run counts as ended by it when it is in an end state and its file
/// does not say so already (so a later write to an ended run, marking it
/// seen, costs no file); brought back when it is not in an end state, or a
/// reply said in the write will reopen it.
pub(super) fn moved_in(
    tx: &rusqlite::Transaction<'_>,
    home: &Home,
    touched: Touched,
) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let (mut ended, mut back) = (Vec::new(), Vec::new());
    if !touched.runs.is_empty() {
        let mut stmt = tx.prepare_cached("SELECT id, status FROM runs WHERE num = ?1")?;
        for rowid in touched.runs {
            let Some((id, status)) =
                stmt.query_row([rowid], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).optional()?
            else {
                continue;
            };
            let terminal = status.parse::<RunStatus>().is_ok_and(RunStatus::is_terminal);
            if !terminal {
                back.push(id);
            } else if read_ended(&home.run_dir(&id)).is_none_or(|run| run.status.as_str() != status) {
                ended.push(id);
            }
        }
    }
    if !touched.replies.is_empty() {
        let mut stmt = tx.prepare_cached("SELECT run_id FROM replies WHERE id = ?1 AND reopens = 1")?;
        for rowid in touched.replies {
            if let Some(id) = stmt.query_row([rowid], |r| r.get::<_, String>(0)).optional()? {
                ended.retain(|e| *e != id);
                back.push(id);
            }
        }
    }
    Ok((ended, back))
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
    let tmp = path.with_extension("json.tmp");
    let mut file = crate::home::create_private(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_status(store: &mut Store, status: &str) {
        store
            .write("setting a status", |tx| tx.execute("UPDATE runs SET status = ?1 WHERE id = 'r1'", [status]))
            .unwrap();
    }

    fn said(store: &Store) -> Option<String> {
        read_ended(&store.home.run_dir("r1")).map(|run| run.status.as_str().to_string())
    }

    /// The file says the run's end as each write leaves it: written when
    /// it ends, again when it ends otherwise, removed when it is brought
    /// back or a reply will reopen it, untouched by a write that rolled
    /// back or changed something else.
    #[test]
    fn the_end_file_follows_every_write_into_and_out_of_an_end() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let mut store = Store::open(&home).unwrap();
        store
            .write("adding a run", |tx| {
                tx.execute(
                    "INSERT INTO runs (id, preset, preset_path, preset_json, agent, task, cwd, status, created_at)
                     VALUES ('r1', 'p', '/p.md', '{}', 'command', 't', '/', 'running', '2026-11-27T00:00:00Z')",
                    [],
                )
            })
            .unwrap();
        std::fs::create_dir_all(home.run_dir("r1")).unwrap();
        assert_eq!(said(&store), None);

        set_status(&mut store, "completed");
        assert_eq!(said(&store).as_deref(), Some("completed"));
        let file = ended_file(&home.run_dir("r1"));
        let written = std::fs::metadata(&file).unwrap().modified().unwrap();
        store.write("marking it seen", |tx| tx.execute("UPDATE runs SET seen_at = 'now' WHERE id = 'r1'", [])).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), written, "nothing about its end changed");

        set_status(&mut store, "lost");
        assert_eq!(said(&store).as_deref(), Some("lost"), "an end changed to another is said anew");

        let failed: Result<(), _> = store.write("a write that fails", |tx| {
            tx.execute("UPDATE runs SET status = 'running' WHERE id = 'r1'", [])?;
            Err(rusqlite::Error::QueryReturnedNoRows)
        });
        assert!(failed.is_err());
        assert_eq!(said(&store).as_deref(), Some("lost"), "a write rolled back moved nothing");

        store
            .write("a reply", |tx| {
                tx.execute(
                    "INSERT INTO replies (run_id, text, created_at, reopens) VALUES ('r1', 'more', 'now', 1)",
                    [],
                )
            })
            .unwrap();
        assert_eq!(said(&store), None, "a reply that reopens it takes its end away");

        set_status(&mut store, "running");
        set_status(&mut store, "failed");
        store.write("the reply delivered", |tx| tx.execute("UPDATE replies SET delivered_at = 'now'", [])).unwrap();
        set_status(&mut store, "running");
        assert_eq!(said(&store), None, "brought back");
    }
}
