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

/// A short human duration: `850ms`, `42s`, `3m 05s`, `2h 10m`, `3d 4h`.
pub fn human_duration(d: chrono::Duration) -> String {
    let ms = d.num_milliseconds().max(0);
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms}ms"),
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// The local time of day of `at`, for "since 12:03".
pub fn clock(at: Timestamp) -> String {
    at.with_timezone(&chrono::Local).format("%H:%M").to_string()
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
    fn durations_read_naturally() {
        let d = chrono::Duration::milliseconds;
        assert_eq!(human_duration(d(850)), "850ms");
        assert_eq!(human_duration(d(42_000)), "42s");
        assert_eq!(human_duration(d(185_000)), "3m 05s");
        assert_eq!(human_duration(d(7_800_000)), "2h 10m");
    }
}
