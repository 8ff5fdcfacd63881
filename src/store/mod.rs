//! The store: one SQLite database (WAL) shared by every Corral process, plus
//! each run's folder of files.
//!
//! Every process opens its own connection; there is no daemon. Writes run in
//! `BEGIN IMMEDIATE` transactions so concurrent writers queue on the busy
//! timeout instead of failing on lock upgrades. Readers learn of changes from
//! the database alone (see [`crate::watch`]).

mod budgets;
mod busy;
mod changes;
mod desk;
mod ends;
mod events;
mod fire_reservations;
mod fires;
mod health;
mod limits;
mod merge_sets;
mod migrate;
mod ports;
mod pull_requests;
mod pushes;
mod remote;
mod removal;
mod replies;
mod run_row;
mod runs;
mod sandbox_allows;
mod schedules;
mod search;
mod slots;
mod transitions;
mod trust;
mod waits;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::home::{Home, HomeError, FILE_MODE};

pub use changes::{Change, ChangesRead};
pub use desk::{Counts, DaySpend, Spend};
pub use ends::{ended_file, read_ended};
pub use events::{fold_usage, stored_bytes, Dropped, EventMark, ShownEvent, StoredEvent};
pub use fire_reservations::{FireAsk, Reserved, Short};
pub use fires::{FireLink, FireRow, FireRun};
pub use health::Health;
pub use limits::AgentLimit;
pub use merge_sets::{MergeSet, NewMergeSet};
pub use migrate::SCHEMA_VERSION;
pub use pull_requests::{PullRequestLook, PullRequestRow};
pub use remote::{HostHistory, HostState, HostTrouble};
pub use removal::Reclaimed;
pub use replies::{Reply, ReplyPlaced};
pub use runs::{NewRun, RunFilter};
pub use schedules::{PresetSchedulePut, ScheduleRow};
pub use search::SearchHit;
pub use slots::Slots;
pub use transitions::{AbortRequest, Committed, Outcome};
pub use waits::{BlockedProcess, WaitBlocks, WaitId};

/// How long a writer waits for another's transaction before giving up. Long:
/// fifty shepherds committing at once must queue, never fail.
const BUSY_TIMEOUT: Duration = busy::PATIENCE;

/// Space kept in reserve beside the database (`corral.db.reserve`), given
/// up only to record how runs ended when the disk is full: a run's outcome
/// must be written even when its transcript filled the disk.
const RESERVE_BYTES: usize = 256 << 10;

/// The longest WAL a process leaving an idle store leaves as it is (see
/// [`Store::checkpoint_idle`]): read back in about a tenth of a
/// millisecond by the next opener, where emptying it costs the next writer
/// two fsyncs.
pub const IDLE_WAL_KEPT: u64 = 512 << 10;

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Corral's folders could not be prepared.
    #[error(transparent)]
    Home(#[from] HomeError),
    /// The database file could not be opened.
    #[error("cannot open the database {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    /// The database was written by a newer Corral.
    #[error("the database {path} is from a newer Corral (schema {found}, this one knows up to {supported}): upgrade Corral, or point CORRAL_HOME elsewhere")]
    TooNew { path: PathBuf, found: i64, supported: i64 },
    /// The database file could not be created.
    #[error("cannot create the database {path}: {source}")]
    Create { path: PathBuf, source: std::io::Error },
    /// A migration failed.
    #[error("cannot upgrade the database {path} to schema {version}: {source}")]
    Migration { path: PathBuf, version: i64, source: rusqlite::Error },
    /// A query failed.
    #[error("database error while {doing}: {source}")]
    Sql { doing: &'static str, source: rusqlite::Error },
    /// A new run's folder could not be readied; the run was not recorded.
    #[error("cannot prepare the run's folder {path}: {source}; check that the disk has room and the folder is yours")]
    RunFolder { path: PathBuf, source: std::io::Error },
    /// No run has this id.
    #[error("no run '{0}': see 'corral ls --all'")]
    UnknownRun(String),
    /// No block of that many ports is free.
    #[error(
        "no block of {count} free ports between 20000 and 29999 (active runs, ended runs whose teardown has not run yet, and what listens on this machine hold them): ask for fewer with `ports:`, wait for runs to end, or discard (or rm) ended runs whose teardown has not run"
    )]
    NoFreePorts { count: u16 },
    /// A launch under a key another launch under the same key made first
    /// (a launcher gone cold whose template spare took it too): its run.
    #[error("run {0} was made by this launch already")]
    RequestMade(String),
    /// A prefix matches several runs.
    #[error("'{prefix}' matches several runs ({matches}): give more of the id")]
    AmbiguousRun { prefix: String, matches: String },
    /// Waiting for the store's changes failed (`poll(2)` on its files).
    #[error("cannot wait for the store's changes: {0}")]
    Watch(String),
    /// A stored value could not be read back.
    #[error("run '{id}' has an unreadable {field}: {reason}")]
    Corrupt { id: String, field: &'static str, reason: String },
    /// No schedule has this name.
    #[error("no schedule '{0}': see 'corral schedule ls'")]
    UnknownSchedule(String),
    /// A schedule of this name exists already.
    #[error(
        "a schedule named '{0}' exists already: pick another name, or remove it first with 'corral schedule rm {0}'"
    )]
    ScheduleExists(String),
}

