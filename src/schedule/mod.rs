//! Schedules: a preset launched by a clock, and a trigger is a schedule
//! with a precheck.
//!
//! A schedule says what to launch (preset, task, folder), when (`when`),
//! and the rules of its fires: what to do when the last fire still runs
//! (`overlap`), a precheck that says whether there is anything to do and,
//! in `each` mode, one run per line it prints, deduplicated against earlier
//! fires; bounds on runs per fire and per hour; pausing itself after
//! failures; which finished runs to keep. Each fire is claimed in the store
//! under its slot, so any number of firers (the tray, `corral schedule
//! run`, a systemd timer running `corral schedule fire`) launch a slot
//! exactly once (see `fire`). Every fire's outcome is kept.
//!
//! The settings are persisted (as JSON in the store); what a firer knows
//! of the next due time is runtime state, computed again from the store.

pub mod calendar;
pub mod fire;
pub mod firer;
mod precheck;
pub mod presets;
pub mod timers;
pub mod when;

use std::time::Duration;

use crate::store::{ScheduleRow, Store, StoreError};
use crate::text::time::{self, Timestamp};
pub use fire::{failed_in_a_row, fire_due, fire_queued, fire_queued_after, run_now, settle_orphans, FireResult};
pub use when::{When, WhenError};

/// Why a schedule cannot be made, read or fired.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store could not be healed while a firer waited.
    #[error(transparent)]
    Heal(#[from] crate::upkeep::heal::HealError),
    /// Its time does not parse.
    #[error(transparent)]
    When(#[from] WhenError),
    /// The name cannot be a schedule's.
    #[error("'{0}' cannot name a schedule: use letters, digits, '.', '_' and '-' (at most 64), starting with a letter or digit")]
    BadName(String),
    /// The stored settings cannot be read back (written by a newer Corral?).
    #[error("schedule '{name}' has settings this Corral cannot read ({why}): remove it with 'corral schedule rm {name}' and add it again")]
    Unreadable { name: String, why: String },
    /// The schedule's folder (its environment) could not be written.
    #[error("cannot keep schedule '{name}''s environment in {path}: {source}")]
    Folder { name: String, path: std::path::PathBuf, source: std::io::Error },
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    /// Asked from inside a sandboxed run: a schedule's runs start where its
    /// firer is, outside that sandbox.
    #[error(
        "a schedule is yours and its runs start outside the sandbox of run {0}, so from inside it no schedule is \
         listed, added, paused, resumed, fired or removed: do it in your own terminal"
    )]
    InsideSandbox(String),
    /// Asked from inside a run that a budget covers: a schedule's runs
    /// start later, as runs of no one's, outside that budget.
    #[error(
        "a schedule's runs start later as runs of their own, outside the budget over run {0}, so it cannot add, \
         pause, resume, fire or remove one: launch the work as its own runs (they count in its budget), or add the schedule in your own \
         terminal"
    )]
    UnderBudget(String),
    /// The systemd timers could not be written.
    #[error("cannot write the schedules' systemd timers: {0}")]
    Timers(std::io::Error),
}

/// What to do when a fire is due while the runs of the last one still run.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The fire is skipped, and said so (the default).
    #[default]
    Skip,
    /// The fire waits for the last one's runs to end, then launches.
    Queue,
    /// The fire launches beside them.
    Allow,
}

/// A command run before a fire: a non-zero exit means nothing to do.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Precheck {
    /// The program and its arguments (no shell).
    pub command: Vec<String>,
    /// One run per line it prints (`{item}` in the task is the line), each
    /// line once over the schedule's life.
    #[serde(default)]
    pub each: bool,
    /// How long it may take before it is killed (and the fire skipped).
    pub timeout_secs: u64,
}

/// Which of a schedule's finished runs are kept; older ones are removed as
/// `corral rm` removes them (a worktree with unmerged work is kept, and
/// said).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Keep {
    /// At most this many finished runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<u32>,
    /// None that ended more than this many days ago.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
}

/// What a schedule launches, when, and the rules of its fires.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub preset: String,
    /// The task; `{item}` is a precheck line in `each` mode.
    pub task: String,
    /// The folder its runs work in: absolute here; on a host, a folder
    /// there (`~`: its user's home).
    pub cwd: String,
    /// Fire on this host of config.toml (`[hosts.NAME]`), over SSH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub when: When,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precheck: Option<Precheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_fire: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_hour: Option<u32>,
    /// Pauses itself once this many fires in a row failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    #[serde(default)]
    pub keep: Keep,
    /// What its fires' runs may spend together in a day (local midnight
    /// to midnight): each run gets what is left, and a fire once it is
    /// spent launches nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_per_day: Option<crate::cost::budget::Budget>,
}

