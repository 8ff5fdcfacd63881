//! One fire of a schedule, from its slot claimed to its runs launched, and
//! its outcome recorded whatever it was.
//!
//! The slot is claimed first (see `Store::claim_fire`): of any number of
//! firers, the one that inserted the slot carries it out; the others see
//! it taken and do nothing. Then, in order: a paused schedule, or one whose
//! last fires failed, skips; the last fire's runs still running skip,
//! queue or let it go on (`overlap`); the hourly bound; the precheck; and
//! the runs, one per new item in `each` mode, at most as many as the
//! bounds allow (items left over are left for a later fire). Finally the
//! schedule's finished runs beyond `keep` are removed as `rm` would.

use std::ffi::OsString;
use std::path::PathBuf;

use super::precheck::{self, Checked};
use super::{get, Overlap, Schedule, ScheduleError};
use crate::home::config::Config;
use crate::remote::RemoteLaunch;
use crate::run::RunStatus;
use crate::store::{FireAsk, FireRow, Short, Store};
use crate::text::time;
use crate::upkeep::queue::ShepherdCommand;
use crate::verbs::launch::{launch, LaunchRequest};

/// Fires schedule `name` if a slot is due and not taken: the fire, as it
/// came out, or `None` if nothing was due (or another firer took it).
pub fn fire_due(
    store: &mut Store,
    name: &str,
    firer: &str,
    shepherd: &ShepherdCommand,
) -> Result<Option<FireRow>, ScheduleError> {
    let schedule = get(store, name)?;
    let now = super::now();
    let created = schedule.created();
    let when = schedule.settings.when.clone();
    let due = |last: Option<(&str, Option<&str>)>| {
        let at = last.and_then(|(at, _)| time::parse(at));
        let local = last.and_then(|(_, local)| local).and_then(|l| l.parse::<chrono::NaiveDateTime>().ok());
        when.latest_due(created, at, local, now)
    };
    // Nothing due: no write (a firer looks at every schedule at each wake).
    let last = store.last_fire_due(name, &time::format(now))?;
    if due(last.as_ref().map(|(at, local)| (at.as_str(), local.as_deref()))).is_none() {
        return Ok(None);
    }
    let claimed = store.claim_fire(name, firer, &time::format(now), |last| {
        let slot = due(last)?;
        let late = now.signed_duration_since(slot).num_milliseconds().max(0);
        Some((time::format(slot), late, when.local_of(slot).map(|l| l.format("%Y-%m-%dT%H:%M:%S").to_string())))
    })?;
    match claimed {
        Some(fire) => {
            let fire = carry_out(store, &schedule, fire, shepherd, true)?;
            then_the_queued(store, name, firer, shepherd);
            Ok(Some(fire))
        }
        None => Ok(None),
    }
}

/// After a fire: the fires queued behind it go now if it left nothing
/// running (a fire that launched nothing; one whose runs ended at once).
fn then_the_queued(store: &mut Store, name: &str, firer: &str, shepherd: &ShepherdCommand) {
    if let Err(e) = fire_queued(store, name, firer, shepherd) {
        tracing::warn!(schedule = name, "cannot carry out the fires queued behind this one: {e}");
    }
}

/// The firer of a fire the user asked for (`corral schedule run-now`).
const RUN_NOW: &str = "run-now";

/// Fires schedule `name` now, a slot of its own, paused or not: the user
/// asked (`corral schedule run-now`).
pub fn run_now(store: &mut Store, name: &str, shepherd: &ShepherdCommand) -> Result<FireRow, ScheduleError> {
    super::refuse_inside_a_run(store)?;
    let schedule = get(store, name)?;
    let now = super::now();
    // A slot is a millisecond: run-nows in the same one each take the next
    // free one.
    let mut fire = None;
    for ms in 0..1000 {
        let due = time::format(now + chrono::Duration::milliseconds(ms));
        fire = store.claim_fire(name, RUN_NOW, &time::format(now), |_| Some((due.clone(), 0, None)))?;
        if fire.is_some() {
            break;
        }
    }
    let Some(fire) = fire else {
        return Err(ScheduleError::Invalid(format!(
            "schedule '{name}' was run a thousand times this second: try again"
        )));
    };
    let fire = carry_out(store, &schedule, fire, shepherd, false)?;
    then_the_queued(store, name, RUN_NOW, shepherd);
    Ok(fire)
}