/// Attaches what the store was doing to a rusqlite error.
pub(crate) trait Doing<T> {
    fn doing(self, doing: &'static str) -> Result<T, StoreError>;
}

impl<T> Doing<T> for Result<T, rusqlite::Error> {
    fn doing(self, doing: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sql { doing, source })
    }
}

/// A connection to Corral's database.
pub struct Store {
    conn: Connection,
    home: Home,
    /// This process, recorded as the promoter of the runs it gives a slot
    /// (runtime state, not persisted as such).
    me: Option<crate::process::ProcessId>,
    /// The bell rung after each commit (see `process::Bell`).
    bell: PathBuf,
    /// The runs and replies this connection's write changed (see `ends`),
    /// noted from its first write on, so a process that only reads never
    /// pays for it (runtime state).
    touched: Option<std::sync::Arc<std::sync::Mutex<ends::Touched>>>,
}

impl Store {
    /// Opens (creating and migrating if needed) the store of `home`.
    pub fn open(home: &Home) -> Result<Store, StoreError> {
        home.ensure()?;
        let path = home.database();
        create_private_file(&path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open_err = |source| StoreError::Open { path: path.clone(), source };
        let new = std::fs::metadata(&path).is_ok_and(|m| m.len() == 0);
        // Another process making the same new store (a launcher and the
        // copy it forked, a host's first commands) holds it for a moment
        // in ways the busy handler does not wait for (setting WAL mode):
        // try again, as long as a write would wait.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        let conn = loop {
            let opened =
                Connection::open_with_flags(&path, flags).and_then(|mut conn| configure(&mut conn, new).map(|()| conn));
            match opened {
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                opened => break opened.map_err(open_err)?,
            }
        };
        let me = crate::process::ProcessId::of(std::process::id() as i32);
        let bell = home.bell();
        // Without a bell (a file system without FIFOs) waiters are told by
        // inotify instead.
        if let Err(e) = crate::process::Bell::ensure(&bell) {
            tracing::debug!("no bell at {}: {e}", bell.display());
        }
        let mut store = Store { conn, home: home.clone(), me, bell, touched: None };
        migrate::apply(&mut store.conn, &path)?;
        store.keep_reserve();
        Ok(store)
    }

    /// This process, as the promoter of the runs it starts.
    pub(crate) fn me(&self) -> (Option<i32>, Option<i64>) {
        (self.me.map(|p| p.pid), self.me.map(|p| p.start as i64))
    }

    /// The folders this store lives in.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// A counter that changes whenever another connection commits: cheap to
    /// poll (no disk read when nothing changed).
    pub fn data_version(&self) -> Result<i64, StoreError> {
        // Cached: every follower asks this 20 times a second.
        self.conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .doing("reading data_version")
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction.
    pub(crate) fn write<T>(
        &mut self,
        doing: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let touched = match &self.touched {
            Some(touched) => touched.clone(),
            None => {
                let touched = std::sync::Arc::default();
                ends::arm(&mut self.conn, std::sync::Arc::clone(&touched)).doing("noting the runs a write ends")?;
                self.touched.insert(touched).clone()
            }
        };
        let noted = || touched.lock().unwrap_or_else(|e| e.into_inner());
        noted().clear();
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).doing(doing)?;
        let value = f(&tx).doing(doing)?;
        let (ended, brought_back) = ends::moved_in(&tx, &self.home, noted().take()).doing(doing)?;
        ends::unwrite(&self.home, &brought_back)?;
        tx.commit().doing(doing)?;
        // Committed: what ended is written beside each run before anyone
        // is told, so a woken waiter reads that file, not the store.
        if !ended.is_empty() {
            if let Err(e) = self.write_ends(&ended) {
                tracing::warn!("runs {ended:?} ended; cannot write their ends beside them: {e}");
            }
        }
        // Committed, so visible: every process waiting on the store looks.
        crate::process::Bell::ring(&self.bell);
        Ok(value)
    }

