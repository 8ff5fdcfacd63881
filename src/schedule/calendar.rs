//! Calendar phrases (`weekdays 09:00`, `mon,wed 18:30`, `daily 7am`,
//! `hourly`, `sundays noon`, `monthly 09:00`) read into the cron
//! expression they mean, which `croner` then parses and evaluates in the
//! user's time zone, daylight-saving jumps included.
//!
//! No maintained crate reads such phrases (one that was tried read
//! `weekdays 09:00` as every day at 09:00, silently), so this is a small,
//! closed vocabulary: every word must be understood or the phrase is
//! refused, naming the word and showing what can be written. Nothing is
//! guessed. What a phrase was read as is shown back in cron's own words
//! (`When::describe`), so a reading the user did not mean is seen at once.

use std::collections::BTreeSet;

/// Why a calendar phrase cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{phrase}': {why}; write e.g. --at 'weekdays 09:00', 'mon,wed,fri 18:30', 'daily 7am', 'sundays noon', 'monthly 09:00', 'hourly', 'every 2h' (or --cron)")]
pub struct PhraseError {
    /// The phrase as written.
    pub phrase: String,
    /// What in it is not understood.
    pub why: String,
}

/// A time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TimeOfDay {
    hour: u32,
    minute: u32,
}

/// Days of the week as cron numbers them (0 is Sunday).
const DAY_NAMES: [(&str, u32); 7] =
    [("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)];

/// The cron expression (five fields) a phrase means.
pub fn to_cron(phrase: &str) -> Result<String, PhraseError> {
    let refuse = |why: String| PhraseError { phrase: phrase.to_string(), why };
    let lower = phrase.trim().to_lowercase();
    // Commas separate list items; `and`, `at`, `on`, `every`, `each` and
    // `the` only join words (`every monday at 9am`, `on the 1st`).
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty() && !matches!(*w, "and" | "at" | "on" | "every" | "each" | "the"))
        .collect();
    if words.is_empty() {
        return Err(refuse("says no day or time".into()));
    }

    let mut week_days: BTreeSet<u32> = BTreeSet::new();
    let mut month_days: BTreeSet<u32> = BTreeSet::new();
    let mut times: Vec<TimeOfDay> = Vec::new();
    let mut hourly = false;
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        // `9 am`, `9:30 pm`: a meridiem as a word of its own.
        let joined;
        let word = match words.get(i + 1).copied() {
            Some(next @ ("am" | "pm" | "a.m." | "p.m.")) if word.chars().all(|c| c.is_ascii_digit() || c == ':') => {
                i += 1;
                joined = format!("{word}{next}");
                joined.as_str()
            }
            _ => word,
        };
        i += 1;
        match word {
            "daily" | "day" | "days" | "everyday" => week_days.extend(0..7),
            "weekdays" | "weekday" | "workdays" | "workday" => week_days.extend(1..6),
            "weekends" | "weekend" => week_days.extend([0, 6]),
            "hourly" | "hour" => hourly = true,
            "monthly" | "month" => {
                month_days.insert(1);
            }
            _ => {
                if let Some(days) = day_range(word) {
                    week_days.extend(days);
                } else if let Some(day) = ordinal(word) {
                    if !(1..=31).contains(&day) {
                        return Err(refuse(format!("there is no day {word} of a month")));
                    }
                    month_days.insert(day);
                } else if let Some(time) = time_of_day(word).map_err(|why| refuse(format!("'{word}' {why}")))? {
                    times.push(time);
                } else {
                    return Err(refuse(format!("'{word}' is not understood")));
                }
            }
        }
    }

    if !week_days.is_empty() && !month_days.is_empty() {
        // Cron fires when either matches: never what "mondays on the 1st" means.
        return Err(refuse("days of the week and days of the month together cannot be one schedule".into()));
    }
    let (minutes, hours) = if hourly {
        if !times.is_empty() {
            return Err(refuse("'hourly' takes no time of day: write 'hourly' or a cron such as '15 * * * *'".into()));
        }
        ("0".to_string(), "*".to_string())
    } else {
        let minutes: BTreeSet<u32> = times.iter().map(|t| t.minute).collect();
        let hours: BTreeSet<u32> = times.iter().map(|t| t.hour).collect();
        if times.is_empty() {
            return Err(refuse("says no time of day (09:00, 7am, noon)".into()));
        }
        if minutes.len() > 1 && hours.len() > 1 {
            return Err(refuse(
                "times at different hours and different minutes cannot be one schedule: add one schedule per time"
                    .into(),
            ));
        }
        (list(&minutes), list(&hours))
    };
    let month_field = if month_days.is_empty() { "*".to_string() } else { list(&month_days) };
    let week_field = if week_days.is_empty() || week_days.len() == 7 { "*".to_string() } else { list(&week_days) };
    Ok(format!("{minutes} {hours} {month_field} * {week_field}"))
}

/// A cron list from a set of numbers, three or more in a row as a range
/// (`1-5`, `0,6`, `1,3,5`), so cron's own words say "Monday through Friday".
fn list(values: &BTreeSet<u32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut values = values.iter().copied().peekable();
    while let Some(first) = values.next() {
        let mut last = first;
        while values.peek() == Some(&(last + 1)) {
            last = values.next().unwrap_or(last);
        }
        match last - first {
            0 => parts.push(first.to_string()),
            1 => parts.extend([first.to_string(), last.to_string()]),
            _ => parts.push(format!("{first}-{last}")),
        }
    }
    parts.join(",")
}

