//! Replies reaching the agent (see `store::replies`): a reply said while the
//! run was active is delivered when the agent's turn ends, in a new turn of
//! its session, instead of ending the run; a reply to an ended run reopened
//! it, and the first turn of its new shepherd delivers it.

use crate::adapter::{EventKind, Report, TranscriptEvent};
use crate::run::Run;
use crate::store::{Store, StoreError};

/// A turn of the agent after its first: what it is told and what the
/// transcript says of it.
pub(super) struct NextTurn {
    /// The prompt, in the agent's own session.
    pub prompt: String,
    /// Tools allowed from this turn on (a reply's `--allow-denied`); `None`
    /// keeps those of the turn before.
    pub allowed: Option<Vec<String>>,
    /// Transcript events written before the turn starts.
    pub notes: Vec<TranscriptEvent>,
    /// A reply turn (else a continuation with children's results): it
    /// answers the user, so earlier refusals no longer stand.
    pub reply: bool,
}

/// The turn that delivers every reply to `run_id` its agent has not had,
/// marking them delivered; `None` if none waits.
pub(super) fn deliver(store: &mut Store, run_id: &str) -> Result<Option<NextTurn>, StoreError> {
    let replies = store.pending_replies(run_id)?;
    if replies.is_empty() {
        return Ok(None);
    }
    let mut allowed: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    for reply in &replies {
        notes.push(TranscriptEvent::text(EventKind::User, reply.text.clone()));
        for tool in &reply.allow {
            if !allowed.contains(tool) {
                allowed.push(tool.clone());
            }
        }
    }
    if !allowed.is_empty() {
        notes.push(TranscriptEvent::text(EventKind::System, format!("allowed for this turn: {}", allowed.join(", "))));
    }
    let prompt = replies.iter().map(|r| r.text.as_str()).collect::<Vec<_>>().join("\n\n");
    store.mark_replies_delivered(&replies.iter().map(|r| r.id).collect::<Vec<_>>())?;
    Ok(Some(NextTurn { prompt, allowed: Some(allowed), notes, reply: true }))
}

/// What the turns before a reopened run's new shepherd reported, as the
/// store kept it: the new turns add to it. With `cumulative` usage (Codex:
/// each turn reports the whole session's) only the texts carry over.
pub(super) fn earlier_report(run: &Run, cumulative: bool) -> Report {
    Report {
        final_text: run.final_text.clone(),
        resolved_model: run.resolved_model.clone(),
        usage: if cumulative { Default::default() } else { run.usage },
        // An estimate is made again over every turn's usage.
        cost_usd: if run.cost_estimated || cumulative { None } else { run.cost_usd },
        cost_estimated: false,
        session_id: run.session_id.clone(),
        denied: Vec::new(),
    }
}