/// Carries out the fires of schedule `name` that waited for the runs of the
/// one before them (`overlap: queue`), if those ended.
pub fn fire_queued(
    store: &mut Store,
    name: &str,
    firer: &str,
    shepherd: &ShepherdCommand,
) -> Result<Vec<FireRow>, ScheduleError> {
    let mut fired = Vec::new();
    for fire in store.queued_fires(name)? {
        if !store.schedule_active_runs(name)?.is_empty() {
            break;
        }
        // A `run-now` the user asked goes as asked, paused or not, when
        // its turn comes.
        let asked = fire.firer == RUN_NOW;
        if store.take_queued_fire(fire.id, if asked { RUN_NOW } else { firer }, &time::format(super::now()))? {
            let schedule = get(store, name)?;
            let fire = store.fire(fire.id)?;
            fired.push(carry_out(store, &schedule, fire, shepherd, !asked)?);
        }
    }
    Ok(fired)
}

/// What the schedule that launched run `run_id` does now that it ended
/// (its shepherd's last act): pauses itself if this end made its failures
/// reach `pause_after_failures` — at once, not at its next slot, so it is
/// never shown "✗✗ active" meanwhile — then carries out its queued fires,
/// so one goes when its turn comes even with no firer running (only
/// systemd timers).
pub fn fire_queued_after(
    store: &mut Store,
    run_id: &str,
    shepherd: &ShepherdCommand,
) -> Result<Vec<FireRow>, ScheduleError> {
    let Some(name) = store.schedule_of_run(run_id)? else { return Ok(Vec::new()) };
    let schedule = get(store, &name)?;
    if let Some(limit) = schedule.settings.pause_after_failures.filter(|n| *n > 0 && schedule.paused_at.is_none()) {
        let failed = failed_in_a_row(store, &name, None)?;
        if failed >= limit as usize {
            let why = format!("its last {failed} fires failed (pause_after_failures: {limit})");
            store.set_schedule_paused(&name, Some(&why))?;
        }
    }
    fire_queued(store, &name, &format!("after {run_id}"), shepherd)
}

/// Settles the fires that their firer left `firing` and can no longer
/// finish (it was killed, or the machine lost power mid-fire): one that
/// launched runs is `launched` (each was recorded as it was launched), one
/// that launched none `failed`, each saying so. Without this such a fire
/// was shown running for ever. Returns the fires settled.
pub fn settle_orphans(store: &mut Store) -> Result<Vec<FireRow>, ScheduleError> {
    let mut settled = Vec::new();
    // A fire of a Corral from before firers were recorded: gone once it is
    // older than any precheck could have kept it.
    let unknown_before =
        time::format(super::now() - chrono::Duration::seconds(super::PRECHECK_TIMEOUT_MAX.as_secs() as i64 + 60));
    for (fire, process) in store.firing_fires()? {
        let gone = match process {
            Some(process) => !process.is_alive(),
            None => fire.fired_at < unknown_before,
        };
        if !gone {
            continue;
        }
        let who = match process {
            Some(process) => format!("its firer ({}, pid {})", fire.firer, process.pid),
            None => format!("its firer ({})", fire.firer),
        };
        let (outcome, detail) = match fire.runs.len() {
            0 => ("failed", format!("{who} ended before it finished: nothing was launched")),
            n => ("launched", format!("{who} ended after launching {n} run(s), before it finished")),
        };
        if store.settle_fire(fire.id, outcome, &detail)? {
            store.release_unlaunched_items(fire.id)?;
            // What the dead firer left running stops with its fire.
            let (precheck, cgroup) = store.fire_precheck(fire.id)?;
            precheck::stop_left(precheck, cgroup.as_deref(), &precheck::label(&fire.schedule, fire.id));
            settled.push(store.fire(fire.id)?);
        }
    }
    Ok(settled)
}

