//! The `schedules`, `fires`, `fire_runs` and `schedule_items` tables: the
//! schedules, and every fire of each with its outcome (see `crate::schedule`).
//!
//! A fire is claimed by inserting its slot (schedule, due time) under a
//! unique key, in the same transaction that reads where the schedule
//! stands: of any number of firers racing for a slot, exactly one launches
//! it. The settings are kept as the schedule module's JSON; this file
//! knows rows, not their meaning.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::process::ProcessId;
use crate::run::RunStatus;
use crate::time;

/// What a fire asks of its schedule's bounds (see [`Store::reserve_fire`]).
#[derive(Debug, Clone)]
pub struct FireAsk<'a> {
    /// The runs it would launch.
    pub wanted: usize,
    /// `max_runs_per_hour`, if set.
    pub max_per_hour: Option<u32>,
    /// An hour before now.
    pub hour_ago: &'a str,
    /// `budget_per_day`, if set.
    pub daily: Option<crate::budget::Budget>,
    /// The start of today.
    pub day_since: &'a str,
}

/// What a fire was given of its schedule's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    /// How many runs it may launch.
    pub runs: usize,
    /// The budget each of them is given (with `budget_per_day`).
    pub each: Option<crate::budget::Budget>,
    /// Which bound left nothing, when one did.
    pub short: Option<Short>,
}

/// The bound that left a fire nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// `max_runs_per_hour`: the hour's runs are launched or held.
    Hour,
    /// `budget_per_day`: the day's budget is spent or held.
    Budget,
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    pub name: String,
    /// The settings, as `schedule::Settings` JSON.
    pub settings: String,
    pub created_at: String,
    /// Paused since then (no fire launches anything), and why.
    pub paused_at: Option<String>,
    pub paused_why: Option<String>,
    /// The preset file whose `schedule:` it is (`None`: added by hand).
    pub source: Option<String>,
}

/// What putting a preset's schedule into the store did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresetSchedulePut {
    /// It was not there: added.
    Added,
    /// Its settings changed: updated (its history kept).
    Changed,
    /// As stored.
    Same,
    /// A schedule of that name is someone else's (added by hand, or
    /// another preset's): left alone.
    Taken,
}

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

fn schedule_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScheduleRow> {
    Ok(ScheduleRow {
        name: r.get(0)?,
        settings: r.get(1)?,
        created_at: r.get(2)?,
        paused_at: r.get(3)?,
        paused_why: r.get(4)?,
        source: r.get(5)?,
    })
}

/// A schedule's latest fire whose slot is not after now: a fire taken
/// while the clock read ahead (days ahead, then set right) records a slot
/// in the future, which must not make every real slot before it "nothing
/// due".
const LAST_FIRE_DUE: &str =
    "SELECT due_at, due_local FROM fires WHERE schedule = ?1 AND due_at <= ?2 ORDER BY due_at DESC LIMIT 1";

impl Store {
    /// Records a new schedule, made at `now`; refused if the name is taken.
    pub fn add_schedule(&mut self, name: &str, settings: &str, now: &str) -> Result<ScheduleRow, StoreError> {
        let added = self.write("adding a schedule", |tx| {
            tx.execute(
                "INSERT INTO schedules (name, settings, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING",
                params![name, settings, now],
            )
        })?;
        if added == 0 {
            return Err(StoreError::ScheduleExists(name.to_string()));
        }
        self.schedule(name)
    }

