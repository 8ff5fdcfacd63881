//! When a schedule is due: a cron expression in the user's time zone
//! (parsed and evaluated by `croner`, daylight-saving jumps included), a
//! calendar phrase (`weekdays 09:00`, read into cron by `calendar`), or a
//! fixed period from the schedule's creation (`every 2h`, read by
//! `humantime`).
//!
//! A slot is a due time. A schedule's first slot comes after its creation;
//! a fire takes the latest slot that is due and not taken, so a schedule
//! that missed several slots (the laptop asleep, nothing running) fires
//! once on wake, not once per slot.

use std::str::FromStr;
use std::time::Duration;

use chrono::{Local, NaiveDateTime, SubsecRound, TimeZone};

use crate::text::time::Timestamp;

/// When a schedule's slots are.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// A cron expression (5 fields, or 6 with seconds first), in the local
    /// time zone of the machine that fires it (`TZ`, else the system's).
    Cron(String),
    /// Every so many seconds, counted from the schedule's creation.
    EverySecs(u64),
    /// A calendar phrase as written (`weekdays 09:00`), due when the cron
    /// expression it reads as is.
    At(String),
}

/// Why a schedule's time cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum WhenError {
    /// The cron expression does not parse.
    #[error(
        "'{expr}' is not a cron expression ({why}): write five fields, e.g. --cron '0 9 * * 1-5' for weekdays at 09:00"
    )]
    Cron { expr: String, why: String },
    /// The period does not parse, or is not a whole number of seconds.
    #[error("'{text}' is not a period of whole seconds: write e.g. --every 30m, --every 2h, --every 1d")]
    Every { text: String },
    /// The cron expression names no time that comes.
    #[error("'{expr}' names no time that comes (no such day), so it would never fire: check its day and month")]
    Never { expr: String },
    /// The calendar phrase is not understood.
    #[error(transparent)]
    Phrase(#[from] super::calendar::PhraseError),
    /// None, or more than one, of cron, period and phrase was given.
    #[error(
        "say when with one of {cron}, {every} or {at}: e.g. {at} 'weekdays 09:00', {every} 2h, {cron} '0 9 * * 1-5'"
    )]
    Choose { cron: &'static str, every: &'static str, at: &'static str },
    /// The period is longer than Corral takes.
    #[error("'{text}' is longer than the longest period Corral takes (100 years): write e.g. --every 1d")]
    TooLong { text: String },
}

impl When {
    /// A cron expression, checked.
    pub fn cron(expr: &str) -> Result<When, WhenError> {
        let when = croner::Cron::from_str(expr)
            .map_err(|e| WhenError::Cron { expr: expr.to_string(), why: e.to_string() })
            .map(|_| When::Cron(expr.trim().to_string()))?;
        // One that names no day that comes (`0 0 31 2 *`) would never fire.
        let now = crate::text::time::now();
        match when.next_after(now, now) {
            Some(_) => Ok(when),
            None => Err(WhenError::Never { expr: expr.to_string() }),
        }
    }

