//! The `waits` and `wait_targets` tables: processes of a run blocked on
//! other runs (`corral wait`, `wait_agents`, `launch --wait` inside a run).
//!
//! While a wait that blocks the run's agent is registered, the waiting run
//! holds no slot (see `slots.rs`): a parent blocked on its children must not
//! hold the slot they need. A wait that does not block the agent (a
//! `corral wait &` while the agent works on) frees nothing ([`WaitBlocks`]). When everything it waits on has ended, the run wants its slot back
//! and the call returns once it has it ([`Store::end_wait`]), before any
//! queued run; a wait that times out is removed at once. A wait whose
//! process died is removed by reconciliation.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::process::ProcessId;
use crate::run::RunStatus;
use crate::text::time;

/// A registered wait, by its row id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitId(pub i64);

/// A registered wait and the process blocked in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedProcess {
    /// The wait.
    pub wait: WaitId,
    /// The process that waits.
    pub process: ProcessId,
}

/// Whether a wait blocks its run's agent, and so frees the run's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitBlocks {
    /// It does not (a wait in the background while the agent works on).
    No,
    /// While the agent's tool call that runs it is open.
    WhileToolOpen,
    /// The agent itself waits on it.
    Always,
}

impl WaitBlocks {
    fn as_sql(self) -> i64 {
        match self {
            WaitBlocks::No => 0,
            WaitBlocks::WhileToolOpen => 1,
            WaitBlocks::Always => 2,
        }
    }
}

impl Store {
    /// Records that `process`, belonging to run `run_id`, waits until every
    /// run of `targets` has ended, blocking the run's agent as `blocks` says.
    pub fn register_wait(
        &mut self,
        run_id: &str,
        process: ProcessId,
        targets: &[String],
        blocks: WaitBlocks,
    ) -> Result<WaitId, StoreError> {
        let now = time::format(time::now());
        self.write("recording a wait", |tx| {
            tx.execute(
                "INSERT INTO waits (run_id, pid, start, since, blocks) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![run_id, process.pid, process.start as i64, now, blocks.as_sql()],
            )?;
            let id = tx.last_insert_rowid();
            for target in targets {
                tx.execute(
                    "INSERT OR IGNORE INTO wait_targets (wait_id, run_id) VALUES (?1, ?2)",
                    params![id, target],
                )?;
            }
            Ok(WaitId(id))
        })
    }

    /// The waiter looked again: its wait now blocks the agent as `blocks`
    /// says.
    pub fn set_wait_blocks(&mut self, wait: WaitId, blocks: WaitBlocks) -> Result<(), StoreError> {
        self.write("updating a wait", |tx| {
            tx.execute("UPDATE waits SET blocks = ?2 WHERE id = ?1", params![wait.0, blocks.as_sql()]).map(drop)
        })
    }

    /// The pids of run `run_id`'s processes registered as waiting.
    pub fn waiting_pids(&self, run_id: &str) -> Result<Vec<i32>, StoreError> {
        let mut stmt = self.conn().prepare_cached("SELECT pid FROM waits WHERE run_id = ?1").doing("listing waits")?;
        let rows = stmt.query_map([run_id], |r| r.get(0)).doing("listing waits")?;
        rows.collect::<Result<_, _>>().doing("listing waits")
    }

    /// The shepherd says whether run `id`'s agent is in a tool call.
    pub fn set_tool_open(&mut self, id: &str, open: bool) -> Result<(), StoreError> {
        self.write("recording a tool call", |tx| {
            tx.execute("UPDATE runs SET tool_open = ?2 WHERE id = ?1", params![id, open]).map(drop)
        })
    }

    /// The wait is over (its call returned, or its process died).
    pub fn remove_wait(&mut self, wait: WaitId) -> Result<(), StoreError> {
        self.write("removing a wait", |tx| delete_wait(tx, wait))
    }

    /// Every registered wait with its process, for reconciliation.
    pub fn blocked_processes(&self) -> Result<Vec<BlockedProcess>, StoreError> {
        let mut stmt = self.conn().prepare_cached("SELECT id, pid, start FROM waits").doing("listing waits")?;
        let rows = stmt
            .query_map([], |r| {
                Ok(BlockedProcess {
                    wait: WaitId(r.get(0)?),
                    process: ProcessId { pid: r.get(1)?, start: r.get::<_, i64>(2)? as u64 },
                })
            })
            .doing("listing waits")?;
        rows.collect::<Result<_, _>>().doing("listing waits")
    }

    /// The wait is over: the run takes its slot back and works again if a
    /// slot is free (it goes before every queued run), and the wait is
    /// removed. Returns false, changing nothing, while every slot is taken.
    /// A run that no longer holds slots (it ended meanwhile) just drops it.
    pub fn end_wait(&mut self, wait: WaitId, max_parallel: usize) -> Result<bool, StoreError> {
        self.write("ending a wait", |tx| {
            let slotted: bool = tx.query_row(
                &format!(
                    "SELECT count(*) > 0 FROM waits w JOIN runs r ON r.id = w.run_id
                     WHERE w.id = ?1 AND r.status IN {} AND {}",
                    RunStatus::sql_list(RunStatus::SLOTTED),
                    super::slots::BLOCKING
                ),
                [wait.0],
                |r| r.get(0),
            )?;
            if slotted && super::slots::slots_in(tx)?.working >= max_parallel {
                return Ok(false);
            }
            delete_wait(tx, wait)?;
            Ok(true)
        })
    }
}

fn delete_wait(tx: &rusqlite::Transaction<'_>, wait: WaitId) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM wait_targets WHERE wait_id = ?1", [wait.0])?;
    tx.execute("DELETE FROM waits WHERE id = ?1", [wait.0])?;
    Ok(())
}

impl Store {
    /// The processes whose death leaves the store untrue until it is healed:
    /// the shepherds of active runs, whoever promoted a run whose shepherd
    /// has not claimed it yet, the processes blocked in a wait, and those
    /// making a merge (`merge_set`). A follower is told of their exits
    /// (pidfds) instead of looking for them.
    pub fn processes_to_follow(&self) -> Result<Vec<ProcessId>, StoreError> {
        let active = RunStatus::sql_list(RunStatus::ACTIVE);
        let sql = format!(
            "SELECT shepherd_pid, shepherd_start FROM runs WHERE status IN {active} AND shepherd_pid IS NOT NULL
             UNION SELECT promoter_pid, promoter_start FROM runs
               WHERE status IN {active} AND shepherd_pid IS NULL AND promoter_pid IS NOT NULL
             UNION SELECT pid, start FROM waits
             UNION SELECT pid, pid_start FROM merge_sets"
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing("finding the processes to follow")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)))
            .doing("finding the processes to follow")?;
        let mut processes = Vec::new();
        for row in rows {
            if let (Some(pid), Some(start)) = row.doing("finding the processes to follow")? {
                processes.push(ProcessId { pid: pid as i32, start: start as u64 });
            }
        }
        Ok(processes)
    }

    /// True if anything in the store could become untrue without a commit:
    /// a run not ended (its shepherd may die, a queued one awaits a slot)
    /// or a merge being made. When nothing is, a watcher needs no heal by
    /// time: it sleeps until something commits.
    pub fn anything_at_work(&self) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE status IN {}) OR EXISTS (SELECT 1 FROM merge_sets)",
            RunStatus::sql_list(RunStatus::ACTIVE)
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing("looking for work going on")?;
        stmt.query_row([], |r| r.get(0)).doing("looking for work going on")
    }
}
