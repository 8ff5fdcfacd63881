//! Slots under `max_parallel`: who holds one, who waits for one, and every
//! transition that takes or gives one, each decided inside one IMMEDIATE
//! transaction so concurrent processes never overfill the slots.
//!
//! A slot counts work, not waiting: a `starting` or `running` run holds one
//! unless its agent is blocked in a wait (see `waits.rs`); a `waiting` run
//! holds none. A run whose wait is over (everything it waited on ended), and
//! a waiting run whose children ended and that wants its slot back for a
//! continuation turn, go before every queued run: they are `wanted`.

use std::sync::LazyLock;

use rusqlite::{params, Connection};

use super::{Doing, Store, StoreError};
use crate::run::RunStatus;
use crate::text::time;

/// How the slots are used right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// Runs holding a slot: starting or running, and not blocked waiting.
    pub working: usize,
    /// Runs waiting for a slot to start.
    pub queued: usize,
    /// Runs that want a slot back: to return from a wait that is over, or
    /// for a continuation turn.
    pub wanted: usize,
}

impl Slots {
    /// Slots free for queued runs, after those wanted back.
    pub fn free_for_queued(&self, max_parallel: usize) -> usize {
        max_parallel.saturating_sub(self.working + self.wanted)
    }
}

/// A wait row `w` of run row `r` that blocks the run's agent (see
/// `waits.rs`): the agent itself waits, or the tool call that runs the wait
/// is still open. A wait that does not block the agent frees no slot.
pub(super) const BLOCKING: &str = "(w.blocks = 2 OR (w.blocks = 1 AND r.tool_open = 1))";

/// A run row `r` whose agent is blocked in a wait: it holds no slot,
/// whatever it waits on.
static HAS_WAIT: LazyLock<String> =
    LazyLock::new(|| format!("EXISTS (SELECT 1 FROM waits w WHERE w.run_id = r.id AND {BLOCKING})"));

/// A run row `r` that waits on a run still active (else it wants its slot
/// back, to return from its wait).
static WAITS_ON_ACTIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "EXISTS (SELECT 1 FROM waits w JOIN wait_targets t ON t.wait_id = w.id JOIN runs a ON a.id = t.run_id
                 WHERE w.run_id = r.id AND {BLOCKING} AND a.status IN {})",
        RunStatus::sql_list(RunStatus::ACTIVE)
    )
});

/// A run row `r` with a child still active. A `waiting` run without one is
/// about to take its slot back for a continuation (or to end): it is wanted
/// from the moment its last child ends, not from when its shepherd notices.
static CHILDREN_ACTIVE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id AND c.status IN {})",
        RunStatus::sql_list(RunStatus::ACTIVE)
    )
});

static SLOTS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT
           count(*) FILTER (WHERE status IN {slotted} AND NOT {has_wait}),
           count(*) FILTER (WHERE status = '{queued}'),
           count(*) FILTER (WHERE (status = '{waiting}' AND (slot_wanted_at IS NOT NULL OR NOT {children_active}))
                               OR (status IN {slotted} AND {has_wait} AND NOT {waits_on_active})
                               OR (status = '{paused}' AND pause_requested = 0))
         FROM runs r WHERE status IN {active}",
        children_active = *CHILDREN_ACTIVE,
        has_wait = *HAS_WAIT,
        slotted = RunStatus::sql_list(RunStatus::SLOTTED),
        waits_on_active = *WAITS_ON_ACTIVE,
        queued = RunStatus::Queued,
        waiting = RunStatus::Waiting,
        paused = RunStatus::Paused,
        active = RunStatus::sql_list(RunStatus::ACTIVE),
    )
});

/// The slots as seen inside a transaction.
pub(super) fn slots_in(conn: &Connection) -> rusqlite::Result<Slots> {
    // Cached: every waiting process asks this at each heal.
    conn.prepare_cached(&SLOTS_SQL)?.query_row([], |r| {
        Ok(Slots {
            working: r.get::<_, i64>(0)? as usize,
            queued: r.get::<_, i64>(1)? as usize,
            wanted: r.get::<_, i64>(2)? as usize,
        })
    })
}

impl Store {
    /// How the slots are used right now.
    pub fn slots(&self) -> Result<Slots, StoreError> {
        slots_in(self.conn()).doing("counting slots")
    }

