//! A firer: fires every schedule as it comes due, and sleeps in between
//! until the next due time or the store changes (a schedule added or
//! resumed, the runs of a queued fire's predecessor ending). Nothing is
//! polled. `corral schedule run` is one; the tray runs one on a thread.
//!
//! Several firers may run at once (two trays, a timer): each slot is
//! claimed in the store, so each is launched once.

use crate::store::{FireRow, Store};
use crate::text::time::Timestamp;
use crate::upkeep::queue::ShepherdCommand;
use crate::watch::Watcher;

use super::{all, fire, ScheduleError};

/// How often a firer with nothing else to do reads the presets' files for
/// `schedule:` (the store's safety net wakes it as often).
const PRESETS_EVERY: std::time::Duration = crate::upkeep::heal::HEAL_EVERY;

/// One look at every schedule.
#[derive(Debug, Default)]
pub struct Round {
    /// The fires this firer carried out.
    pub fired: Vec<FireRow>,
    /// Schedules that could not be fired, with why (the others went on).
    pub errors: Vec<(String, ScheduleError)>,
    /// When the next slot of any schedule is due.
    pub next_due: Option<Timestamp>,
}

/// Fires every schedule that is due now, and the queued fires whose turn
/// came.
pub fn round(store: &mut Store, firer: &str, shepherd: &ShepherdCommand) -> Result<Round, ScheduleError> {
    let mut round = Round::default();
    // Presets' schedules in step with their files, every round.
    for problem in super::presets::sync(store)? {
        round.errors.push(("presets".to_string(), ScheduleError::Invalid(problem)));
    }
    super::settle_orphans(store)?;
    for schedule in all(store)? {
        let name = schedule.name.clone();
        let fired = fire::fire_queued(store, &name, firer, shepherd).and_then(|mut fired| {
            fired.extend(fire::fire_due(store, &name, firer, shepherd)?);
            Ok(fired)
        });
        match fired {
            Ok(fired) => round.fired.extend(fired),
            Err(e) => round.errors.push((name, e)),
        }
        if let Some(next) = schedule.next_due(super::now()) {
            round.next_due = Some(round.next_due.map_or(next, |n| n.min(next)));
        }
    }
    // Where timers fire too, theirs follow what this round took up and
    // fired (a preset's new `schedule:`).
    if let Err(e) = super::timers::follow(store, &shepherd.program) {
        round.errors.push(("timers".to_string(), e));
    }
    Ok(round)
}

/// Fires schedules as they come due until `keep_going` says stop (it is
/// asked after each round), telling `told` of each round.
pub fn run(
    store: &mut Store,
    firer: &str,
    shepherd: &ShepherdCommand,
    mut told: impl FnMut(&Round) -> bool,
) -> Result<(), ScheduleError> {
    let mut watcher = Watcher::new(store)?;
    loop {
        // What a round depends on: schedules, fires and runs' statuses all
        // move the status version; transcript lines do not.
        let seen = store.status_version()?;
        let round = round(store, firer, shepherd)?;
        if !told(&round) {
            return Ok(());
        }
        let due = round.next_due;
        let until = due.map(|at| {
            let wait = at.signed_duration_since(super::now()).to_std().unwrap_or_default();
            std::time::Instant::now() + wait
        });
        // Asleep until the next slot, or until something a round reads
        // changed (a busy store's every commit is no reason to look), or
        // the presets' files are due a look (they are not in the store).
        let looked = std::time::Instant::now();
        // The presets' files are looked at by the clock (a watcher at rest
        // heals by none).
        let presets_at = looked + PRESETS_EVERY;
        let until = Some(until.map_or(presets_at, |u| u.min(presets_at)));
        loop {
            let healed = watcher.heal_if_due(store, shepherd)?;
            if !healed && !watcher.changed_before(store, until)? {
                break; // the next slot, or the presets' look, is due
            }
            let changed = healed || store.status_version()? != seen;
            if changed || due.is_some_and(|at| super::now() >= at) || looked.elapsed() >= PRESETS_EVERY {
                break;
            }
            // A commit that changed no status (a transcript line): while
            // runs stream, every commit would wake it; it looks again no
            // sooner than the desktop's processes do (a status change
            // still shows within that).
            let next = std::time::Instant::now() + crate::watch::LOOK_AT_MOST_EVERY;
            std::thread::sleep(
                until.map_or(next, |u| u.min(next)).saturating_duration_since(std::time::Instant::now()),
            );
        }
    }
}
