//! The `fires`, `fire_runs` and `schedule_items` tables: every fire of each
//! schedule with its outcome, the runs it launched, and the precheck items
//! worked on (see `crate::schedule`).
//!
//! A fire is claimed by inserting its slot (schedule, due time) under a
//! unique key, in the same transaction that reads where the schedule
//! stands: of any number of firers racing for a slot, exactly one launches
//! it.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::process::ProcessId;
use crate::run::RunStatus;

/// One fire of a schedule and what came of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FireRow {
    pub id: i64,
    pub schedule: String,
    /// The slot: when it was due.
    pub due_at: String,
    pub fired_at: String,
    /// How late it fired, in milliseconds (a machine that slept, no firer
    /// running).
    pub late_ms: i64,
    /// Who fired it: `tray`, `schedule run`, `timer`, `run-now`, `fire`.
    pub firer: String,
    /// `firing`, `launched`, `queued`, `skipped_paused`, `skipped_overlap`,
    /// `skipped_precheck`, `skipped_nothing_new`, `skipped_limit`, `skipped_budget`, `failed`.
    pub outcome: String,
    pub detail: Option<String>,
    /// The runs it launched, with their status now.
    pub runs: Vec<FireRun>,
}

/// A run a fire launched.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FireRun {
    pub id: String,
    /// The precheck line it works on (`each:` mode).
    pub item: Option<String>,
    /// Its status now; `None` once it was removed (`rm`, `prune`, `keep`).
    pub status: Option<RunStatus>,
}

/// Fires kept per schedule, the latest.
const FIRE_HISTORY: i64 = 1000;

const FIRE_COLUMNS: &str = "id, schedule, due_at, fired_at, late_ms, firer, outcome, detail";

fn fire_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FireRow> {
    Ok(FireRow {
        id: r.get(0)?,
        schedule: r.get(1)?,
        due_at: r.get(2)?,
        fired_at: r.get(3)?,
        late_ms: r.get(4)?,
        firer: r.get(5)?,
        outcome: r.get(6)?,
        detail: r.get(7)?,
        runs: Vec::new(),
    })
}

/// A schedule's latest fire whose slot is not after now: a fire taken
/// while the clock read ahead (days ahead, then set right) records a slot
/// in the future, which must not make every real slot before it "nothing
/// due".
const LAST_FIRE_DUE: &str =
    "SELECT due_at, due_local FROM fires WHERE schedule = ?1 AND due_at <= ?2 ORDER BY due_at DESC LIMIT 1";