    /// A period such as `2h` or `90s`, at least a second.
    pub fn every(text: &str) -> Result<When, WhenError> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) if crate::text::time::too_long(d).is_some() => Err(WhenError::TooLong { text: text.to_string() }),
            Ok(d) if d >= Duration::from_secs(1) && d.subsec_nanos() == 0 => Ok(When::EverySecs(d.as_secs())),
            _ => Err(WhenError::Every { text: text.to_string() }),
        }
    }

    /// A calendar phrase (`weekdays 09:00`, `mon,wed 18:30`), or a period
    /// said as one (`every 2h`).
    pub fn at(phrase: &str) -> Result<When, WhenError> {
        // Any case, as calendar phrases are read: `Every 2h`.
        let words = phrase.trim();
        if let Some(period) = words.get(..6).filter(|w| w.eq_ignore_ascii_case("every ")).map(|_| &words[6..]) {
            if humantime::parse_duration(period.trim()).is_ok() {
                return When::every(period);
            }
        }
        super::calendar::to_cron(phrase)?;
        Ok(When::At(phrase.trim().to_string()))
    }

    /// The one rule for saying when, wherever it is said (the CLI, MCP, a
    /// preset's `schedule:`): exactly one of a cron expression, a period
    /// and a calendar phrase. `names` are how the caller calls the three
    /// (`--cron`, `cron:`…), for the error.
    pub fn choose(
        cron: Option<&str>,
        every: Option<&str>,
        at: Option<&str>,
        names: [&'static str; 3],
    ) -> Result<When, WhenError> {
        match (cron, every, at) {
            (Some(expr), None, None) => When::cron(expr),
            (None, Some(period), None) => When::every(period),
            (None, None, Some(phrase)) => When::at(phrase),
            _ => Err(WhenError::Choose { cron: names[0], every: names[1], at: names[2] }),
        }
    }

    /// The cron expression a cron schedule or a phrase is due by.
    fn cron_expr(&self) -> Option<croner::Cron> {
        let expr = match self {
            When::Cron(expr) => expr.clone(),
            When::At(phrase) => super::calendar::to_cron(phrase).ok()?,
            When::EverySecs(_) => return None,
        };
        croner::Cron::from_str(&expr).ok()
    }

    /// The schedule in words: `cron 0 9 * * 1-5 (At 09:00, on Monday
    /// through Friday.)`, `weekdays 09:00 (At 09:00, on Monday, Tuesday…)`,
    /// `every 2h`.
    pub fn describe(&self) -> String {
        match self {
            When::Cron(expr) => match self.cron_expr() {
                Some(cron) => format!("cron {expr} ({})", cron.describe()),
                None => format!("cron {expr}"),
            },
            When::At(phrase) => match self.cron_expr() {
                Some(cron) => format!("{phrase} ({})", cron.describe()),
                None => phrase.clone(),
            },
            When::EverySecs(secs) => format!("every {}", humantime::format_duration(Duration::from_secs(*secs))),
        }
    }

    /// The latest slot at or before `now` that comes after the schedule's
    /// creation (`created`) and after `after` (the last slot fired), if
    /// one is due. A cron slot must also come after the last one's
    /// wall-clock time (`after_local`, where it fired): each wall-clock
    /// slot fires once, even across a change of time zone.
    pub fn latest_due(
        &self,
        created: Timestamp,
        after: Option<Timestamp>,
        after_local: Option<NaiveDateTime>,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let slot = match self {
            When::Cron(_) | When::At(_) => {
                let cron = self.cron_expr()?;
                let now = Local.from_utc_datetime(&now.naive_utc()).trunc_subsecs(0);
                let mut slot = cron.find_previous_occurrence(&now, true).ok()?;
                // Searching back across a wall-clock hour that happens
                // twice can land on its later face, after `now`.
                for _ in 0..3 {
                    if slot <= now {
                        break;
                    }
                    let faces = match Local.from_local_datetime(&slot.naive_local()) {
                        chrono::LocalResult::Ambiguous(a, b) => [a, b].into_iter().filter(|t| *t <= now).max(),
                        _ => None,
                    };
                    slot = match faces {
                        Some(face) => face,
                        None => cron.find_previous_occurrence(&slot, false).ok()?,
                    };
                }
                // The second face of an hour that happens twice is the
                // same slot as the first, and a slot at a wall-clock time
                // already fired elsewhere (the user flew west) is too.
                let last = after_local.or_else(|| after.map(|a| Local.from_utc_datetime(&a.naive_utc()).naive_local()));
                if slot > now || last.is_some_and(|last| slot.naive_local() <= last) {
                    return None;
                }
                slot.to_utc()
            }
            When::EverySecs(secs) => {
                // Slots fall on whole seconds from the second it was made.
                let anchor = created.trunc_subsecs(0);
                let period = i64::try_from((*secs).max(1)).ok()?;
                let periods = now.signed_duration_since(anchor).num_seconds() / period;
                if periods < 1 {
                    return None;
                }
                anchor.checked_add_signed(chrono::Duration::try_seconds(periods.checked_mul(period)?)?)?
            }
        };
        (slot > created && after.is_none_or(|after| slot > after)).then_some(slot)
    }

    /// A slot's wall-clock time here, as kept with its fire (a cron
    /// schedule's; a period's slots are absolute).
    pub fn local_of(&self, slot: Timestamp) -> Option<NaiveDateTime> {
        match self {
            When::Cron(_) | When::At(_) => Some(Local.from_utc_datetime(&slot.naive_utc()).naive_local()),
            When::EverySecs(_) => None,
        }
    }

    /// The first slot after `t` (and after the schedule's creation).
    pub fn next_after(&self, created: Timestamp, t: Timestamp) -> Option<Timestamp> {
        let t = t.max(created);
        match self {
            When::Cron(_) | When::At(_) => {
                let cron = self.cron_expr()?;
                let mut from = Local.from_utc_datetime(&t.naive_utc()).trunc_subsecs(0);
                // A wall-clock time that happens twice (the night clocks go
                // back) is one slot, fired at its first face (as
                // `latest_due` does): that face is announced, and the
                // second face is never a next fire.
                for _ in 0..3 {
                    let next = cron.find_next_occurrence(&from, false).ok()?;
                    // chrono gives the two faces in no order of time.
                    let (first, second) = match Local.from_local_datetime(&next.naive_local()) {
                        chrono::LocalResult::Ambiguous(a, b) => (a.min(b), a.max(b)),
                        _ => return Some(next.to_utc()),
                    };
                    if first > from {
                        return Some(first.to_utc());
                    }
                    from = second;
                }
                None
            }
            When::EverySecs(secs) => {
                let anchor = created.trunc_subsecs(0);
                let period = i64::try_from((*secs).max(1)).ok()?;
                let periods = t.signed_duration_since(anchor).num_seconds() / period + 1;
                // A slot past the end of time is never.
                anchor.checked_add_signed(chrono::Duration::try_seconds(periods.checked_mul(period)?)?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_said_as_a_phrase_is_a_period_in_any_case() {
        assert_eq!(When::at("every 2h").unwrap(), When::every("2h").unwrap());
        assert_eq!(When::at("Every 2h").unwrap(), When::every("2h").unwrap());
        assert_eq!(When::at("EVERY 90m").unwrap(), When::every("90m").unwrap());
        assert!(matches!(When::at("Weekdays 09:00").unwrap(), When::At(_)));
    }

    fn at(text: &str) -> Timestamp {
        crate::text::time::parse(text).unwrap()
    }

    #[test]
    fn a_period_counts_from_creation_and_many_missed_slots_are_one() {
        let every = When::every("10m").unwrap();
        let created = at("2026-11-25T10:00:00Z");
        assert_eq!(every.latest_due(created, None, None, at("2026-11-25T10:09:59Z")), None);
        assert_eq!(every.latest_due(created, None, None, at("2026-11-25T10:10:00Z")), Some(at("2026-11-25T10:10:00Z")));
        // Asleep for hours: one slot, the latest.
        let last = Some(at("2026-11-25T10:10:00Z"));
        assert_eq!(every.latest_due(created, last, None, at("2026-11-25T13:05:00Z")), Some(at("2026-11-25T13:00:00Z")));
        assert_eq!(every.latest_due(created, Some(at("2026-11-25T13:00:00Z")), None, at("2026-11-25T13:05:00Z")), None);
        assert_eq!(every.next_after(created, at("2026-11-25T13:05:00Z")), Some(at("2026-11-25T13:10:00Z")));
    }

    #[test]
    fn a_period_made_mid_second_is_due_on_the_second_it_names() {
        let every = When::every("1s").unwrap();
        let created = at("2026-11-25T10:00:00.700Z");
        assert_eq!(every.next_after(created, created), Some(at("2026-11-25T10:00:01Z")));
        assert_eq!(
            every.latest_due(created, None, None, at("2026-11-25T10:00:01.001Z")),
            Some(at("2026-11-25T10:00:01Z"))
        );
    }

    #[test]
    fn bad_times_say_what_to_write() {
        assert!(When::cron("every day").unwrap_err().to_string().contains("--cron '0 9 * * 1-5'"));
        assert!(When::every("0s").unwrap_err().to_string().contains("--every 30m"));
        assert!(When::every("soon").is_err());
    }
}