/// What a fire decided, before it is recorded.
struct Decided {
    outcome: &'static str,
    detail: String,
    runs: Vec<(String, Option<String>)>,
}

impl Decided {
    fn skipped(outcome: &'static str, detail: impl Into<String>) -> Decided {
        Decided { outcome, detail: detail.into(), runs: Vec::new() }
    }
}

/// Decides fire `fire` of `schedule`, launches what it should, and records
/// the outcome. `honour_pause`: a paused schedule launches nothing.
fn carry_out(
    store: &mut Store,
    schedule: &Schedule,
    fire: FireRow,
    shepherd: &ShepherdCommand,
    honour_pause: bool,
) -> Result<FireRow, ScheduleError> {
    let mut decided = match decide(store, schedule, &fire, shepherd, honour_pause) {
        Ok(decided) => decided,
        Err(e) => Decided::skipped("failed", e.to_string()),
    };
    if !decided.runs.is_empty() {
        // Worktrees `keep` could not take are said with the fire that
        // pruned their runs: the user finds them in its history.
        if let Some(kept) = keep(store, schedule) {
            decided.detail = if decided.detail.is_empty() { kept } else { format!("{}; {kept}", decided.detail) };
        }
    }
    store.finish_fire(fire.id, decided.outcome, Some(&decided.detail))?;
    // The fire that makes the failures reach the bound pauses it now, not
    // the next one.
    if let Some(limit) = schedule.settings.pause_after_failures.filter(|_| decided.outcome == "failed") {
        let failed = failed_in_a_row(store, &schedule.name, None)?;
        if failed >= limit as usize {
            let why = format!("its last {failed} fires failed (pause_after_failures: {limit})");
            store.set_schedule_paused(&schedule.name, Some(&why))?;
        }
    }
    Ok(store.fire(fire.id)?)
}

