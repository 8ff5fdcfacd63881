//! One rule, in one place: every process that waits on the store also heals
//! it.
//!
//! There is no daemon. `corral wait`, `wait_agents`, a waiting parent's
//! shepherd, `abort` and the app's watcher all call [`heal`] when they
//! first look at the store, at once when the kernel tells them a shepherd,
//! promoter or waiter exited (see `watch`), and every [`HEAL_EVERY`] as a
//! safety net while they block; a shepherd whose agent works heals every
//! [`HEAL_EVERY_AT_WORK`]. Healing marks runs whose shepherd died `lost`
//! (killing what is left of them), drops waits whose process died,
//! finishes merges whose process died mid-way (`merge_set`), and starts
//! queued runs into free slots. So after any process dies, every run
//! reaches its true state at once while any Corral process waits on the
//! store, within a second while a shepherd works, and at the next Corral
//! command or app start otherwise (a launch heals only when a process it
//! checks is gone or no slot is free: see [`due_before_launch`]). A process does not see its own commits through
//! `data_version`, so [`Healed::changed`] tells the caller to look again.

use std::time::Duration;

use crate::home::config::{Config, ConfigError};
use crate::home::Home;
use crate::store::{Store, StoreError};
use crate::upkeep::queue::{fire_queued_behind, start_queued, ShepherdCommand};
use crate::upkeep::reconcile::{reconcile, Reconciled};

/// How often a blocked process heals when nothing told it to: a safety net
/// (the exits that matter are told by pidfds; a promotion that never got
/// its shepherd is found by time).
pub const HEAL_EVERY: Duration = Duration::from_secs(5);

/// How often a blocked process heals where the kernel cannot tell it of
/// exits (no pidfds: Linux before 5.3): a shepherd killed with SIGKILL
/// commits nothing, yet its run must end.
pub const HEAL_EVERY_UNTOLD: Duration = Duration::from_millis(250);

/// How often a shepherd whose agent is working heals: less often, as there
/// are many of them, but still within a second.
pub const HEAL_EVERY_AT_WORK: Duration = Duration::from_millis(900);

/// What stops a process from healing the store.
#[derive(Debug, thiserror::Error)]
pub enum HealError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken (the queue cannot be sized).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What healing changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Healed {
    /// What reconciliation found.
    pub reconciled: Reconciled,
    /// Queued runs it started.
    pub started: Vec<String>,
}

impl Healed {
    /// True if this process committed anything (which its own watcher does
    /// not see).
    pub fn changed(&self) -> bool {
        self.reconciled.changed() || !self.started.is_empty()
    }
}

/// Reconciles, then starts queued runs into the free slots.
pub fn heal(store: &mut Store, shepherd: &ShepherdCommand) -> Result<Healed, HealError> {
    let reconciled = reconcile(store)?;
    let started = move_on(store, shepherd, &reconciled);
    // Last: this process, of a run found lost, stops with it once the
    // queue has moved on (or failed to).
    if let Some(own) = &reconciled.own_lost {
        crate::upkeep::reconcile::stop_as_lost(own);
    }
    Ok(Healed { reconciled, started: started? })
}

/// What a heal does after reconciling: merges cut short finished, queued
/// runs started into free slots, fires queued behind lost runs carried
/// out, the usage-limit waker kept. The runs it started.
fn move_on(store: &mut Store, shepherd: &ShepherdCommand, reconciled: &Reconciled) -> Result<Vec<String>, HealError> {
    crate::upkeep::merge_set::finish_cut_short(store)?;
    let config = Config::load(store.home())?;
    let started = start_queued(store, &config, shepherd)?;
    if !reconciled.lost.is_empty() {
        let lost: Vec<&str> = reconciled.lost.iter().map(|r| r.id.as_str()).collect();
        fire_queued_behind(store, &lost, shepherd)?;
    }
    // Queued runs behind a usage limit start at its reset, whoever looks.
    crate::upkeep::limit_waker::ensure(store)?;
    Ok(started)
}

/// Whether a launch must heal the store before it records its run: a
/// stale process seen. A launch does not heal on every start: every
/// command that shows or waits on runs heals, and what a heal would change
/// is found by the pids it checks, read here without writing anything. A
/// run whose shepherd (or whose promoter, before its shepherd) died must
/// end, and its survivors stop, before anything more is launched (one of
/// them may be this very launch, with no cgroup or id saying so); a wait
/// whose process died still frees its run's slot (the launch would take a
/// slot past `max_parallel`). A launch that finds no slot free heals
/// after its insert too (see `verbs::launch`).
pub fn due_before_launch(store: &Store) -> Result<bool, StoreError> {
    if store.blocked_processes()?.iter().any(|blocked| !blocked.process.is_alive()) {
        return Ok(true);
    }
    Ok(store.active_runs()?.iter().any(crate::upkeep::reconcile::needs_healing))
}

/// Opens the store of `home` and heals it: what the CLI, the MCP server and
/// the app do before anything else (a launch heals only when due: see
/// [`due_before_launch`]).
pub fn open_healed(home: &Home, shepherd: &ShepherdCommand) -> Result<Store, HealError> {
    let mut store = Store::open(home)?;
    heal(&mut store, shepherd)?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::{parse_preset, PresetSource};
    use crate::run::{RunStatus, StopReason};
    use crate::store::{NewRun, Outcome};

    /// Every statement this connection keeps prepared, with how many rows
    /// it stepped through in full-table scans since the last call.
    fn full_scan_steps(store: &Store) -> Vec<(String, i32)> {
        use rusqlite::ffi;
        let mut found = Vec::new();
        // SAFETY: walks the connection's own statements, which it keeps
        // alive (cached), on this thread; reads and resets counters only.
        unsafe {
            let db = store.conn().handle();
            let mut stmt = ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
            while !stmt.is_null() {
                let steps = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_FULLSCAN_STEP, 1);
                let sql = std::ffi::CStr::from_ptr(ffi::sqlite3_sql(stmt)).to_string_lossy().into_owned();
                found.push((sql, steps));
                stmt = ffi::sqlite3_next_stmt(db, stmt);
            }
        }
        found
    }

    #[test]
    fn a_heal_reads_the_active_runs_not_every_run_ever() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&Home::at(dir.path().to_path_buf())).unwrap();
        let text = "---\nname: w\ndescription: d\nagent: command\ncommand: [true]\n---\n";
        let preset = parse_preset(text, "w.md", PresetSource::Global).unwrap();
        let new = NewRun::plain(&preset, "t", "/");
        for _ in 0..500 {
            let run = store.insert_run(&new, 1_000_000, |_| Ok(())).unwrap();
            let outcome = Outcome {
                status: RunStatus::Completed,
                stop_reason: StopReason::ExitCode,
                exit_code: Some(0),
                exit_signal: None,
                error: None,
                report: Default::default(),
            };
            store.commit_outcome(&run.id, &outcome).unwrap();
            store.mark_exited_using(&run.id, Some(0), None, None).unwrap();
        }
        let shepherd = ShepherdCommand::current_exe().unwrap();
        heal(&mut store, &shepherd).unwrap();
        full_scan_steps(&store);
        heal(&mut store, &shepherd).unwrap();
        let scans: Vec<_> = full_scan_steps(&store).into_iter().filter(|(_, steps)| *steps >= 100).collect();
        assert!(scans.is_empty(), "a heal with 500 ended runs scanned them: {scans:#?}");
    }
}