impl Store {
    /// The slot of the schedule's latest fire, if it fired: its due time,
    /// and its wall-clock time where it fired.
    pub fn last_fire_due(&self, name: &str, now: &str) -> Result<Option<(String, Option<String>)>, StoreError> {
        self.conn()
            .prepare_cached(LAST_FIRE_DUE)
            .and_then(|mut stmt| stmt.query_row([name, now], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .doing("reading a schedule's last fire")
    }

    /// Claims a slot of schedule `name` for `firer` at `now`: the fire, or
    /// `None` if another firer took that slot. `due` is asked in the same
    /// transaction, with the schedule's latest fire (its due time and
    /// wall-clock time), so the slot is chosen against what the store
    /// holds, not a stale read; it returns the slot (due time, how late,
    /// wall-clock time), or `None` when nothing is due.
    pub fn claim_fire(
        &mut self,
        name: &str,
        firer: &str,
        now: &str,
        due: impl FnOnce(Option<(&str, Option<&str>)>) -> Option<(String, i64, Option<String>)>,
    ) -> Result<Option<FireRow>, StoreError> {
        let (pid, start) = self.me();
        let id = self.write("claiming a schedule's fire", |tx| {
            let last: Option<(String, Option<String>)> =
                tx.query_row(LAST_FIRE_DUE, [name, now], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
            let Some((due_at, late_ms, due_local)) =
                due(last.as_ref().map(|(at, local)| (at.as_str(), local.as_deref())))
            else {
                return Ok(None);
            };
            let inserted = tx.execute(
                "INSERT INTO fires (schedule, due_at, due_local, fired_at, late_ms, firer, outcome, firer_pid, firer_start)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'firing', ?7, ?8) ON CONFLICT (schedule, due_at) DO NOTHING",
                params![name, due_at, due_local, now, late_ms, firer, pid, start],
            )?;
            Ok((inserted == 1).then(|| tx.last_insert_rowid()))
        })?;
        id.map(|id| self.fire(id)).transpose()
    }

    /// Takes a fire that waited for the one before it (`overlap: queue`)
    /// for this firer at `now`: true if this process took it (no other fire
    /// of its schedule is being carried out: that one decides first).
    pub fn take_queued_fire(&mut self, id: i64, firer: &str, now: &str) -> Result<bool, StoreError> {
        let (pid, start) = self.me();
        let taken = self.write("taking a queued fire", |tx| {
            // It fires now: its runs count in the hour they start in.
            tx.execute(
                "UPDATE fires SET outcome = 'firing', firer = ?2, firer_pid = ?3, firer_start = ?4, fired_at = ?5
                 WHERE id = ?1 AND outcome = 'queued' AND NOT EXISTS
                   (SELECT 1 FROM fires other WHERE other.schedule = fires.schedule AND other.outcome = 'firing')",
                params![id, firer, pid, start, now],
            )
        })?;
        Ok(taken == 1)
    }

    /// Records what fire `id` came to: its outcome, in words (its runs are
    /// recorded with them, as they are launched: see [`FireLink`]).
    pub fn finish_fire(&mut self, id: i64, outcome: &str, detail: Option<&str>) -> Result<(), StoreError> {
        self.write("recording a fire's outcome", |tx| {
            tx.execute("UPDATE fires SET outcome = ?2, detail = ?3 WHERE id = ?1", params![id, outcome, detail])?;
            let schedule: String = tx.query_row("SELECT schedule FROM fires WHERE id = ?1", [id], |r| r.get(0))?;
            // A schedule every second, paused for a week, keeps its latest
            // fires, not 600,000 (the items it worked on are kept apart).
            tx.execute(
                "DELETE FROM fires WHERE schedule = ?1 AND id NOT IN
                   (SELECT id FROM fires WHERE schedule = ?1 ORDER BY due_at DESC LIMIT ?2)",
                params![schedule, FIRE_HISTORY],
            )?;
            Ok(())
        })
    }

    /// The fires being carried out now, each with its firer's process
    /// (`None` where it was not known).
    pub fn firing_fires(&self) -> Result<Vec<(FireRow, Option<ProcessId>)>, StoreError> {
        let sql = format!("SELECT {FIRE_COLUMNS}, firer_pid, firer_start FROM fires WHERE outcome = 'firing'");
        let mut stmt = self.conn().prepare(&sql).doing("reading fires being carried out")?;
        let rows = stmt
            .query_map([], |r| {
                let process = match (r.get::<_, Option<i32>>(8)?, r.get::<_, Option<i64>>(9)?) {
                    (Some(pid), Some(start)) => Some(ProcessId { pid, start: start as u64 }),
                    _ => None,
                };
                Ok((fire_from_row(r)?, process))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .doing("reading fires being carried out")?;
        let mut fires = Vec::with_capacity(rows.len());
        for (mut fire, process) in rows {
            fire.runs = self.fire_runs(fire.id)?;
            fires.push((fire, process));
        }
        Ok(fires)
    }

    /// Records the precheck fire `id` runs: its process (the leader of its
    /// process group) and its cgroup, if one was made.
    pub fn record_precheck(
        &mut self,
        id: i64,
        process: Option<ProcessId>,
        cgroup: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write("recording a fire's precheck", |tx| {
            tx.execute(
                "UPDATE fires SET precheck_pid = ?2, precheck_start = ?3, precheck_cgroup = ?4 WHERE id = ?1",
                params![id, process.map(|p| p.pid), process.map(|p| p.start as i64), cgroup],
            )
        })
        .map(drop)
    }

    /// The precheck fire `id` ran or runs: its process and its cgroup.
    pub fn fire_precheck(&self, id: i64) -> Result<(Option<ProcessId>, Option<String>), StoreError> {
        self.conn()
            .query_row("SELECT precheck_pid, precheck_start, precheck_cgroup FROM fires WHERE id = ?1", [id], |r| {
                let process = match (r.get::<_, Option<i32>>(0)?, r.get::<_, Option<i64>>(1)?) {
                    (Some(pid), Some(start)) => Some(ProcessId { pid, start: start as u64 }),
                    _ => None,
                };
                Ok((process, r.get(2)?))
            })
            .doing("reading a fire's precheck")
    }

    /// Settles fire `id` that its firer left `firing`: true if it still was
    /// (no other process settled it, and its firer did not finish it).
    pub fn settle_fire(&mut self, id: i64, outcome: &str, detail: &str) -> Result<bool, StoreError> {
        let settled = self.write("settling a fire its firer left", |tx| {
            tx.execute(
                "UPDATE fires SET outcome = ?2, detail = ?3 WHERE id = ?1 AND outcome = 'firing'",
                params![id, outcome, detail],
            )
        })?;
        Ok(settled == 1)
    }

    /// Fire `id`, with its runs.
    pub fn fire(&self, id: i64) -> Result<FireRow, StoreError> {
        let sql = format!("SELECT {FIRE_COLUMNS} FROM fires WHERE id = ?1");
        let mut fire = self.conn().query_row(&sql, [id], fire_from_row).doing("reading a fire")?;
        fire.runs = self.fire_runs(id)?;
        Ok(fire)
    }

    /// The latest `limit` fires of schedule `name`, newest first.
    pub fn fires(&self, name: &str, limit: usize) -> Result<Vec<FireRow>, StoreError> {
        let sql = format!("SELECT {FIRE_COLUMNS} FROM fires WHERE schedule = ?1 ORDER BY due_at DESC LIMIT ?2");
        let mut stmt = self.conn().prepare_cached(&sql).doing("reading a schedule's fires")?;
        let rows = stmt.query_map(params![name, limit as i64], fire_from_row).doing("reading a schedule's fires")?;
        let mut fires: Vec<FireRow> = rows.collect::<Result<_, _>>().doing("reading a schedule's fires")?;
        for fire in &mut fires {
            fire.runs = self.fire_runs(fire.id)?;
        }
        Ok(fires)
    }

    /// The fires of schedule `name` waiting for the one before them to end.
    pub fn queued_fires(&self, name: &str) -> Result<Vec<FireRow>, StoreError> {
        let sql =
            format!("SELECT {FIRE_COLUMNS} FROM fires WHERE schedule = ?1 AND outcome = 'queued' ORDER BY due_at");
        let mut stmt = self.conn().prepare_cached(&sql).doing("reading queued fires")?;
        let rows = stmt.query_map([name], fire_from_row).doing("reading queued fires")?;
        rows.collect::<Result<_, _>>().doing("reading queued fires")
    }

    fn fire_runs(&self, fire: i64) -> Result<Vec<FireRun>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT f.run_id, f.item, coalesce(r.status, there.status) FROM fire_runs f
                 LEFT JOIN runs r ON r.id = f.run_id LEFT JOIN remote_runs there ON there.id = f.run_id
                 WHERE f.fire = ?1 ORDER BY f.rowid",
            )
            .doing("reading a fire's runs")?;
        let rows = stmt
            .query_map([fire], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?, r.get(2)?)))
            .doing("reading a fire's runs")?;
        let mut runs = Vec::new();
        for row in rows {
            let (id, item, status): (String, Option<String>, Option<String>) = row.doing("reading a fire's runs")?;
            let status = status.and_then(|s| s.parse().ok());
            runs.push(FireRun { id, item, status });
        }
        Ok(runs)
    }

    /// The runs of schedule `name`'s fires that are still active.
    pub fn schedule_active_runs(&self, name: &str) -> Result<Vec<String>, StoreError> {
        // Here, or on a host as its mirror last saw it.
        let sql = format!(
            "SELECT r.id FROM fire_runs f JOIN fires ON fires.id = f.fire JOIN runs r ON r.id = f.run_id
             WHERE fires.schedule = ?1 AND r.status IN {active}
             UNION ALL
             SELECT r.id FROM fire_runs f JOIN fires ON fires.id = f.fire JOIN remote_runs r ON r.id = f.run_id
             WHERE fires.schedule = ?1 AND r.status IN {active}",
            active = RunStatus::active_sql()
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing("reading a schedule's active runs")?;
        let rows = stmt.query_map([name], |r| r.get(0)).doing("reading a schedule's active runs")?;
        rows.collect::<Result<_, _>>().doing("reading a schedule's active runs")
    }

    /// The fires of schedule `name` before fire `id` that are still being
    /// carried out (in their precheck, or launching): a fire decides after
    /// them, never beside them.
    pub fn earlier_firing(&self, name: &str, id: i64) -> Result<Vec<i64>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT id FROM fires WHERE schedule = ?1 AND outcome = 'firing' AND id < ?2 ORDER BY id")
            .doing("reading a schedule's fires being carried out")?;
        let rows =
            stmt.query_map(params![name, id], |r| r.get(0)).doing("reading a schedule's fires being carried out")?;
        rows.collect::<Result<_, _>>().doing("reading a schedule's fires being carried out")
    }

    /// Claims for fire `id` the first `cap` of `candidates` that no fire of
    /// its schedule worked on or holds, in one transaction: of two fires
    /// listing the same items at once, each item goes to one. Returns the
    /// items claimed, and how many more were free beyond `cap`.
    pub fn claim_items(
        &mut self,
        id: i64,
        candidates: &[String],
        cap: usize,
    ) -> Result<(Vec<String>, usize), StoreError> {
        self.write("claiming a fire's items", |tx| {
            let mut claimed = Vec::new();
            let mut beyond = 0;
            for item in candidates {
                let free: bool = tx.query_row(
                    "SELECT NOT EXISTS (SELECT 1 FROM schedule_items i JOIN fires f ON f.schedule = i.schedule
                     WHERE f.id = ?1 AND i.item = ?2)",
                    params![id, item],
                    |r| r.get(0),
                )?;
                if !free {
                    continue;
                }
                if claimed.len() == cap {
                    beyond += 1;
                    continue;
                }
                tx.execute(
                    "INSERT INTO schedule_items (schedule, item, fire) SELECT schedule, ?2, id FROM fires WHERE id = ?1",
                    params![id, item],
                )?;
                claimed.push(item.clone());
            }
            Ok((claimed, beyond))
        })
    }