/// A day of the week by name (`mon`, `monday`, `mondays`), or a range of
/// them (`mon-fri`, `mon..fri`, wrapping past Saturday: `fri-mon`).
fn day_range(word: &str) -> Option<Vec<u32>> {
    let split = word.split_once("..").or_else(|| word.split_once('-'));
    match split {
        Some((from, to)) => {
            let (from, to) = (day_of_week(from)?, day_of_week(to)?);
            let len = (to + 7 - from) % 7 + 1;
            Some((0..len).map(|k| (from + k) % 7).collect())
        }
        None => day_of_week(word).map(|d| vec![d]),
    }
}

/// A day of the week: its three letters, its name, or its name plural.
fn day_of_week(word: &str) -> Option<u32> {
    let word = word.strip_suffix('s').filter(|w| w.len() >= 3).unwrap_or(word);
    DAY_NAMES.iter().find_map(|(short, n)| {
        let full = full_day_name(*n);
        (word == *short || word == full || (word.len() >= 3 && full.starts_with(word) && word.len() <= full.len()))
            .then_some(*n)
    })
}

fn full_day_name(n: u32) -> &'static str {
    ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"][n as usize]
}

/// A day of the month written as an ordinal: `1st`, `2nd`, `15th`.
fn ordinal(word: &str) -> Option<u32> {
    let digits = ["st", "nd", "rd", "th"].iter().find_map(|s| word.strip_suffix(s))?;
    (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())).then(|| digits.parse().ok())?
}

/// A time of day: `09:00`, `9:30`, `7am`, `7:15pm`, `noon`, `midnight`.
/// `Ok(None)`: not a time at all; `Err`: a time that cannot be.
fn time_of_day(word: &str) -> Result<Option<TimeOfDay>, String> {
    match word {
        "noon" | "midday" => return Ok(Some(TimeOfDay { hour: 12, minute: 0 })),
        "midnight" => return Ok(Some(TimeOfDay { hour: 0, minute: 0 })),
        _ => {}
    }
    let (clock, meridiem) = match word.strip_suffix("am").or_else(|| word.strip_suffix("a.m.")) {
        Some(clock) => (clock, Some(false)),
        None => match word.strip_suffix("pm").or_else(|| word.strip_suffix("p.m.")) {
            Some(clock) => (clock, Some(true)),
            None => (word, None),
        },
    };
    let (hour, minute) = match clock.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return Err("is not a time: write minutes with two digits (09:05)".into()),
        // A bare number is an hour only with am or pm: `9` alone could be
        // a day, an hour, a count.
        None if meridiem.is_some() => (clock, "00"),
        None => return Ok(None),
    };
    let number = |s: &str| {
        (!s.is_empty() && s.len() <= 2 && s.chars().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let (Some(hour), Some(minute)) = (number(hour), number(minute)) else {
        return Ok(None);
    };
    let hour = match meridiem {
        Some(pm) if (1..=12).contains(&hour) => hour % 12 + if pm { 12 } else { 0 },
        Some(_) => return Err("is not a time: with am or pm the hour is 1 to 12".into()),
        None => hour,
    };
    if hour > 23 || minute > 59 {
        return Err("is not a time of day".into());
    }
    Ok(Some(TimeOfDay { hour, minute }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_read_as_the_cron_they_mean() {
        for (phrase, cron) in [
            ("weekdays 09:00", "0 9 * * 1-5"),
            ("Weekdays at 9am", "0 9 * * 1-5"),
            ("every weekday at 9:30 am", "30 9 * * 1-5"),
            ("daily 07:15", "15 7 * * *"),
            ("every day at midnight", "0 0 * * *"),
            ("mon,wed,fri 18:30", "30 18 * * 1,3,5"),
            ("Monday and Thursday 6pm", "0 18 * * 1,4"),
            ("mon-fri 08:00", "0 8 * * 1-5"),
            ("fri..mon 10:00", "0 10 * * 0,1,5,6"),
            ("sundays noon", "0 12 * * 0"),
            ("weekends 10am", "0 10 * * 0,6"),
            ("hourly", "0 * * * *"),
            ("hourly on weekdays", "0 * * * 1-5"),
            ("monthly 09:00", "0 9 1 * *"),
            ("on the 1st and 15th at 08:00", "0 8 1,15 * *"),
            ("weekdays 09:00, 13:00, 17:00", "0 9,13,17 * * 1-5"),
            ("daily 12am", "0 0 * * *"),
            ("daily 12pm", "0 12 * * *"),
        ] {
            assert_eq!(to_cron(phrase).as_deref(), Ok(cron), "{phrase}");
            // Every reading is a cron expression croner takes.
            assert!(crate::schedule::When::cron(cron).is_ok(), "{cron}");
        }
    }

    #[test]
    fn what_is_not_understood_is_refused_and_named() {
        for (phrase, said) in [
            ("tomorrow 9am", "'tomorrow' is not understood"),
            ("every other tuesday 9:00", "'other' is not understood"),
            ("weekdays", "says no time of day"),
            ("weekdays 9", "'9' is not understood"),
            ("weekdays 25:00", "'25:00' is not a time of day"),
            ("daily 13pm", "the hour is 1 to 12"),
            ("daily 9:5", "two digits"),
            ("09:00 and 17:30", "add one schedule per time"),
            ("mondays on the 1st 09:00", "days of the week and days of the month"),
            ("the 32nd 09:00", "no day 32nd"),
            ("hourly 09:00", "takes no time of day"),
            ("", "says no day or time"),
        ] {
            let e = to_cron(phrase).unwrap_err();
            assert!(e.why.contains(said), "{phrase}: {}", e.why);
            assert!(e.to_string().contains("--at 'weekdays 09:00'"), "{e}");
        }
    }
}
