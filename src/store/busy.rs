//! How a connection waits for another's write lock.
//!
//! SQLite's own busy handler sleeps 1, 2, 5, 10 … up to 100 ms between
//! tries. With many writers at once — 100 shepherds committing the ends of
//! 100 runs that ended together — the lock sat free while they all slept,
//! and the outcomes were committed one every 100 ms, the CPU idle between
//! (measured: the 100th end committed 1.3 s after it happened). This
//! handler tries again after 50 µs, doubling to at most 2 ms, each pause
//! stretched by up to half again at random so that contenders spread out,
//! until the connection's patience runs out.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// How long a connection waits for another's write lock, unless a caller
/// says otherwise ([`with_patience`]).
pub(super) const PATIENCE: Duration = Duration::from_secs(30);

/// The first pause before trying again.
const FIRST_PAUSE: Duration = Duration::from_micros(50);
/// The longest pause between two tries.
const LONGEST_PAUSE: Duration = Duration::from_millis(2);

thread_local! {
    /// How long this thread's statements wait for a lock now.
    static PATIENCE_NOW: Cell<Duration> = const { Cell::new(PATIENCE) };
    /// When the current wait for a lock began.
    static WAITING_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Makes `conn` wait for locks as this module says.
pub(super) fn install(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.busy_handler(Some(on_busy))
}

/// Runs `f` with statements on this thread waiting at most `patience` for a
/// lock (then failing with SQLITE_BUSY).
pub(super) fn with_patience<T>(patience: Duration, f: impl FnOnce() -> T) -> T {
    let before = PATIENCE_NOW.replace(patience);
    let result = f();
    PATIENCE_NOW.set(before);
    result
}

/// SQLite's question, asked on the thread whose statement found the lock
/// taken: try again (after a pause)? `tries` counts from 0 for each wait.
fn on_busy(tries: i32) -> bool {
    let now = Instant::now();
    let since = match WAITING_SINCE.get() {
        Some(since) if tries > 0 => since,
        _ => {
            WAITING_SINCE.set(Some(now));
            now
        }
    };
    if now.duration_since(since) >= PATIENCE_NOW.get() {
        return false;
    }
    std::thread::sleep(pause(tries));
    true
}

/// The pause before try `tries + 1`.
fn pause(tries: i32) -> Duration {
    let base = FIRST_PAUSE.saturating_mul(1 << tries.clamp(0, 6)).min(LONGEST_PAUSE);
    base + base.mul_f64(fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_from_50_microseconds_to_2_milliseconds_and_a_half_again() {
        assert!(pause(0) >= FIRST_PAUSE && pause(0) <= FIRST_PAUSE * 3 / 2);
        for tries in [6, 7, 100, i32::MAX] {
            assert!(pause(tries) >= LONGEST_PAUSE && pause(tries) <= LONGEST_PAUSE * 3 / 2, "{tries}");
        }
    }

    #[test]
    fn a_writer_waits_for_a_lock_only_as_long_as_its_patience() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x); BEGIN IMMEDIATE").unwrap();
        let mut waiter = Connection::open(&path).unwrap();
        install(&mut waiter).unwrap();
        let started = Instant::now();
        let refused = with_patience(Duration::from_millis(30), || waiter.execute_batch("BEGIN IMMEDIATE"));
        assert!(refused.is_err(), "the lock is held");
        assert!(started.elapsed() >= Duration::from_millis(30), "it waited its patience");
        // Released by another thread while it waits: taken within a pause.
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            holder.execute_batch("COMMIT").unwrap();
        });
        waiter.execute_batch("BEGIN IMMEDIATE").unwrap();
        released.join().unwrap();
    }
}
