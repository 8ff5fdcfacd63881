//! The `schedules` table: the schedules, as the schedule module's JSON
//! settings, who paused each and why (see `crate::schedule`). Their fires
//! are `fires.rs`'s. This file knows rows, not their meaning.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::text::time;

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
}
