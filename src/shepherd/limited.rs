//! A turn that ended at the agent's usage limit, as the supervisor holds
//! it until the turn's processes are gone: whether it is waited out (see
//! `limit`) or ends the run, in words.

use chrono::Local;

use crate::adapter::Verdict;
use crate::run::{RunStatus, StopReason};
use crate::usage_limit::{self, Limit};

/// A turn held at a usage limit, to be waited out.
pub(super) struct Limited {
    /// The turn's verdict: committed (as `usage_limit`) if the limit
    /// cannot be waited out.
    pub verdict: Verdict,
    /// What the agent said.
    pub limit: Limit,
}

/// What to do with a turn that ended at a usage limit: wait it out
/// (`Some`), or end the run (`None`: the verdict, marked `usage_limit`).
/// `tries` counts the waits of limits that said no reset time.
/// `can_resume`: the agent's session can take another turn; `max_tries`:
/// `[usage_limits] tries`.
pub(super) fn decide(verdict: &Verdict, can_resume: bool, tries: u32, max_tries: u32) -> Option<Limit> {
    let limit = usage_limit::recognise(verdict, Local::now())?;
    // Only a session that can be resumed goes on where it stopped.
    if !can_resume || (limit.resets_at.is_none() && tries >= max_tries) {
        return None;
    }
    Some(limit)
}

/// The verdict of a run whose limit cannot be waited out, in words.
pub(super) fn failed(verdict: Verdict, tries: u32) -> Verdict {
    let said = verdict.error.unwrap_or_default();
    let error = match tries {
        0 => format!("usage limit reached: {said}"),
        n => format!("usage limit reached, and still after {n} tries spaced out: {said}"),
    };
    Verdict { status: RunStatus::Failed, stop_reason: StopReason::UsageLimit, error: Some(error) }
}
