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

use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveTime, TimeZone, Timelike};

use crate::adapter::Verdict;
use crate::run::{RunStatus, StopReason};

/// The prompt of the turn after a limit reset.
pub const CONTINUE: &str = "Your usage limit has reset. Continue where you stopped.";

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
    // A reset further off than any plan's window, or already past (a dated
    // reset read late: "try again at Nov 26th, 2026 5:40 PM" on the 28th),
    // is not believed: tried again as with no reset said, a few times.
    let resets_at = reset_from(said, now).filter(|at| {
        *at - now <= chrono::Duration::days(FURTHEST_RESET_DAYS)
            && now - *at <= chrono::Duration::minutes(PAST_RESET_MINUTES)
    });
    limited.then(|| Limit { said: said.to_string(), resets_at })
}

/// The furthest reset believed: a monthly plan's window, and a little.
const FURTHEST_RESET_DAYS: i64 = 32;

/// How long ago a reset may be and still be believed: one said to the
/// minute is read within that minute.
const PAST_RESET_MINUTES: i64 = 2;

/// The longest wait between two tries of a limit that said no reset time,
/// whatever `[usage_limits] retry` and the doubling make of it.
const LONGEST_BACKOFF: Duration = Duration::from_secs(7 * 24 * 3600);

/// When a limit resets, from the agent's words: "try again at 5:40 PM",
/// "try again at Nov 26th, 2026 5:40 PM" (Codex), "resets 3pm",
/// "resets 5:30pm (Europe/Berlin)", "resets Nov 29, 4pm (Europe/Rome)",
/// "resets Nov 29 at 7pm" (Claude Code: its session and weekly limits),
/// "try again in 30 seconds". A time is in the zone named after it, else
/// the local one; a time of day alone is its next coming, a day without a
/// year its next coming.
pub fn reset_from(said: &str, now: DateTime<Local>) -> Option<DateTime<Local>> {
    let lower = said.to_lowercase();
    for marker in ["try again in ", "retry in ", "resets in "] {
        if let Some(rest) = lower.split(marker).nth(1) {
            // Seconds with a fraction (Gemini: "Please retry in 57.48s").
            let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let unit = rest[number.len()..].trim_start();
            if number.contains('.') && (unit.starts_with('s') && !unit.starts_with("se") || unit.starts_with("sec")) {
                if let Ok(seconds) = number.parse::<f64>() {
                    let wait = Duration::try_from_secs_f64(seconds).ok()?;
                    return now.checked_add_signed(chrono::Duration::from_std(wait).ok()?);
                }
            }
            let words: String = rest.split(['.', ',', '·', ')']).next().unwrap_or("").trim().to_string();
            if let Ok(d) = humantime::parse_duration(&words.replace(" and ", " ")) {
                return now.checked_add_signed(chrono::Duration::from_std(d).ok()?);
            }
        }
    }
    for marker in ["try again at ", "resets at ", "resets "] {
        let Some(at) = said.to_lowercase().find(marker).map(|i| &said[i + marker.len()..]) else { continue };
        // "(Europe/Rome)": the zone the time is said in, as written.
        let zone = at.split_once('(').and_then(|(_, z)| z.split(')').next()).map(str::trim);
        let mut zone = match zone {
            Some(name) if name.contains('/') => Some(jiff::tz::TimeZone::get(name).ok()?),
            Some(name) => abbreviated_zone(name),
            None => None,
        };
        let rest = at.to_lowercase();
        let mut rest = rest.split(['·', '(', '\n']).next().unwrap_or("").trim().trim_end_matches(['.', ' ']);
        // "7pm EST": a zone said by its abbreviation after the time.
        if let Some((before, last)) = rest.rsplit_once(' ') {
            if let Some(named) = abbreviated_zone(last) {
                zone = Some(named);
                rest = before.trim_end();
            }
        }
        if let Some(at) = dated(rest) {
            return in_zone(at, zone.as_ref());
        }
        // A day without a year: this year's, or next year's once passed.
        if let Some((date, time)) = day_and_time(rest) {
            let this_year = today_in(now, zone.as_ref()).year();
            for year in [this_year, this_year + 1] {
                let Some(day) = NaiveDate::from_ymd_opt(year, date.month(), date.day()) else { continue };
                let at = in_zone(day.and_time(time), zone.as_ref())?;
                if now - at < chrono::Duration::minutes(2) {
                    return Some(at.max(now));
                }
            }
            return None;
        }
        if let Some(time) = time_of_day(rest) {
            let at = in_zone(today_in(now, zone.as_ref()).and_time(time), zone.as_ref())?;
            // A time said to the minute may be this very minute, or the
            // last one ("5:40 PM" at 5:40:30 PM): the reset is now, not
            // tomorrow's.
            return Some(match now - at {
                past if past < chrono::Duration::zero() => at,
                past if past < chrono::Duration::minutes(2) => now,
                _ => in_zone((today_in(now, zone.as_ref()) + chrono::Days::new(1)).and_time(time), zone.as_ref())?,
            });
        }
    }
    None
}

/// The moment wall-clock time `at` is in `zone` (else here).
fn in_zone(at: chrono::NaiveDateTime, zone: Option<&jiff::tz::TimeZone>) -> Option<DateTime<Local>> {
    let Some(zone) = zone else { return Local.from_local_datetime(&at).earliest() };
    let civil = jiff::civil::DateTime::new(
        i16::try_from(at.year()).ok()?,
        i8::try_from(at.month()).ok()?,
        i8::try_from(at.day()).ok()?,
        i8::try_from(at.hour()).ok()?,
        i8::try_from(at.minute()).ok()?,
        0,
        0,
    )
    .ok()?;
    let seconds = zone.to_ambiguous_timestamp(civil).compatible().ok()?.as_second();
    Local.timestamp_opt(seconds, 0).single()
}

