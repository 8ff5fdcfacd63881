//! Timestamps as Corral stores and prints them.
//!
//! The store keeps RFC 3339 UTC strings with milliseconds
//! (`2026-11-22T10:19:36.879Z`): they sort as text, read well in `sqlite3`,
//! and are the `--json` contract as they are.

use chrono::{DateTime, SecondsFormat, Utc};

/// A point in time, UTC.
pub type Timestamp = DateTime<Utc>;

/// The longest duration Corral accepts anywhere (a timeout, a grace, a
/// wait): a hundred years. Longer ones are refused where they are read, with
/// a message, so no clock arithmetic can overflow.
pub const LONGEST: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);

/// Why a duration is refused, if it is longer than [`LONGEST`].
pub fn too_long(d: std::time::Duration) -> Option<String> {
    (d > LONGEST).then(|| format!("{} s is longer than the longest Corral accepts (100 years)", d.as_secs()))
}

/// Now, to the millisecond.
pub fn now() -> Timestamp {
    Utc::now()
}

/// Formats a timestamp the way the store and `--json` carry it.
pub fn format(at: Timestamp) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses a stored timestamp; `None` for anything else.
pub fn parse(text: &str) -> Option<Timestamp> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// A short human duration, rounded to its last unit shown (never cut: a
/// 2.99 s run is `3.0s`, not `2s`): `850ms`, `4.2s`, `42s`, `3m 05s`,
/// `2h 10m`, `3d 4h`. The window's `duration` (ui/kit.js) writes the same.
pub fn human_duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    let tenths = (ms + 50) / 100;
    let s = (ms + 500) / 1000;
    let m = (ms + 30_000) / 60_000;
    match ms {
        _ if ms < 1000 => format!("{ms}ms"),
        _ if tenths < 100 => format!("{}.{}s", tenths / 10, tenths % 10),
        _ if s < 60 => format!("{s}s"),
        _ if s < 3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ if m < 24 * 60 => format!("{}h {:02}m", m / 60, m % 60),
        _ => format!("{}d {}h", m / 1440, (m % 1440) / 60),
    }
}

/// An age given in whole units, said in words: `30 days`, `1 hour`,
/// `90 minutes` (`older than 30 days`); anything finer as humantime says it.
pub fn age_in_words(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let unit = [(86_400, "day"), (3600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(size, _)| secs > 0 && secs % size == 0 && d.subsec_nanos() == 0);
    match unit {
        Some((size, word)) => match secs / size {
            1 => format!("1 {word}"),
            n => format!("{n} {word}s"),
        },
        None => humantime::format_duration(d).to_string(),
    }
}

/// The local time of day of `at`, for "since 12:03", with its day when
/// it is not today ("tomorrow 22:29", "Tue 1 Dec 22:29"): a moment three
/// days off never reads as today's.
pub fn clock(at: Timestamp) -> String {
    clock_from(at, now())
}

/// [`clock`] as seen at `now`.
pub fn clock_from(at: Timestamp, now: Timestamp) -> String {
    let (at, today) = (at.with_timezone(&chrono::Local), now.with_timezone(&chrono::Local).date_naive());
    let time = at.format("%H:%M");
    match (at.date_naive() - today).num_days() {
        0 => time.to_string(),
        1 => format!("tomorrow {time}"),
        -1 => format!("yesterday {time}"),
        _ => at.format("%a %-d %b %H:%M").to_string(),
    }
}

/// How long ago `at` was, for tables: `just now`, `5s ago`, `3m ago`, ...
pub fn ago(at: Timestamp, now: Timestamp) -> String {
    let s = (now - at).num_seconds();
    match s {
        i64::MIN..=1 => "just now".to_string(),
        2..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_milliseconds() {
        let t = parse("2026-11-22T10:19:36.879Z").unwrap();
        assert_eq!(format(t), "2026-11-22T10:19:36.879Z");
    }

    #[test]
    fn an_age_is_said_in_its_whole_unit() {
        let s = std::time::Duration::from_secs;
        assert_eq!(age_in_words(s(30 * 86_400)), "30 days");
        assert_eq!(age_in_words(s(3600)), "1 hour");
        assert_eq!(age_in_words(s(90 * 60)), "90 minutes");
        assert_eq!(age_in_words(s(45)), "45s");
    }

    #[test]
    fn durations_read_naturally() {
        let d = chrono::Duration::milliseconds;
        assert_eq!(human_duration(d(850)), "850ms");
        assert_eq!(human_duration(d(42_000)), "42s");
        assert_eq!(human_duration(d(2_990)), "3.0s", "never cut to the second below");
        assert_eq!(human_duration(d(4_240)), "4.2s");
        assert_eq!(human_duration(d(9_960)), "10s");
        assert_eq!(human_duration(d(59_600)), "1m 00s");
        assert_eq!(human_duration(d(185_000)), "3m 05s");
        assert_eq!(human_duration(d(7_800_000)), "2h 10m");
    }

    #[test]
    fn a_time_not_today_says_its_day() {
        let now = now();
        let local = |at: Timestamp| at.with_timezone(&chrono::Local);
        assert_eq!(clock_from(now, now), local(now).format("%H:%M").to_string());
        let in_3_days = now + chrono::Duration::days(3);
        let said = clock_from(in_3_days, now);
        assert!(said.ends_with(&local(in_3_days).format(" %H:%M").to_string()), "{said}");
        assert!(said.contains(&local(in_3_days).format("%-d %b").to_string()), "{said}");
        assert!(clock_from(now + chrono::Duration::days(1), now).starts_with("tomorrow "));
    }
}
