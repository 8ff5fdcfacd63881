//! Usage limits: an agent whose plan's or provider's limit is reached says
//! so in its own words, sometimes with when it resets. A run that hits one
//! is neither failed nor running: it is paused (`pause_reason:
//! usage_limit`), holding no slot, and at the reset time it goes on in its
//! own session by itself. Without a reset time it is tried again after a
//! wait that grows, a few times, then fails with `stop_reason:
//! usage_limit`.
//!
//! The one rule for recognising a limit and reading its reset time from
//! each agent's words is here; what they say is kept in
//! `tests/captures/` (Codex: "You've hit your usage limit. … try again at
//! 5:40 PM."; Claude Code with an API key: "API Error: Request rejected
//! (429) · This request would exceed your account's rate limit. …";
//! Claude Code with a subscription: "You've hit your session limit ·
//! resets 3pm").

use std::time::Duration;

use chrono::{DateTime, Local, NaiveDate, NaiveTime, TimeZone};

use crate::adapter::Verdict;
use crate::run::{RunStatus, StopReason};

/// A usage limit an agent reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// What the agent said.
    pub said: String,
    /// When it resets, if the agent said.
    pub resets_at: Option<DateTime<Local>>,
}

/// The limit a failed turn's verdict reports, if its words say one.
pub fn recognise(verdict: &Verdict, now: DateTime<Local>) -> Option<Limit> {
    if verdict.status != RunStatus::Failed
        || !matches!(verdict.stop_reason, StopReason::ApiError | StopReason::AgentError | StopReason::UsageLimit)
    {
        return None;
    }
    let said = verdict.error.as_deref()?;
    let lower = said.to_lowercase().replace('\u{2019}', "'");
    let limited = verdict.stop_reason == StopReason::UsageLimit
        || [
            "usage limit",
            "rate limit",
            "rate_limit",
            "you've hit your",
            "quota exceeded",
            "resource_exhausted",
            "(429)",
            " 429 ",
        ]
        .iter()
        .any(|words| lower.contains(words));
    // A reset further off than any plan's window is not believed (an
    // agent's garbled words): tried again as with no reset said.
    let resets_at = reset_from(said, now).filter(|at| *at - now <= chrono::Duration::days(FURTHEST_RESET_DAYS));
    limited.then(|| Limit { said: said.to_string(), resets_at })
}

/// The furthest reset believed: a monthly plan's window, and a little.
const FURTHEST_RESET_DAYS: i64 = 32;

/// The longest wait between two tries of a limit that said no reset time,
/// whatever `[usage_limits] retry` and the doubling make of it.
const LONGEST_BACKOFF: Duration = Duration::from_secs(7 * 24 * 3600);

/// When a limit resets, from the agent's words: "try again at 5:40 PM",
/// "try again at Nov 26th, 2026 5:40 PM" (Codex), "resets 3pm",
/// "resets 5:30pm" (Claude Code), "try again in 30 seconds". A time of day
/// alone is its next coming, today or tomorrow, in the local time zone.
pub fn reset_from(said: &str, now: DateTime<Local>) -> Option<DateTime<Local>> {
    let lower = said.to_lowercase();
    for marker in ["try again in ", "retry in ", "resets in "] {
        if let Some(rest) = lower.split(marker).nth(1) {
            let words: String = rest.split(['.', ',', '·', ')']).next().unwrap_or("").trim().to_string();
            if let Ok(d) = humantime::parse_duration(&words.replace(" and ", " ")) {
                return now.checked_add_signed(chrono::Duration::from_std(d).ok()?);
            }
        }
    }
    for marker in ["try again at ", "resets at ", "resets "] {
        let Some(rest) = lower.split(marker).nth(1) else { continue };
        let rest = rest.trim_end_matches(['.', ' ']);
        if let Some(at) = dated(rest) {
            return Local.from_local_datetime(&at).earliest();
        }
        let time = rest.split(['·', '(', '\n']).next().unwrap_or("").trim().trim_end_matches('.').trim();
        if let Some(time) = time_of_day(time) {
            let today = now.date_naive().and_time(time);
            let at = Local.from_local_datetime(&today).earliest()?;
            // A time said to the minute may be this very minute, or the
            // last one ("5:40 PM" at 5:40:30 PM): the reset is now, not
            // tomorrow's.
            return Some(match now - at {
                past if past < chrono::Duration::zero() => at,
                past if past < chrono::Duration::minutes(2) => now,
                _ => at.checked_add_signed(chrono::Duration::days(1))?,
            });
        }
    }
    None
}