    /// Gives back the items fire `id` claimed but launched no run for (its
    /// launch failed, or its firer died first): a later fire works on them.
    pub fn release_unlaunched_items(&mut self, id: i64) -> Result<(), StoreError> {
        self.write("giving back a fire's items", |tx| {
            tx.execute(
                "DELETE FROM schedule_items WHERE fire = ?1 AND item NOT IN
                   (SELECT item FROM fire_runs WHERE fire = ?1 AND item IS NOT NULL)",
                [id],
            )
        })
        .map(drop)
    }

    /// Gives back `items` that fire `id` claimed and will not work on (its
    /// share of the hour's runs is smaller): a later fire works on them.
    pub fn release_items(&mut self, id: i64, items: &[String]) -> Result<(), StoreError> {
        if items.is_empty() {
            return Ok(());
        }
        self.write("giving back a fire's items", |tx| {
            let mut stmt = tx.prepare_cached("DELETE FROM schedule_items WHERE fire = ?1 AND item = ?2")?;
            for item in items {
                stmt.execute(params![id, item])?;
            }
            Ok(())
        })
    }

    /// The schedule whose fire launched run `run_id`, if one did.
    pub fn schedule_of_run(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT fires.schedule FROM fire_runs f JOIN fires ON fires.id = f.fire WHERE f.run_id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([run_id], |r| r.get(0)).optional())
            .doing("reading the schedule of a run")
    }

    /// The precheck items schedule `name` worked on, or its fires hold.
    pub fn schedule_items(&self, name: &str) -> Result<std::collections::HashSet<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT item FROM schedule_items WHERE schedule = ?1")
            .doing("reading a schedule's items")?;
        let rows = stmt.query_map([name], |r| r.get(0)).doing("reading a schedule's items")?;
        rows.collect::<Result<_, _>>().doing("reading a schedule's items")
    }

    /// The ended runs of schedule `name`'s fires, newest fire first.
    pub fn schedule_ended_runs(&self, name: &str) -> Result<Vec<(String, String)>, StoreError> {
        let sql = format!(
            "SELECT r.id, coalesce(r.exited_at, r.completed_at, fires.fired_at) FROM fire_runs f
             JOIN fires ON fires.id = f.fire JOIN runs r ON r.id = f.run_id
             WHERE fires.schedule = ?1 AND r.status IN {} ORDER BY fires.due_at DESC, f.rowid DESC",
            RunStatus::terminal_sql()
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing("reading a schedule's ended runs")?;
        let rows = stmt.query_map([name], |r| Ok((r.get(0)?, r.get(1)?))).doing("reading a schedule's ended runs")?;
        rows.collect::<Result<_, _>>().doing("reading a schedule's ended runs")
    }
}