/// Today's date in `zone` (else here), at `now`.
fn today_in(now: DateTime<Local>, zone: Option<&jiff::tz::TimeZone>) -> NaiveDate {
    let Some(zone) = zone else { return now.date_naive() };
    let Ok(then) = jiff::Timestamp::from_second(now.timestamp()) else { return now.date_naive() };
    let date = zone.to_datetime(then).date();
    NaiveDate::from_ymd_opt(date.year().into(), date.month() as u32, date.day() as u32).unwrap_or(now.date_naive())
}

/// "nov 29, 4pm", "nov 29 at 7pm" (Claude Code's weekly limit): the day
/// (its year to be decided) and the time.
fn day_and_time(text: &str) -> Option<(NaiveDate, NaiveTime)> {
    let words: Vec<&str> = text.split_whitespace().filter(|w| *w != "at").collect();
    let [month, day, time @ ..] = words.as_slice() else { return None };
    let day = day.trim_end_matches(',').trim_end_matches(|c: char| c.is_ascii_alphabetic());
    // A leap year, so that Feb 29 is a day; "Nov" or "November".
    let text = format!("{month} {day} 2024");
    let date =
        NaiveDate::parse_from_str(&text, "%b %d %Y").or_else(|_| NaiveDate::parse_from_str(&text, "%B %d %Y")).ok()?;
    Some((date, time_of_day(&time.join(" "))?))
}

/// "nov 26th, 2026 5:40 pm" (Codex, when the reset is another day).
fn dated(text: &str) -> Option<chrono::NaiveDateTime> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [month, day, year, time, half, ..] = words.as_slice() else { return None };
    let day = day.trim_end_matches(',').trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let date = NaiveDate::parse_from_str(&format!("{month} {day} {}", year.trim_end_matches(',')), "%b %d %Y").ok()?;
    Some(date.and_time(time_of_day(&format!("{time} {half}"))?))
}

/// The zone of an abbreviation an agent may say after a time ("7pm EST"):
/// the common ones whose meaning is one offset; an ambiguous one (IST) is
/// none, and the time is read as local.
fn abbreviated_zone(word: &str) -> Option<jiff::tz::TimeZone> {
    let hours: i8 = match word.trim().to_ascii_uppercase().as_str() {
        "UTC" | "GMT" | "Z" => 0,
        "EST" => -5,
        "EDT" | "AST" => -4,
        "CST" => -6,
        "CDT" => -5,
        "MST" => -7,
        "MDT" => -6,
        "PST" => -8,
        "PDT" => -7,
        "CET" | "BST" | "WAT" => 1,
        "CEST" | "EET" => 2,
        "EEST" | "MSK" => 3,
        "JST" | "KST" => 9,
        "AEST" => 10,
        "AEDT" => 11,
        _ => return None,
    };
    Some(jiff::tz::TimeZone::fixed(jiff::tz::Offset::constant(hours)))
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
        // In the zone it names: 5:30pm in Berlin is 16:30 UTC in November.
        let utc = |t: Option<DateTime<Local>>| t.map(|t| t.with_timezone(&chrono::Utc).to_rfc3339());
        let berlin = reset_from("You've hit your limit · resets 5:30pm (Europe/Berlin)", now);
        assert_eq!(utc(berlin).unwrap()[11..16], *"16:30");
        // Claude Code's weekly limit: a day without a year, in its zone or here.
        let weekly = reset_from("You've hit your weekly limit · resets Nov 29, 4pm (Europe/Rome)", now);
        assert_eq!(utc(weekly).unwrap()[..16], *"2026-11-29T15:00");
        let weekly = reset_from("You've hit your weekly limit · resets Nov 29 at 7pm", now).unwrap();
        assert_eq!(weekly.format("%Y-%m-%d %H:%M").to_string(), "2026-11-29 19:00");
        // The month written whole; a zone said by its abbreviation.
        let whole = reset_from("You've hit your weekly limit · resets November 29 at 7pm", now).unwrap();
        assert_eq!(whole.format("%Y-%m-%d %H:%M").to_string(), "2026-11-29 19:00");
        let eastern = reset_from("You've hit your session limit · resets 7pm EST", now);
        assert_eq!(utc(eastern).unwrap()[11..16], *"00:00");
        let pacific = reset_from("You've hit your weekly limit · resets Nov 29, 4pm (PST)", now);
        assert_eq!(utc(pacific).unwrap()[..16], *"2026-11-30T00:00");
        let utc_said = reset_from("limit reached · resets 11pm UTC", now);
        assert_eq!(utc(utc_said).unwrap()[11..16], *"23:00");
        // A day already past this year is next year's.
        let next = reset_from("limit reached · resets Jan 3 at 7pm", now).unwrap();
        assert_eq!(next.format("%Y-%m-%d").to_string(), "2027-01-03");
        assert_eq!(reset_from("limit · resets 5pm (Not/AZone)", now), None);
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
        // Gemini's seconds with a fraction.
        let gemini = reset_from("Quota exceeded. Please retry in 57.48s.", now).unwrap();
        assert_eq!((gemini - now).num_milliseconds(), 57_480);
        // A dated reset already past (read two days late) is not believed:
        // tried again a few times, as with no reset said, never every 5 s.
        let late = recognise(&failed("You've hit your usage limit. Try again at Nov 23rd, 2026 5:40 PM."), now);
        assert_eq!(late.unwrap().resets_at, None);
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