/// "nov 26th, 2026 5:40 pm" (Codex, when the reset is another day).
fn dated(text: &str) -> Option<chrono::NaiveDateTime> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [month, day, year, time, half, ..] = words.as_slice() else { return None };
    let day = day.trim_end_matches(',').trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let date = NaiveDate::parse_from_str(&format!("{month} {day} {}", year.trim_end_matches(',')), "%b %d %Y").ok()?;
    Some(date.and_time(time_of_day(&format!("{time} {half}"))?))
}

/// "5:40 pm", "3pm", "5:30pm", "17:40".
fn time_of_day(text: &str) -> Option<NaiveTime> {
    let text = text.trim().replace(' ', "");
    let hour_only = || {
        let (hour, half) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
        NaiveTime::parse_from_str(&format!("{hour}:00{half}"), "%I:%M%p").ok()
    };
    NaiveTime::parse_from_str(&text, "%I:%M%p")
        .ok()
        .or_else(hour_only)
        .or_else(|| NaiveTime::parse_from_str(&text, "%H:%M").ok())
}

/// How long to wait before trying again a run whose limit said no reset
/// time: `base`, doubled each time (1st try after `base`, then 2×, 4×).
pub fn backoff(base: Duration, tries_so_far: u32) -> Duration {
    base.saturating_mul(1 << tries_so_far.min(16)).min(LONGEST_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: u32, m: u32) -> DateTime<Local> {
        Local
            .from_local_datetime(&NaiveDate::from_ymd_opt(2026, 11, 25).unwrap().and_hms_opt(h, m, 0).unwrap())
            .unwrap()
    }

    fn failed(text: &str) -> Verdict {
        Verdict { status: RunStatus::Failed, stop_reason: StopReason::ApiError, error: Some(text.into()) }
    }

    #[test]
    fn each_agents_words_are_read_for_a_limit_and_its_reset() {
        let now = at(15, 10);
        let codex = "You\u{2019}ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 5:40 PM.";
        assert_eq!(recognise(&failed(codex), now).unwrap().resets_at, Some(at(17, 40)));
        let later = "You've hit your usage limit. … or try again at Nov 27th, 2026 9:05 AM.";
        let tomorrow = recognise(&failed(later), now).unwrap().resets_at.unwrap();
        assert_eq!(tomorrow.format("%Y-%m-%d %H:%M").to_string(), "2026-11-27 09:05");
        let claude = "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.";
        assert_eq!(recognise(&failed(claude), now), Some(Limit { said: claude.into(), resets_at: None }));
        let session = "You've hit your session limit · resets 3pm";
        // 3pm has passed at 15:10: tomorrow's.
        assert_eq!(recognise(&failed(session), now).unwrap().resets_at, Some(at(15, 0) + chrono::Duration::days(1)));
        assert_eq!(reset_from("You've hit your limit · resets 5:30pm (Europe/Berlin)", now), Some(at(17, 30)));
        assert_eq!(reset_from("rate limited, try again in 30s.", now), Some(now + chrono::Duration::seconds(30)));
        // Said to the minute, and that minute is now: the reset is now.
        assert_eq!(
            reset_from("try again at 3:10 PM.", now + chrono::Duration::seconds(40)),
            Some(now + chrono::Duration::seconds(40))
        );
        assert!(recognise(&failed("the model said no"), now).is_none());
        // Garbled or absurd resets panic nothing and are not believed.
        let absurd = recognise(&failed("usage limit reached, try again in 200000000 years"), now).unwrap();
        assert_eq!(absurd.resets_at, None);
        assert_eq!(reset_from("usage limit · resets 99:99pm", now), None);
        let done = Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None };
        assert!(recognise(&done, now).is_none());
    }

    #[test]
    fn a_limit_without_a_reset_waits_longer_each_time() {
        let base = Duration::from_secs(60);
        assert_eq!([0, 1, 2].map(|n| backoff(base, n).as_secs()), [60, 120, 240]);
        // However long the configured wait, never past a week (nor an overflow).
        assert_eq!(backoff(Duration::from_secs(100 * 365 * 86400), 16), LONGEST_BACKOFF);
    }
}