    /// Runs `f` like [`Store::write`], but waits at most `patience` for
    /// another connection's write lock: `None` if it was still held then.
    /// For a writer that must not wait on a process it may have frozen.
    pub(crate) fn write_within<T>(
        &mut self,
        patience: Duration,
        doing: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, StoreError> {
        let result = busy::with_patience(patience, || self.write(doing, f));
        match result {
            Err(StoreError::Sql { source, .. }) if is_busy(&source) => Ok(None),
            other => other.map(Some),
        }
    }

    /// Runs the reads of `f` in one read transaction: one snapshot of the
    /// store, and the WAL's read lock taken and dropped once rather than
    /// per statement (each take walks every other connection's lock: a
    /// wait on 100 runs read them with 12,000 `fcntl` calls in half a
    /// second while their shepherds ended). Not for use inside a write.
    pub fn reading<T, E: From<StoreError>>(&self, f: impl FnOnce(&Store) -> Result<T, E>) -> Result<T, E> {
        self.conn.execute_batch("BEGIN DEFERRED").doing("beginning a read")?;
        let result = f(self);
        // Ending a transaction that only read loses nothing, whichever way;
        // when the reads failed, theirs is the error said.
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self.conn.execute_batch(end).doing("ending a read");
        match (result, ended) {
            (Ok(_), Err(e)) => Err(e.into()),
            (result, _) => result,
        }
    }

    /// Runs `f` like [`Store::write`]; if the disk is full, gives up the
    /// reserve and tries once more. For the writes that record how a run
    /// ended, which must not be lost to a full disk.
    pub(crate) fn write_reserving<T>(
        &mut self,
        doing: &'static str,
        f: impl Fn(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        match self.write(doing, &f) {
            Err(StoreError::Sql { source, .. }) if is_disk_full(&source) && self.release_reserve() => {
                self.write(doing, f)
            }
            other => other,
        }
    }

    fn reserve_file(&self) -> PathBuf {
        self.home.data_dir().join("corral.db.reserve")
    }

    /// Creates the reserve if it is missing and the disk has room (never an
    /// error: a full disk is exactly when it cannot be made).
    fn keep_reserve(&self) {
        let path = self.reserve_file();
        if path.exists() {
            return;
        }
        let made = crate::home::create_private(&path).and_then(|mut f| {
            std::io::Write::write_all(&mut f, &vec![0u8; RESERVE_BYTES])?;
            f.sync_all()
        });
        if made.is_err() {
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Gives up the reserve; true if there was one.
    fn release_reserve(&self) -> bool {
        std::fs::remove_file(self.reserve_file()).is_ok()
    }

    /// Caps this connection's page cache, for long-lived small processes
    /// (a shepherd writes far more than it reads).
    pub fn limit_cache(&self, kib: u32) -> Result<(), StoreError> {
        self.conn.pragma_update(None, "cache_size", -(kib as i64)).doing("setting cache_size")
    }

    /// Copies what the WAL holds into the database and empties it
    /// (`wal_checkpoint(TRUNCATE)`) once it holds more than
    /// [`IDLE_WAL_KEPT`], without waiting for anyone: where another process
    /// reads or writes, it is left as it is. For a process with nothing
    /// left to do: the first process to open a store no one holds open
    /// reads the whole WAL to rebuild its index (1 ms here for the 4 MB a
    /// WAL grows to between automatic checkpoints), and a checkpoint alone
    /// does not shorten it (the rebuilt index forgets the checkpoint, so
    /// the next writer appends to it). A short WAL is left: the writer
    /// that starts an emptied one writes and syncs its header, and syncs
    /// the folder (two fsyncs, 1 ms of the next launch here), where reading
    /// back a short one costs a few pages.
    ///
    /// An emptied WAL is started again here, with one page: the writer
    /// that starts one writes and syncs its header and syncs the folder
    /// (two fsyncs, 0.5 ms measured), which this process, its work done,
    /// pays rather than the next launch.
    pub fn checkpoint_idle(&self) -> Result<(), StoreError> {
        let wal = self.home.database().with_extension("db-wal");
        if std::fs::metadata(&wal).map_or(0, |m| m.len()) <= IDLE_WAL_KEPT {
            return Ok(());
        }
        busy::with_patience(Duration::ZERO, || {
            self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
            // Page 1 written again as it is: the WAL's first frame.
            let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            self.conn.pragma_update(None, "user_version", version)
        })
        .doing("checkpointing the WAL")
    }

    /// Frees this connection's cached pages (`PRAGMA shrink_memory`) and
    /// its prepared statements (each is prepared again at its next use).
    pub fn release_memory(&self) -> Result<(), StoreError> {
        self.conn.flush_prepared_statement_cache();
        self.conn.execute_batch("PRAGMA shrink_memory").doing("releasing the page cache")
    }

    /// The connection, for reads.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// True if SQLite says another connection holds the lock.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(err, _) if err.code == rusqlite::ErrorCode::DatabaseBusy)
}

/// True if SQLite says the disk is full.
fn is_disk_full(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(err, _) if err.code == rusqlite::ErrorCode::DiskFull)
}

/// Per-connection settings, in one place.
fn configure(conn: &mut Connection, new: bool) -> rusqlite::Result<()> {
    busy::install(conn)?;
    if new {
        // Only takes before the first table: removed runs' pages can then
        // be given back to the disk (see `Store::reclaim`).
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Most Corral processes live a few milliseconds; the last to close the
    // database would checkpoint the WAL (three fsyncs) and delete it, and
    // the next would make it again. Checkpoints happen as the WAL grows
    // (every 1,000 pages), by whichever process commits then.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    // Under constant writes from many shepherds the WAL is never idle, so
    // it is never reset; this truncates it after each checkpoint instead.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // A plan never depends on a bound value (the store keeps no statistics
    // for one to matter): otherwise SQLite prepares a cached statement
    // again whenever a parameter it peeked at is bound anew, and a run's
    // children were listed by parsing their query again every time (44% of
    // a wait's work on 100 runs).
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// Creates the database file as 0600 before SQLite does, so it (and the WAL
/// and shared-memory files SQLite gives the same mode) is private.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)
        .map(drop)
        .map_err(|source| StoreError::Create { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod opening_tests {
    use super::*;

    /// Processes that open a store no one made yet, at the same instant (a
    /// launcher and the copy it forks, a host's first commands), all get
    /// it: "database is locked" while another makes it is waited out.
    #[test]
    fn many_opening_a_new_store_at_once_all_get_it() {
        for _ in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let home = Home::at(dir.path());
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    let (home, barrier) = (home.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Store::open(&home).map(drop).map_err(|e| e.to_string())
                    })
                })
                .collect();
            for opener in openers {
                opener.join().unwrap().unwrap();
            }
        }
    }

    /// A process leaving an idle store leaves a long WAL empty, so the
    /// next process to open it has little to read back, and a short one as
    /// it is, so the next writer appends to it; one that another process is
    /// reading is left as it is, at once.
    #[test]
    fn an_idle_store_is_left_with_a_short_wal_and_a_busy_one_alone() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let store = Store::open(&home).unwrap();
        let big = format!("INSERT INTO scratch VALUES (zeroblob({}))", IDLE_WAL_KEPT + 1);
        let wal = home.database().with_extension("db-wal");
        assert!(wal.metadata().unwrap().len() > IDLE_WAL_KEPT, "a new store's WAL holds its making");
        // Emptied, and started again with one page (a header, one frame).
        let started = 32 + 24 + 4096;
        store.checkpoint_idle().unwrap();
        assert_eq!(wal.metadata().unwrap().len(), started, "a long WAL is emptied and started again");
        store.conn.execute_batch("CREATE TABLE scratch(x); INSERT INTO scratch VALUES (zeroblob(1000))").unwrap();
        let short = wal.metadata().unwrap().len();
        assert!(short > 0 && short <= IDLE_WAL_KEPT, "{short}");
        store.checkpoint_idle().unwrap();
        assert_eq!(wal.metadata().unwrap().len(), short, "a short WAL is left for the next writer");
        store.conn.execute_batch(&big).unwrap();
        store.checkpoint_idle().unwrap();
        assert_eq!(wal.metadata().unwrap().len(), started, "grown long, it is emptied");

        let reader = Store::open(&home).unwrap();
        reader.conn.execute_batch("BEGIN; SELECT count(*) FROM scratch;").unwrap();
        store.conn.execute_batch(&big).unwrap();
        store.checkpoint_idle().unwrap();
        assert!(wal.metadata().unwrap().len() > IDLE_WAL_KEPT, "a WAL another process reads is left as it is");
        let seen: i64 = reader.conn.query_row("SELECT count(*) FROM scratch", [], |r| r.get(0)).unwrap();
        assert_eq!(seen, 2, "the reader's snapshot stands");
        reader.conn.execute_batch("COMMIT").unwrap();
        let seen: i64 = reader.conn.query_row("SELECT count(*) FROM scratch", [], |r| r.get(0)).unwrap();
        assert_eq!(seen, 3, "nothing was lost");
    }
}