    /// Moves the oldest queued runs into the free slots (as `starting`) and
    /// returns their ids, oldest first. Whoever calls this must start their
    /// shepherds.
    pub fn promote_queued(&mut self, max_parallel: usize) -> Result<Vec<String>, StoreError> {
        // Most calls find nothing to do: decide that without the write lock.
        let seen = self.slots()?;
        if seen.queued == 0 || seen.free_for_queued(max_parallel) == 0 {
            return Ok(Vec::new());
        }
        let now = time::format(time::now());
        let (pid, start) = self.me();
        self.write("starting queued runs", |tx| {
            let slots = slots_in(tx)?;
            let free = slots.free_for_queued(max_parallel).min(slots.queued);
            if free == 0 {
                return Ok(Vec::new());
            }
            // A queued run of an agent whose usage limit stands waits for
            // it, rather than starting into the wall.
            let ids: Vec<String> = tx
                .prepare(&format!(
                    "SELECT id FROM runs WHERE status = '{}'
                       AND agent NOT IN (SELECT agent FROM usage_limits WHERE resets_at > ?2)
                     ORDER BY num LIMIT ?1",
                    RunStatus::Queued
                ))?
                .query_map(params![free as i64, now], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for id in &ids {
                tx.execute(
                    &format!(
                        "UPDATE runs SET status = '{}', promoted_at = ?2, promoter_pid = ?3, promoter_start = ?4
                         WHERE id = ?1 AND status = '{}'",
                        RunStatus::Starting,
                        RunStatus::Queued
                    ),
                    params![id, now, pid, start],
                )?;
            }
            Ok(ids)
        })
    }

    /// A waiting run asks for a slot back for its continuation turn, and
    /// gets it if one is free: returns true once the run is `running` again
    /// (holding the slot). Until then it is counted as wanting one, ahead of
    /// every queued run.
    pub fn take_slot_back(&mut self, id: &str, max_parallel: usize) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("taking a slot back", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET slot_wanted_at = coalesce(slot_wanted_at, ?2) WHERE id = ?1 AND status = '{}'",
                    RunStatus::Waiting
                ),
                params![id, now],
            )?;
            if slots_in(tx)?.working >= max_parallel {
                return Ok(false);
            }
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', slot_wanted_at = NULL WHERE id = ?1 AND status = '{}'",
                    RunStatus::Running,
                    RunStatus::Waiting
                ),
                [id],
            )?;
            Ok(n == 1)
        })
    }

    /// Asks run `id` to pause (`true`) or resume. Only a running run (or a
    /// paused one whose resume waits for a slot: the last word wins) can be
    /// paused and only a paused one resumed: false (nothing changed) else.
    /// Its shepherd acts on the request (see `shepherd`).
    pub fn request_pause(&mut self, id: &str, pause: bool) -> Result<bool, StoreError> {
        let (want, from) = if pause {
            (1, RunStatus::sql_list(&[RunStatus::Running, RunStatus::Paused]))
        } else {
            (0, RunStatus::sql_list(&[RunStatus::Paused, RunStatus::Running]))
        };
        self.write("asking a run to pause or resume", |tx| {
            let n = tx.execute(
                // A person's pause has no reason of Corral's; a resume keeps
                // the reason until the run is running again.
                &format!(
                    "UPDATE runs SET pause_requested = ?2,
                       pause_reason = CASE WHEN ?2 = 1 THEN NULL ELSE pause_reason END
                     WHERE id = ?1 AND status IN {from}"
                ),
                params![id, want],
            )?;
            Ok(n == 1)
        })
    }

    /// The shepherd froze run `id`: it is `paused` and holds no slot. Waits
    /// at most `patience` for the store's write lock: `None` if it was held
    /// all along, perhaps by a process of the run the freeze caught
    /// holding it (the caller thaws the run and tries again).
    pub fn mark_paused(&mut self, id: &str, patience: std::time::Duration) -> Result<Option<bool>, StoreError> {
        let now = time::format(time::now());
        self.write_within(patience, "recording a pause", |tx| {
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', paused_at = ?2 WHERE id = ?1 AND status = '{}' AND pause_requested = 1",
                    RunStatus::Paused,
                    RunStatus::Running
                ),
                params![id, now],
            )?;
            Ok(n == 1)
        })
    }

    /// A paused run asked to resume takes a slot back (before any queued
    /// run): true if it has one and is `running` again.
    pub fn resume_paused(&mut self, id: &str, max_parallel: usize) -> Result<bool, StoreError> {
        self.write("resuming a run", |tx| {
            if slots_in(tx)?.working >= max_parallel {
                return Ok(false);
            }
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', paused_at = NULL, pause_reason = NULL
                     WHERE id = ?1 AND status = '{}' AND pause_requested = 0",
                    RunStatus::Running,
                    RunStatus::Paused
                ),
                [id],
            )?;
            Ok(n == 1)
        })
    }

    /// True while someone asked run `id` to pause (and not since to resume).
    pub fn pause_requested(&self, id: &str) -> Result<bool, StoreError> {
        self.conn()
            .prepare_cached("SELECT pause_requested FROM runs WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |r| r.get::<_, i64>(0)))
            .map(|v| v != 0)
            .doing("reading a pause request")
    }
}