/// The fire a new run is launched by, and the precheck line it works on.
#[derive(Debug, Clone, Copy)]
pub struct FireLink<'a> {
    /// The fire's id.
    pub fire: i64,
    /// The precheck's output line (`{item}`), in `each` mode.
    pub item: Option<&'a str>,
}

/// Records run `run_id` as launched by `link`'s fire, and its item as worked
/// on, inside the caller's transaction: the one that writes the run (or,
/// for a host's run, its mirror).
pub(super) fn record_fire_run(
    tx: &rusqlite::Transaction<'_>,
    link: &FireLink<'_>,
    run_id: &str,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO fire_runs (fire, run_id, item) VALUES (?1, ?2, ?3)",
        params![link.fire, run_id, link.item],
    )?;
    // What it spends is the fire's, and so is what its children spend.
    tx.execute(
        "UPDATE spend SET fire = ?1, schedule = f.schedule, fired_at = f.fired_at
         FROM (SELECT schedule, fired_at FROM fires WHERE id = ?1) f WHERE run_id = ?2",
        params![link.fire, run_id],
    )?;
    if let Some(item) = link.item {
        tx.execute(
            "INSERT INTO schedule_items (schedule, item, fire)
             SELECT schedule, ?2, id FROM fires WHERE id = ?1
             ON CONFLICT (schedule, item) DO NOTHING",
            params![link.fire, item],
        )?;
    }
    Ok(())
}