/// A schedule: its settings and where it stands.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Schedule {
    pub name: String,
    #[serde(flatten)]
    pub settings: Settings,
    pub created_at: String,
    pub paused_at: Option<String>,
    pub paused_why: Option<String>,
    /// The preset file whose `schedule:` it is (`None`: added by hand).
    pub source: Option<String>,
}

impl Schedule {
    /// The schedule a stored row holds.
    pub fn from_row(row: ScheduleRow) -> Result<Schedule, ScheduleError> {
        let settings = serde_json::from_str(&row.settings)
            .map_err(|e| ScheduleError::Unreadable { name: row.name.clone(), why: e.to_string() })?;
        Ok(Schedule {
            name: row.name,
            settings,
            created_at: row.created_at,
            paused_at: row.paused_at,
            paused_why: row.paused_why,
            source: row.source,
        })
    }

    /// When it was created (its first slot comes after).
    pub fn created(&self) -> Timestamp {
        time::parse(&self.created_at).unwrap_or_else(now)
    }

    /// Its next slot after `now`; `None` for a cron expression that never
    /// matches again.
    pub fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        self.settings.when.next_after(self.created(), now)
    }
}

/// The variable that moves the schedules' clock by so many seconds (tests
/// of slots hours apart and of daylight-saving jumps, without the wait).
pub const CLOCK_OFFSET_ENV: &str = "CORRAL_SCHEDULE_CLOCK_OFFSET";

/// The schedules' clock: the system's, moved by [`CLOCK_OFFSET_ENV`]
/// seconds when it is set. Runs keep the system's time.
pub fn now() -> Timestamp {
    let offset = std::env::var(CLOCK_OFFSET_ENV).ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(0);
    time::now() + chrono::Duration::seconds(offset)
}

/// A schedule as it is shown (`schedule ls --json` and `show --json`, MCP,
/// the window): its settings, `describe`, `next_fire`, and its latest
/// `count` fires under `fires_key`, each with its `mark` (see
/// [`FireResult`]).
pub fn shown(
    store: &Store,
    schedule: &Schedule,
    fires_key: &str,
    count: usize,
) -> Result<serde_json::Value, ScheduleError> {
    let json = |e: serde_json::Error| ScheduleError::Invalid(e.to_string());
    let mut value = serde_json::to_value(schedule).map_err(json)?;
    value["describe"] = schedule.settings.when.describe().into();
    value["next_fire"] = schedule.next_due(now()).map(time::format).into();
    let mut fires = Vec::new();
    for fire in store.fires(&schedule.name, count)? {
        let mut shown = serde_json::to_value(&fire).map_err(json)?;
        shown["mark"] = FireResult::of(&fire).mark().to_string().into();
        fires.push(shown);
    }
    value[fires_key] = fires.into();
    Ok(value)
}

/// The longest a precheck may be given.
pub const PRECHECK_TIMEOUT_MAX: Duration = Duration::from_secs(3600);