fn decide(
    store: &mut Store,
    schedule: &Schedule,
    fire: &FireRow,
    shepherd: &ShepherdCommand,
    honour_pause: bool,
) -> Result<Decided, ScheduleError> {
    let (name, settings) = (&schedule.name, &schedule.settings);
    if honour_pause {
        if let Some(since) = &schedule.paused_at {
            let why = schedule.paused_why.as_deref().unwrap_or("by request");
            return Ok(Decided::skipped("skipped_paused", format!("paused since {since} ({why})")));
        }
        if let Some(limit) = settings.pause_after_failures.filter(|n| *n > 0) {
            let failed = failed_in_a_row(store, name, Some(fire.id))?;
            if failed >= limit as usize {
                let why = format!("its last {failed} fires failed (pause_after_failures: {limit})");
                store.set_schedule_paused(name, Some(&why))?;
                return Ok(Decided::skipped(
                    "skipped_paused",
                    format!("paused itself: {why}; resume with 'corral schedule resume {name}'"),
                ));
            }
        }
    }
    let active = store.schedule_active_runs(name)?;
    // A fire still in its precheck or launching has runs to come: it
    // counts as running, or two fires at once would both launch.
    let firing = store.earlier_firing(name, fire.id)?;
    if !active.is_empty() || !firing.is_empty() {
        let what = match firing.first() {
            Some(before) if active.is_empty() => format!("fire {before} is still being carried out"),
            _ => format!("the last fire's runs still run: {}", active.join(", ")),
        };
        match settings.overlap {
            Overlap::Skip => return Ok(Decided::skipped("skipped_overlap", what)),
            Overlap::Queue => return Ok(Decided::skipped("queued", format!("waits: {what}"))),
            Overlap::Allow => {}
        }
    }
    let hour_ago = time::format(super::now() - chrono::Duration::hours(1));
    let room_this_hour = match settings.max_runs_per_hour {
        Some(max) => (max as usize).saturating_sub(store.schedule_runs_since(name, &hour_ago)?),
        None => usize::MAX,
    };
    if room_this_hour == 0 {
        let max = settings.max_runs_per_hour.unwrap_or_default();
        return Ok(Decided::skipped(
            "skipped_limit",
            format!("{max} runs in the last hour already (max_runs_per_hour)"),
        ));
    }
    // The day's budget: what is left goes to this fire's runs.
    let now = super::now().with_timezone(&chrono::Local);
    let midnight = now.date_naive().and_hms_opt(0, 0, 0).and_then(|m| m.and_local_timezone(chrono::Local).earliest());
    let day_since = time::format(midnight.map_or(super::now(), |m| m.with_timezone(&chrono::Utc)));
    match settings.budget_per_day {
        None => {}
        Some(daily) => {
            let spent = store.schedule_spent_since(name, &day_since)?;
            if crate::cost::budget::Crossing::is_crossed(&daily, &spent) {
                let approx = if spent.estimated { "≈" } else { "" };
                return Ok(Decided::skipped(
                    "skipped_budget",
                    format!(
                        "its budget of {} a day is spent (today: {approx}${:.2}, {} tokens)",
                        daily.words(),
                        spent.usd,
                        spent.tokens
                    ),
                ));
            }
            // What the schedule's runs still going may yet spend is theirs:
            // only the rest is this fire's.
            let (mut held_usd, mut held_tokens) = (0.0, 0u64);
            for id in &active {
                let (Some(given), run) = (store.budget_of(id)?, store.run(id)?) else { continue };
                held_usd += given.usd.map_or(0.0, |u| (u - run.cost_usd.unwrap_or(0.0)).max(0.0));
                held_tokens += given.tokens.map_or(0, |t| t.saturating_sub(run.usage.total()));
            }
            if daily.left_after(spent.usd + held_usd, spent.tokens.saturating_add(held_tokens)).is_none() {
                return Ok(Decided::skipped(
                    "skipped_budget",
                    format!(
                        "its budget of {} a day is held by its runs still going: {}",
                        daily.words(),
                        active.join(", ")
                    ),
                ));
            }
        }
    }
    let env = environment(store, name)?;
    // A host's schedule checks here, in the user's home; its runs work there.
    let here = match &settings.host {
        Some(_) => directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf()).unwrap_or_else(|| "/".into()),
        None => PathBuf::from(&settings.cwd),
    };
    let cwd = here.as_path();
    let cap = room_this_hour.min(settings.max_runs_per_fire.map_or(usize::MAX, |m| m as usize));
    let mut left = 0;
    let mut items: Vec<Option<String>> = match &settings.precheck {
        None => vec![None],
        Some(check) => {
            let cgroups = Config::load(store.home())?.cgroups;
            let label = precheck::label(name, fire.id);
            match precheck::run(check, &label, cwd, &env, cgroups, |process, cgroup| {
                let cgroup = cgroup.map(|c| c.to_string_lossy().into_owned());
                if let Err(e) = store.record_precheck(fire.id, process, cgroup.as_deref()) {
                    tracing::warn!("cannot record the precheck of fire {}: {e}", fire.id);
                }
            }) {
                Checked::Nothing(why) => return Ok(Decided::skipped("skipped_precheck", why)),
                Checked::Work(lines) if check.each => {
                    let mut seen = std::collections::HashSet::new();
                    let new: Vec<String> = lines.into_iter().filter(|line| seen.insert(line.clone())).collect();
                    // Claimed in one write: a fire beside this one, listing
                    // the same items, gets the others.
                    let (claimed, beyond) = store.claim_items(fire.id, &new, cap)?;
                    if claimed.is_empty() {
                        return Ok(Decided::skipped(
                            "skipped_nothing_new",
                            "every item the precheck listed was worked on",
                        ));
                    }
                    left = beyond;
                    claimed.into_iter().map(Some).collect()
                }
                Checked::Work(_) => vec![None],
            }
        }
    };
    let mut left = left.max(items.len().saturating_sub(cap));
    items.truncate(cap);
    // The runs and the day's budget this fire takes, in one write with what
    // the fires beside it hold (`overlap: allow`): the day's budget left is
    // shared by its runs, never given whole to each.
    let ask = FireAsk {
        wanted: items.len(),
        max_per_hour: settings.max_runs_per_hour,
        hour_ago: &hour_ago,
        daily: settings.budget_per_day,
        day_since: &day_since,
    };
    let reserved = store.reserve_fire(fire.id, &ask)?;
    if reserved.runs < items.len() {
        left += items.len() - reserved.runs;
        let dropped: Vec<String> = items.drain(reserved.runs..).flatten().collect();
        store.release_items(fire.id, &dropped)?;
    }
    match reserved.short {
        Some(Short::Hour) => {
            let max = settings.max_runs_per_hour.unwrap_or_default();
            let why =
                format!("{max} runs in the last hour already, with the fires being carried out (max_runs_per_hour)");
            return Ok(Decided::skipped("skipped_limit", why));
        }
        Some(Short::Budget) => {
            let daily = settings.budget_per_day.map(|d| d.words()).unwrap_or_default();
            let why =
                format!("its budget of {daily} a day is spent or held by its runs and the fires being carried out");
            return Ok(Decided::skipped("skipped_budget", why));
        }
        None => {}
    }
    let budget = reserved.each;
    let mut runs = Vec::new();
    let mut errors = Vec::new();
    for item in items {
        let task = match &item {
            Some(item) => settings.task.replace("{item}", item),
            None => settings.task.clone(),
        };
        let launched = match &settings.host {
            Some(host) => launch_there(store, host, settings, &task, budget, (fire.id, item.clone())),
            None => {
                let request = LaunchRequest {
                    preset: settings.preset.clone(),
                    task,
                    cwd: cwd.to_path_buf(),
                    model: None,
                    parent: None,
                    env: Some(env.clone()),
                    worktree: None,
                    base: None,
                    budget,
                    fire: Some((fire.id, item.clone())),
                    request: None,
                    scope_own: false,
                };
                launch(store, &request, shepherd).map_err(|e| e.to_string())
            }
        };
        match launched {
            Ok(run) => runs.push((run.id, item)),
            Err(e) => errors.push(e),
        }
    }
    let mut detail = match runs.len() {
        0 => String::new(),
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    if left > 0 {
        detail.push_str(&format!("; {left} more items left for later fires (max_runs_per_fire / max_runs_per_hour)"));
    }
    if let Some(first) = errors.first() {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        detail.push_str(&format!("cannot launch: {first}"));
    }
    if !errors.is_empty() {
        // Items whose run could not be launched are a later fire's.
        store.release_unlaunched_items(fire.id)?;
    }
    let outcome = if runs.is_empty() { "failed" } else { "launched" };
    Ok(Decided { outcome, detail, runs })
}

