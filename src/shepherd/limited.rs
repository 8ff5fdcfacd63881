//! A turn that ended at the agent's usage limit, as the supervisor holds
//! it until the turn's processes are gone: whether it is waited out (see
//! `limit`) or ends the run, in words.

use chrono::Local;

use crate::adapter::Verdict;
use crate::cost::usage_limit::{self, Limit};
use crate::run::{RunStatus, StopReason};

/// A turn held at a usage limit, to be waited out.
pub(super) struct Limited {
    /// The turn's verdict: committed (as `usage_limit`) if the limit
    /// cannot be waited out.
    pub verdict: Verdict,
    /// What the agent said.
    pub limit: Limit,
}

/// The usage limit a turn's verdict reports, if it does.
pub(super) fn reported(verdict: &Verdict) -> Option<Limit> {
    usage_limit::recognise(verdict, Local::now())
}

/// True if a turn at `limit` is waited out; false: it ends the run (see
/// [`failed`]). Only a session that can be resumed (`can_resume`) goes on
/// where it stopped; a limit that said no reset time is waited out
/// `max_tries` times (`[usage_limits] tries`), `tries` so far.
pub(super) fn waits(limit: &Limit, can_resume: impl FnOnce() -> bool, tries: u32, max_tries: u32) -> bool {
    (limit.resets_at.is_some() && !resets_now(limit) || tries < max_tries) && can_resume()
}

/// True if `limit` resets now, or a moment ago: said again after its reset
/// (a reset said to the minute, repeated within that minute, or one the
/// provider did not keep), it is tried as one with no reset said — a few
/// times, longer apart each time — never again every few seconds.
pub(super) fn resets_now(limit: &Limit) -> bool {
    limit.resets_at.is_some_and(|at| at <= Local::now() + chrono::Duration::seconds(RESET_IS_NOW_SECONDS))
}

/// How near a reset is to count as now.
const RESET_IS_NOW_SECONDS: i64 = 90;

/// The verdict of a run whose limit cannot be waited out, in words.
pub(super) fn failed(verdict: Verdict, tries: u32) -> Verdict {
    let said = verdict.error.unwrap_or_default();
    let error = match tries {
        0 => format!("usage limit reached: {said}"),
        n => format!("usage limit reached, and still after {n} tries spaced out: {said}"),
    };
    Verdict { status: RunStatus::Failed, stop_reason: StopReason::UsageLimit, error: Some(error) }
}