    /// The schedule called `name`.
    pub fn schedule(&self, name: &str) -> Result<ScheduleRow, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT name, settings, created_at, paused_at, paused_why, source FROM schedules WHERE name = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([name], schedule_from_row).optional())
            .doing("reading a schedule")?
            .ok_or_else(|| StoreError::UnknownSchedule(name.to_string()))
    }

    /// Every schedule, by name.
    pub fn schedules(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT name, settings, created_at, paused_at, paused_why, source FROM schedules ORDER BY name",
            )
            .doing("listing schedules")?;
        let rows = stmt.query_map([], schedule_from_row).doing("listing schedules")?;
        rows.collect::<Result<_, _>>().doing("listing schedules")
    }

    /// Puts the schedule a preset file (`source`) defines: added, updated
    /// if its settings changed, or left alone if the name is another's.
    pub fn put_preset_schedule(
        &mut self,
        name: &str,
        settings: &str,
        source: &str,
        now: &str,
    ) -> Result<PresetSchedulePut, StoreError> {
        self.write("keeping a preset's schedule", |tx| {
            let held: Option<(String, Option<String>)> = tx
                .query_row("SELECT settings, source FROM schedules WHERE name = ?1", [name], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            Ok(match held {
                None => {
                    tx.execute(
                        "INSERT INTO schedules (name, settings, created_at, source) VALUES (?1, ?2, ?3, ?4)",
                        params![name, settings, now, source],
                    )?;
                    PresetSchedulePut::Added
                }
                Some((_, held_by)) if held_by.as_deref() != Some(source) => PresetSchedulePut::Taken,
                Some((held, _)) if held == settings => PresetSchedulePut::Same,
                Some(_) => {
                    tx.execute("UPDATE schedules SET settings = ?2 WHERE name = ?1", params![name, settings])?;
                    PresetSchedulePut::Changed
                }
            })
        })
    }

    /// Removes the schedules of presets that no longer define one (their
    /// file gone, or its `schedule:`): every preset schedule not in `keep`,
    /// but those of the files in `unreadable` (a file that cannot be read
    /// now says nothing of its schedule).
    pub fn remove_preset_schedules_except(
        &mut self,
        keep: &[String],
        unreadable: &[&str],
    ) -> Result<Vec<String>, StoreError> {
        let held: Vec<(String, String)> = {
            let mut stmt = self
                .conn()
                .prepare_cached("SELECT name, source FROM schedules WHERE source IS NOT NULL")
                .doing("listing presets' schedules")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).doing("listing presets' schedules")?;
            rows.collect::<Result<_, _>>().doing("listing presets' schedules")?
        };
        let gone: Vec<String> = held
            .into_iter()
            .filter(|(name, source)| !keep.contains(name) && !unreadable.contains(&source.as_str()))
            .map(|(name, _)| name)
            .collect();
        if !gone.is_empty() {
            self.write("removing presets' schedules", |tx| {
                for name in &gone {
                    tx.execute("DELETE FROM schedules WHERE name = ?1 AND source IS NOT NULL", [name])?;
                }
                Ok(())
            })?;
        }
        Ok(gone)
    }

    /// Removes a schedule and its fires' history (its runs stay).
    pub fn remove_schedule(&mut self, name: &str) -> Result<(), StoreError> {
        let removed =
            self.write("removing a schedule", |tx| tx.execute("DELETE FROM schedules WHERE name = ?1", [name]))?;
        if removed == 0 {
            return Err(StoreError::UnknownSchedule(name.to_string()));
        }
        Ok(())
    }

    /// Pauses (`Some(why)`) or resumes (`None`) a schedule.
    pub fn set_schedule_paused(&mut self, name: &str, why: Option<&str>) -> Result<ScheduleRow, StoreError> {
        let now = time::format(time::now());
        let changed = self.write("pausing a schedule", |tx| match why {
            Some(why) => tx.execute(
                "UPDATE schedules SET paused_at = coalesce(paused_at, ?2), paused_why = ?3 WHERE name = ?1",
                params![name, now, why],
            ),
            None => tx.execute(
                "UPDATE schedules SET paused_at = NULL, paused_why = NULL, resumed_at = ?2 WHERE name = ?1",
                params![name, now],
            ),
        })?;
        if changed == 0 {
            return Err(StoreError::UnknownSchedule(name.to_string()));
        }
        self.schedule(name)
    }

    /// When schedule `name` was last resumed, if it was.
    pub fn schedule_resumed_at(&self, name: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT resumed_at FROM schedules WHERE name = ?1")
            .and_then(|mut stmt| stmt.query_row([name], |r| r.get::<_, Option<String>>(0)).optional())
            .doing("reading when a schedule was resumed")
            .map(Option::flatten)
    }

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

    /// How many runs schedule `name`'s fires launched since `since`.
    pub fn schedule_runs_since(&self, name: &str, since: &str) -> Result<usize, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT count(*) FROM fire_runs f JOIN fires ON fires.id = f.fire
                 WHERE fires.schedule = ?1 AND fires.fired_at >= ?2",
            )
            .and_then(|mut stmt| stmt.query_row(params![name, since], |r| r.get::<_, i64>(0)))
            .map(|n| n as usize)
            .doing("counting a schedule's runs")
    }

    /// What the runs of schedule `name`'s fires since `since` spent.
    pub fn schedule_spent_since(&self, name: &str, since: &str) -> Result<crate::budget::Spent, StoreError> {
        spent_since(self.conn(), name, since).doing("adding up what a schedule's runs spent")
    }

    /// Takes for fire `id` what its schedule's bounds leave, in one write
    /// with what its schedule's other fires being carried out hold: up to
    /// `ask.wanted` runs within `max_runs_per_hour`, and an equal share of
    /// the day's budget left for each. What it takes is held until the
    /// fire is carried out, so a fire beside it never takes the same room.
    pub fn reserve_fire(&mut self, id: i64, ask: &FireAsk<'_>) -> Result<Reserved, StoreError> {
        self.write("taking a fire's share of its schedule's bounds", |tx| {
            let name: String = tx.query_row("SELECT schedule FROM fires WHERE id = ?1", [id], |r| r.get(0))?;
            // What the others being carried out hold and have not launched yet.
            let (mut pending, mut pending_usd, mut pending_tokens) = (0usize, 0.0, 0u64);
            let mut stmt = tx.prepare_cached(
                "SELECT reserved_runs - (SELECT count(*) FROM fire_runs WHERE fire = fires.id),
                   reserved_usd_each, reserved_tokens_each
                 FROM fires WHERE schedule = ?1 AND outcome = 'firing' AND id <> ?2",
            )?;
            let rows = stmt.query_map(params![name, id], |r| {
                Ok((r.get::<_, i64>(0)?.max(0) as usize, r.get::<_, Option<f64>>(1)?, r.get::<_, Option<i64>>(2)?))
            })?;
            for row in rows {
                let (runs, usd, tokens) = row?;
                pending += runs;
                pending_usd += usd.unwrap_or(0.0) * runs as f64;
                pending_tokens += tokens.unwrap_or(0).max(0) as u64 * runs as u64;
            }
            let mut runs = ask.wanted;
            if let Some(max) = ask.max_per_hour {
                let launched: i64 = tx.query_row(
                    "SELECT count(*) FROM fire_runs f JOIN fires ON fires.id = f.fire
                     WHERE fires.schedule = ?1 AND fires.fired_at >= ?2",
                    params![name, ask.hour_ago],
                    |r| r.get(0),
                )?;
                let room = (max as usize).saturating_sub(launched.max(0) as usize + pending);
                if room == 0 {
                    return Ok(Reserved { runs: 0, each: None, short: Some(Short::Hour) });
                }
                runs = runs.min(room);
            }
            let each = match &ask.daily {
                None => None,
                Some(daily) => {
                    let spent = spent_since(tx, &name, ask.day_since)?;
                    // What the schedule's runs still going may yet spend.
                    let (held_usd, held_tokens): (f64, i64) = tx.query_row(
                        &format!(
                            "SELECT coalesce(sum(max(r.budget_usd - coalesce(r.cost_usd, 0.0), 0.0)), 0.0),
                               coalesce(sum(max(r.budget_tokens - (r.input_tokens + r.output_tokens
                                 + r.cache_read_tokens + r.cache_write_tokens), 0)), 0)
                             FROM fire_runs f JOIN fires ON fires.id = f.fire JOIN runs r ON r.id = f.run_id
                             WHERE fires.schedule = ?1 AND r.status IN {}",
                            RunStatus::active_sql()
                        ),
                        [&name],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )?;
                    let taken_tokens =
                        spent.tokens.saturating_add(held_tokens.max(0) as u64).saturating_add(pending_tokens);
                    let Some(left) = daily.left_after(spent.usd + held_usd + pending_usd, taken_tokens) else {
                        return Ok(Reserved { runs: 0, each: None, short: Some(Short::Budget) });
                    };
                    // No more runs than what is left pays one message each
                    // (what one of its runs' messages cost before, at the
                    // most; a token each at the least): a share smaller
                    // than one message would be spent past before any run
                    // is paused.
                    // Before any of its runs said what a message costs, a
                    // message is taken to cost [`FIRST_MESSAGE_USD`] and
                    // [`FIRST_MESSAGE_TOKENS`].
                    let (usd_each, tokens_each) = one_message(tx, &name)?;
                    let mut payable = runs;
                    if let Some(usd) = left.usd {
                        let one = usd_each.filter(|u| *u > 0.0).unwrap_or(FIRST_MESSAGE_USD);
                        payable = payable.min((usd / one).floor() as usize);
                    }
                    if let Some(tokens) = left.tokens {
                        let one = tokens_each.filter(|t| *t > 0).unwrap_or(FIRST_MESSAGE_TOKENS);
                        payable = payable.min((tokens / one) as usize);
                    }
                    if payable == 0 {
                        return Ok(Reserved { runs: 0, each: None, short: Some(Short::Budget) });
                    }
                    runs = payable;
                    let n = runs.max(1);
                    Some(crate::budget::Budget {
                        usd: left.usd.map(|u| u / n as f64),
                        tokens: left.tokens.map(|t| t / n as u64),
                    })
                }
            };
            tx.execute(
                "UPDATE fires SET reserved_runs = ?2, reserved_usd_each = ?3, reserved_tokens_each = ?4 WHERE id = ?1",
                params![id, runs as i64, each.and_then(|b| b.usd), each.and_then(|b| b.tokens).map(|t| t as i64)],
            )?;
            Ok(Reserved { runs, each, short: None })
        })
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

/// What one message is taken to cost before a schedule's runs said: an
/// agent's message with a working context, on a frontier model.
const FIRST_MESSAGE_USD: f64 = 0.25;
/// The same in tokens.
const FIRST_MESSAGE_TOKENS: u64 = 20_000;

/// What one message of schedule `name`'s runs cost at the most, in
/// dollars and in tokens, from its latest runs that reported any (their
/// spend over their messages that spent); `None` before any did.
fn one_message(conn: &rusqlite::Connection, name: &str) -> rusqlite::Result<(Option<f64>, Option<u64>)> {
    conn.prepare_cached(
        "SELECT max(usd / n), max(tokens / n) FROM (
           SELECT s.usd, s.tokens,
             (SELECT count(*) FROM events e WHERE e.run_id = s.run_id AND e.kind = 'usage'
                AND e.text NOT LIKE '0 in / 0 out%') AS n
           FROM spend s
           WHERE s.schedule = ?1 AND (s.usd > 0 OR s.tokens > 0) ORDER BY s.fired_at DESC LIMIT 20)
         WHERE n > 0",
    )?
    .query_row([name], |r| Ok((r.get::<_, Option<f64>>(0)?, r.get::<_, Option<i64>>(1)?.map(|t| t.max(0) as u64))))
}

/// What every run schedule `name`'s fires since `since` caused spent (its
/// own runs and what they launched, here and on hosts, removed since or
/// not: the `spend` ledger), read on `conn` (the store's, or a
/// transaction's).
fn spent_since(conn: &rusqlite::Connection, name: &str, since: &str) -> rusqlite::Result<crate::budget::Spent> {
    conn.prepare_cached(
        "SELECT coalesce(sum(usd), 0.0), coalesce(max(estimated), 0), coalesce(sum(tokens), 0)
         FROM spend WHERE schedule = ?1 AND fired_at >= ?2",
    )?
    .query_row(params![name, since], |r| {
        Ok(crate::budget::Spent {
            usd: r.get(0)?,
            estimated: r.get::<_, i64>(1)? != 0,
            tokens: r.get::<_, i64>(2)?.max(0) as u64,
            unpriced_runs: 0,
        })
    })
}
