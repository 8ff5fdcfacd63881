//! A turn that ended at the agent's usage limit (see `usage_limit`): the
//! run is paused until the limit resets, holding no slot and with no
//! process of its own, then takes a slot back and goes on in the agent's
//! own session ("continue where you stopped"). `corral resume` goes on at
//! once; `corral abort` stops it where it waits.

use std::time::{Duration, Instant};

use chrono::{DateTime, Local};

use super::children::{block, Woken};
use super::limited::{failed, Limited};
use super::replies::NextTurn;
use super::supervise::Supervisor;
use super::ShepherdError;
use crate::adapter::{EventKind, TranscriptEvent};
use crate::cost::usage_limit::{self, CONTINUE};
use crate::run::RunStatus;
use crate::watch::Watcher;

/// How long after the reset time the agent is started again: a reset said
/// to the minute ("try again at 5:40 PM") is over once that minute is.
const MARGIN: Duration = Duration::from_secs(5);

/// Pauses the run until the limit resets (or someone resumes or aborts
/// it), then takes a slot back: the next turn, or `None` if the run ended
/// meanwhile (aborted).
pub(super) fn wait_out(sup: &mut Supervisor, limited: Limited, tries: u32) -> Result<Option<NextTurn>, ShepherdError> {
    let now = Local::now();
    // A reset that is now, said again after the first try, is tried as a
    // limit with no reset time: longer apart each time.
    let repeated_now = tries > 0 && super::limited::resets_now(&limited.limit);
    let resumes: DateTime<Local> = match limited.limit.resets_at {
        Some(at) if !repeated_now => at.max(now) + chrono::Duration::from_std(MARGIN).unwrap_or_default(),
        _ => {
            now + chrono::Duration::from_std(usage_limit::backoff(sup.config.usage_limit_retry, tries))
                .unwrap_or_default()
        }
    };
    let resumes_text = crate::text::time::format(resumes.with_timezone(&chrono::Utc));
    let agent = sup.session.launch().preset.agent;
    let said = limited.limit.said.clone();
    let shared = limited.limit.resets_at.map(|_| (agent, said.as_str()));
    let session = sup.session.report().session_id;
    if !sup.store.mark_limited(&sup.run_id, &resumes_text, shared, session.as_deref())? {
        // Not running any more (aborted as the turn ended).
        sup.commit_with_children(failed(limited.verdict, tries))?;
        return Ok(None);
    }
    let when = crate::text::time::clock(resumes.with_timezone(&chrono::Utc));
    let note = match limited.limit.resets_at.filter(|_| !repeated_now) {
        Some(_) => format!("paused: usage limit reached ({said}); goes on by itself at {when} in its own session"),
        None => format!(
            "paused: usage limit reached with no reset time said ({said}); tried again at {when} (try {} of {})",
            tries + 1,
            sup.config.usage_limit_tries
        ),
    };
    sup.note_event(EventKind::System, note)?;
    // Its slot is free now: hand it on at once.
    sup.heal_if_due(Duration::ZERO);
    let deadline = Instant::now() + (resumes - Local::now()).to_std().unwrap_or_default();
    let mut watcher = Watcher::new(&sup.store)?;
    // Until the reset time, or a `corral resume` (which withdraws the
    // pause request the limit made).
    // A `corral pause` meanwhile makes it the user's pause: past the reset
    // it waits for `corral resume`.
    let held = |sup: &Supervisor| -> Result<bool, ShepherdError> {
        Ok(sup.store.run(&sup.run_id)?.pause_reason != Some(crate::run::PauseReason::UsageLimit))
    };
    loop {
        while sup.store.pause_requested(&sup.run_id)? && (Instant::now() < deadline || held(sup)?) {
            let until = (Instant::now() < deadline).then_some(deadline);
            if let Woken::Stopped = block(sup, &mut watcher, until)? {
                return Ok(None);
            }
            if sup.store.run(&sup.run_id)?.status.is_terminal() {
                return Ok(None);
            }
        }
        // Resumed, or the limit's pause ended here: unless a `corral
        // pause` made it the user's that very moment.
        if !sup.store.pause_requested(&sup.run_id)? || sup.store.end_limit_pause(&sup.run_id)? {
            break;
        }
    }
    // A slot back, before any queued run (a `corral pause` while it waits
    // for one holds it until `corral resume`).
    while !sup.store.resume_paused(&sup.run_id, sup.config.max_parallel)? {
        if sup.store.run(&sup.run_id)?.status != RunStatus::Paused {
            return Ok(None);
        }
        if let Woken::Stopped = block(sup, &mut watcher, None)? {
            return Ok(None);
        }
    }
    // The limit is over: runs of this agent queued behind it take the
    // slots left now, whoever else looks or not.
    sup.heal_if_due(Duration::ZERO);
    let notes = vec![
        TranscriptEvent::text(EventKind::System, "the usage limit is over: going on in the agent's session"),
        TranscriptEvent::text(EventKind::System, format!("prompt: {CONTINUE}")),
    ];
    Ok(Some(NextTurn { prompt: CONTINUE.to_string(), allowed: None, notes, reply: false }))
}