/// Launches a fire's run on `host` (recorded in this store's mirror, so it
/// shows and is followed here, with its fire in the same write).
fn launch_there(
    store: &mut Store,
    host: &str,
    settings: &super::Settings,
    task: &str,
    budget: Option<crate::cost::budget::Budget>,
    fire: (i64, Option<String>),
) -> Result<crate::Run, String> {
    let home = store.home().clone();
    let config = Config::load(&home).map_err(|e| e.to_string())?;
    let host = config.host(host).map_err(|e| e.to_string())?;
    crate::verbs::launch::check_task(task).map_err(|e| e.to_string())?;
    let options = RemoteLaunch {
        cwd: (settings.cwd != "~").then(|| settings.cwd.clone()),
        model: None,
        worktree: None,
        base: None,
        budget,
        fire: Some(fire),
    };
    crate::remote::launch_for(&home, store, host, (&settings.preset, task), &options, None).map_err(|e| e.to_string())
}

/// What a fire came to, as the user reads it: the one rule for `schedule
/// ls`'s marks, the tray's attention and `pause_after_failures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireResult {
    /// Its runs completed (or were removed since: nothing says otherwise).
    Completed,
    /// It launched nothing, or a run of it ended other than completed.
    Failed,
    /// Its runs still run, or it is being fired or waits its turn.
    Running,
    /// It was skipped (paused, overlap, precheck, nothing new, a bound).
    Skipped,
}

