//! Schedules written in presets: a global preset (Corral's presets folder,
//! `~/.claude/agents`, `~/.pi/agent/subagents`) with `schedule:` is a
//! schedule of its own name, kept in step with the file — added when the
//! key appears, changed with it (its history kept), removed with it.
//! Project presets are not read for schedules: a cloned repository does
//! not get to schedule work on this machine (add one by hand, with
//! `corral schedule add`, after reading it).

use std::path::PathBuf;

use super::{Keep, Overlap, Precheck, Settings, When, PRECHECK_TIMEOUT_MAX};
use crate::preset::{self, Preset, PresetSchedule, Roots};
use crate::store::{PresetSchedulePut, Store, StoreError};
use crate::text::time;

/// Brings the schedules of global presets in step with their files;
/// returns what could not be taken, in words (a broken `schedule:`, a name
/// another schedule has). A preset whose `schedule:` cannot be read keeps
/// the schedule it had.
pub fn sync(store: &mut Store) -> Result<Vec<String>, StoreError> {
    let roots = Roots::new(store.home(), None);
    let set = preset::discover(&roots);
    let mut problems = Vec::new();
    let mut keep = Vec::new();
    for entry in &set.presets {
        let preset = &entry.preset;
        let Some(written) = &preset.schedule else { continue };
        keep.push(preset.name.clone());
        let settings = match settings_of(preset, written, roots.user_home.as_ref()) {
            Ok(settings) => settings,
            Err(why) => {
                problems.push(format!("preset {} ({}): `schedule:` {why}", preset.name, preset.path));
                continue;
            }
        };
        let json = match serde_json::to_string(&settings) {
            Ok(json) => json,
            Err(e) => {
                problems.push(format!("preset {}: cannot keep its schedule: {e}", preset.name));
                continue;
            }
        };
        let now = time::format(super::now());
        match store.put_preset_schedule(&preset.name, &json, &preset.path, &now)? {
            PresetSchedulePut::Added => {
                // Its runs start with the environment of whoever keeps the
                // schedules (the tray, `schedule run`) when it appeared.
                let dir = store.home().schedule_dir(&preset.name);
                let saved = crate::home::ensure_private_dir(&dir)
                    .map_err(std::io::Error::other)
                    .and_then(|()| crate::run::env::save(&dir, super::without_run_marks(std::env::vars_os())));
                if let Err(e) = saved {
                    problems.push(format!(
                        "schedule {}: cannot keep its environment in {}: {e}",
                        preset.name,
                        dir.display()
                    ));
                }
            }
            PresetSchedulePut::Taken => problems.push(format!(
                "preset {} ({}) has `schedule:`, but a schedule named {} exists already: rename one",
                preset.name, preset.path, preset.name
            )),
            PresetSchedulePut::Changed | PresetSchedulePut::Same => {}
        }
    }
    // A preset that cannot be read now (a YAML slip, a key mistyped) keeps
    // its schedule, fires and items, as it keeps a `schedule:` it cannot
    // read: fixed, the schedule goes on where it was.
    let broken: Vec<&str> = set.problems.iter().map(|p| p.path.as_str()).collect();
    store.remove_preset_schedules_except(&keep, &broken)?;
    Ok(problems)
}

/// The settings a preset's `schedule:` says.
fn settings_of(preset: &Preset, written: &PresetSchedule, user_home: Option<&PathBuf>) -> Result<Settings, String> {
    let when = When::choose(
        written.cron.as_deref(),
        written.every.as_deref(),
        written.at.as_deref(),
        ["`cron:`", "`every:`", "`at:`"],
    )
    .map_err(|e| e.to_string())?;
    let home = user_home.cloned().unwrap_or_else(|| PathBuf::from("/"));
    let cwd = match written.cwd.as_deref() {
        None => home,
        Some("~") => home,
        Some(dir) => match dir.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(dir),
        },
    };
    if !cwd.is_absolute() {
        return Err(format!("`cwd: {}` must be a full path (or start with ~/)", cwd.display()));
    }
    let overlap = match written.overlap.as_deref() {
        None => Overlap::Skip,
        Some(word) => serde_json::from_value(serde_json::Value::String(word.trim().to_string()))
            .map_err(|_| format!("`overlap: {word}` is not one of skip, queue, allow"))?,
    };
    let precheck = match &written.precheck {
        None => None,
        Some(command) if command.is_empty() => return Err("`precheck:` is empty".to_string()),
        Some(command) => {
            let timeout = match written.precheck_timeout.as_deref() {
                None => 60,
                Some(text) => humantime::parse_duration(text)
                    .ok()
                    .filter(|d| !d.is_zero() && *d <= PRECHECK_TIMEOUT_MAX)
                    .ok_or_else(|| format!("`precheck_timeout: {text}` is not a time between 1s and 1h"))?
                    .as_secs(),
            };
            Some(Precheck { command: command.clone(), each: written.each, timeout_secs: timeout })
        }
    };
    crate::verbs::launch::check_task(&written.task).map_err(|e| e.to_string())?;
    let keep = written.keep.unwrap_or_default();
    Ok(Settings {
        preset: preset.name.clone(),
        task: written.task.clone(),
        cwd: cwd.to_string_lossy().into_owned(),
        host: None,
        when,
        overlap,
        precheck,
        max_runs_per_fire: written.max_runs_per_fire,
        max_runs_per_hour: written.max_runs_per_hour,
        budget_per_day: written
            .budget_per_day
            .as_deref()
            .map(crate::cost::budget::Budget::parse)
            .transpose()
            .map_err(|e| format!("`budget_per_day`: {e}"))?,
        pause_after_failures: written.pause_after_failures,
        keep: Keep { last: keep.last, days: keep.days },
    })
}