/// Adds schedule `name`, keeping `env` (the adder's environment: PATH, API
/// keys) for its runs, as a launch keeps its launcher's.
pub fn add(
    store: &mut Store,
    name: &str,
    settings: &Settings,
    env: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<Schedule, ScheduleError> {
    check_name(name)?;
    refuse_inside_a_run(store)?;
    if let Some(precheck) = &settings.precheck {
        if precheck.command.is_empty() {
            return Err(ScheduleError::Invalid("the precheck is empty: give the command and its arguments".into()));
        }
        if precheck.timeout_secs == 0 || precheck.timeout_secs > PRECHECK_TIMEOUT_MAX.as_secs() {
            return Err(ScheduleError::Invalid("a precheck's timeout is between 1 s and 1 h".into()));
        }
    }
    crate::verbs::launch::check_task(&settings.task).map_err(|e| ScheduleError::Invalid(e.to_string()))?;
    check_bounds(settings)?;
    let json = serde_json::to_string(settings).map_err(|e| ScheduleError::Invalid(e.to_string()))?;
    // Refused if the name is taken, before anything of the schedule that
    // has it (its kept environment) is touched.
    match store.schedule(name) {
        Ok(_) => return Err(StoreError::ScheduleExists(name.to_string()).into()),
        Err(StoreError::UnknownSchedule(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let dir = store.home().schedule_dir(name);
    let folder = |source| ScheduleError::Folder { name: name.to_string(), path: dir.clone(), source };
    // Kept beside, and put in place once the schedule is this adder's: two
    // adds of one name at once leave the winner's environment.
    let staged = dir.with_file_name(format!(".{name}.adding-{}", std::process::id()));
    crate::home::ensure_private_dir(&staged).map_err(|e| folder(std::io::Error::other(e)))?;
    let kept = crate::run::env::save(&staged, without_run_marks(env)).map_err(folder);
    let added = kept.and_then(|()| Ok(store.add_schedule(name, &json, &time::format(now()))?));
    let placed = added.and_then(|row| {
        crate::home::ensure_private_dir(&dir).map_err(|e| folder(std::io::Error::other(e)))?;
        std::fs::rename(crate::run::env::env_file(&staged), crate::run::env::env_file(&dir)).map_err(folder)?;
        Ok(row)
    });
    let _ = std::fs::remove_dir_all(&staged);
    Schedule::from_row(placed?)
}

/// Refuses settings that can never work: a bound of 0 (no run would ever
/// start, or every fire would pause it), a folder that is not a full path
/// to a folder of this machine.
fn check_bounds(settings: &Settings) -> Result<(), ScheduleError> {
    let zero = [
        ("--max-runs-per-fire", settings.max_runs_per_fire),
        ("--max-runs-per-hour", settings.max_runs_per_hour),
        ("--pause-after-failures", settings.pause_after_failures),
    ];
    if let Some((name, _)) = zero.iter().find(|(_, n)| *n == Some(0)) {
        return Err(ScheduleError::Invalid(format!(
            "{name} 0 would never let a run start: give 1 or more, or leave it out"
        )));
    }
    match settings.host {
        None => check_folder(std::path::Path::new(&settings.cwd)),
        Some(_) => Ok(()),
    }
}

/// Refuses a schedule's folder on this machine that its runs could not
/// start in: not a full path, or no folder.
pub fn check_folder(cwd: &std::path::Path) -> Result<(), ScheduleError> {
    if cwd.is_absolute() && cwd.is_dir() {
        return Ok(());
    }
    Err(ScheduleError::Invalid(format!(
        "the folder {} is not a full path to an existing folder: its runs could not start there",
        cwd.display()
    )))
}

/// Resumes schedule `name` (its fires launch again).
pub fn resume(store: &mut Store, name: &str) -> Result<Schedule, ScheduleError> {
    refuse_inside_a_run(store)?;
    Schedule::from_row(store.set_schedule_paused(name, None)?)
}

/// Pauses schedule `name` at the user's word (its fires launch nothing).
pub fn pause(store: &mut Store, name: &str) -> Result<Schedule, ScheduleError> {
    refuse_inside_a_run(store)?;
    Schedule::from_row(store.set_schedule_paused(name, Some("by request"))?)
}

/// The one gate of every verb that changes a schedule (add, pause,
/// resume, run now, remove), whatever door asks (the CLI, MCP, the
/// window): refused to a process of a sandboxed run, or of a run a budget
/// covers. A schedule is the user's; its runs start later as runs of no
/// one's, outside that run's sandbox and budget.
pub(crate) fn refuse_inside_a_run(store: &Store) -> Result<(), ScheduleError> {
    refuse_inside_a_sandbox(store)?;
    match crate::run::caller::caller_run(store)? {
        Some(run) if store.budget_left(&run)?.is_some() => Err(ScheduleError::UnderBudget(run)),
        _ => Ok(()),
    }
}

/// Refuses a process of a sandboxed run any look at the schedules: they
/// are the user's (their tasks, folders and kept environments), as the
/// CLI's `corral schedule` is refused inside a sandbox.
pub fn refuse_inside_a_sandbox(store: &Store) -> Result<(), ScheduleError> {
    let config = crate::home::config::Config::load(store.home())?;
    match crate::run::caller::sandboxed_caller(store, &config)? {
        Some(run) => Err(ScheduleError::InsideSandbox(run)),
        None => Ok(()),
    }
}

/// The schedule called `name`.
pub fn get(store: &Store, name: &str) -> Result<Schedule, ScheduleError> {
    Schedule::from_row(store.schedule(name)?)
}

/// Every schedule, by name.
pub fn all(store: &Store) -> Result<Vec<Schedule>, ScheduleError> {
    store.schedules()?.into_iter().map(Schedule::from_row).collect()
}

/// Removes schedule `name` and its folder; its runs stay. A preset's
/// schedule goes with its `schedule:` key, not this way.
pub fn remove(store: &mut Store, name: &str) -> Result<(), ScheduleError> {
    refuse_inside_a_run(store)?;
    if let Some(file) = store.schedule(name)?.source {
        return Err(ScheduleError::Invalid(format!(
            "schedule {name} is the `schedule:` of the preset {file}: remove it there (or pause it here)"
        )));
    }
    store.remove_schedule(name)?;
    let _ = std::fs::remove_dir_all(store.home().schedule_dir(name));
    Ok(())
}

/// `env` without a run's own marks: a schedule's runs get their own.
fn without_run_marks(
    env: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    let marks = [crate::run::env::RUN_ID_ENV, crate::run::env::SHEPHERD_ENV];
    env.into_iter().filter(move |(k, _)| !marks.iter().any(|m| k == m))
}

fn check_name(name: &str) -> Result<(), ScheduleError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ScheduleError::BadName(name.to_string()))
    }
}