impl FireResult {
    /// What `fire` came to.
    pub fn of(fire: &FireRow) -> FireResult {
        let status = |f: fn(RunStatus) -> bool| fire.runs.iter().any(|r| r.status.is_some_and(f));
        match fire.outcome.as_str() {
            "launched" if status(RunStatus::is_active) => FireResult::Running,
            "launched" if status(|s| matches!(s, RunStatus::Failed | RunStatus::Lost)) => FireResult::Failed,
            "launched" if status(|s| s == RunStatus::Completed) || fire.runs.is_empty() => FireResult::Completed,
            // Every run stopped by the user: neither a success nor a
            // failure of the schedule's.
            "launched" => FireResult::Skipped,
            "failed" => FireResult::Failed,
            "firing" | "queued" => FireResult::Running,
            _ => FireResult::Skipped,
        }
    }

    /// As one mark: ✓ ✗ … ·.
    pub fn mark(self) -> char {
        match self {
            FireResult::Completed => '✓',
            FireResult::Failed => '✗',
            FireResult::Running => '…',
            FireResult::Skipped => '·',
        }
    }
}

/// How many of the schedule's latest fires (but `this`) failed in a row,
/// counted back to the first that did not fail or still runs; skipped
/// fires count neither way.
pub fn failed_in_a_row(store: &Store, name: &str, this: Option<i64>) -> Result<usize, ScheduleError> {
    let mut failed = 0;
    // Fires before the schedule was last resumed are behind it.
    let resumed = store.schedule_resumed_at(name)?;
    let since_resumed = |fire: &FireRow| resumed.as_deref().is_none_or(|at| fire.fired_at.as_str() > at);
    for fire in store.fires(name, 64)?.into_iter().filter(|f| Some(f.id) != this).take_while(since_resumed) {
        match FireResult::of(&fire) {
            FireResult::Failed => failed += 1,
            FireResult::Skipped => {}
            FireResult::Completed | FireResult::Running => break,
        }
    }
    Ok(failed)
}

/// The environment the schedule's runs start with: its adder's, kept in
/// its folder.
fn environment(store: &Store, name: &str) -> Result<Vec<(OsString, OsString)>, ScheduleError> {
    let dir = store.home().schedule_dir(name);
    match crate::run::env::load(&dir) {
        Ok(Some(env)) => Ok(env),
        Ok(None) => Ok(std::env::vars_os().collect()),
        Err(source) => Err(ScheduleError::Folder { name: name.to_string(), path: dir, source }),
    }
}

/// Removes the schedule's finished runs beyond its `keep`, as `corral rm`
/// does (a worktree with unmerged work stays), and says which worktrees it
/// kept (`None`: none). Best effort: a run that cannot be removed now is
/// tried at the next fire.
fn keep(store: &mut Store, schedule: &Schedule) -> Option<String> {
    let keep = schedule.settings.keep;
    if keep.last.is_none() && keep.days.is_none() {
        return None;
    }
    let ended = store.schedule_ended_runs(&schedule.name).ok()?;
    let mut kept = Vec::new();
    // Further back than time goes: nothing is too old.
    let too_old = keep.days.and_then(|days| super::now().checked_sub_signed(chrono::Duration::try_days(days.into())?));
    let too_old = too_old.map(time::format);
    for (index, (id, ended_at)) in ended.iter().enumerate() {
        let beyond_last = keep.last.is_some_and(|last| index >= last as usize);
        let beyond_days = too_old.as_ref().is_some_and(|limit| ended_at < limit);
        if beyond_last || beyond_days {
            match crate::verbs::remove::remove(store, id, false) {
                Ok(removed) => kept.extend(
                    removed.kept_worktrees.into_iter().map(|tree| format!("{} (branch {})", tree.path, tree.branch)),
                ),
                Err(e) => {
                    tracing::info!(schedule = %schedule.name, run = %id, "cannot remove a run beyond `keep`: {e}")
                }
            }
        }
    }
    (!kept.is_empty()).then(|| {
        format!(
            "keep kept {} worktree(s) holding unmerged work: {} (merge it, or remove it with git worktree remove)",
            kept.len(),
            kept.join(", ")
        )
    })
}
