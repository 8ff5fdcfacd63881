//! A systemd user timer per schedule (`[schedules] systemd_timers = true`
//! in config.toml): the schedule's slots fire with no Corral process
//! running, and a slot missed while the machine was off or asleep fires
//! once when it wakes (`Persistent=true`).
//!
//! The timer lists the schedule's next slots as exact times
//! (`OnCalendar=2026-11-26 03:00:00 UTC`, one line each), computed here
//! with the same rules every firer uses, so cron expressions, periods and
//! daylight-saving jumps need no translation; each fire writes the list
//! again from its own time. The service runs `corral schedule fire NAME`,
//! which fires only a slot that is due and that no other firer took.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Schedule, ScheduleError};
use crate::home::Home;
use crate::store::Store;
use crate::text::time::Timestamp;

/// How many slots ahead a timer lists.
const SLOTS_AHEAD: usize = 20;
/// The prefix of the units Corral writes.
const PREFIX: &str = "corral-schedule-";

/// The folder of the user's own units (`~/.config/systemd/user`).
pub fn units_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|d| d.config_dir().join("systemd").join("user"))
}

/// The unit files of `schedule`: the service, the timer.
pub fn units(schedule: &Schedule, corral: &Path, now: Timestamp) -> (String, String) {
    // Said in a unit file, a `%` would be one of systemd's specifiers.
    let name = &schedule.name.replace('%', "%%");
    let mut env = String::new();
    // The timer's firer must read the same store, in the same time zone.
    for key in ["CORRAL_HOME", "TZ"] {
        if let Some(value) = std::env::var_os(key) {
            env.push_str(&format!("Environment={}\n", quoted(&format!("{key}={}", value.to_string_lossy()))));
        }
    }
    let service = format!(
        "# Written by Corral for schedule {name}; `corral schedule timers` writes it again.\n\
         [Unit]\nDescription=Corral schedule {name}: fire it if a slot is due\n\n\
         [Service]\nType=oneshot\n{env}ExecStart={} schedule fire {}\n",
        quoted(&corral.to_string_lossy()),
        quoted(&schedule.name)
    );
    let mut slots = String::new();
    let created = schedule.created();
    let mut at = now;
    for _ in 0..SLOTS_AHEAD {
        let Some(next) = schedule.settings.when.next_after(created, at) else { break };
        slots.push_str(&format!("OnCalendar={} UTC\n", next.format("%Y-%m-%d %H:%M:%S")));
        at = next;
    }
    let timer = format!(
        "# Written by Corral for schedule {name}: its next slots; each fire writes them again.\n\
         [Unit]\nDescription=Corral schedule {name}\n\n\
         [Timer]\n{slots}Persistent=true\nAccuracySec=1s\n\n\
         [Install]\nWantedBy=timers.target\n"
    );
    (service, timer)
}

/// What keeping a schedule's timer did.
#[derive(Debug, Default)]
pub struct Kept {
    /// Unit files written (they changed).
    pub written: Vec<PathBuf>,
    /// Unit files removed (their schedule is gone).
    pub removed: Vec<PathBuf>,
    /// Why the user's systemd was not told, if it was not (none running
    /// for this user, say): the files are there for its next start.
    pub not_loaded: Option<String>,
}

/// Keeps every schedule's timer in step with the store, when config.toml
/// asks for timers (`None` when it does not): what every way of adding,
/// changing or firing a schedule does after (the CLI, MCP, a firer taking
/// up a preset's `schedule:`). `corral` is the CLI the timers run.
pub fn follow(store: &Store, corral: &Path) -> Result<Option<Kept>, ScheduleError> {
    if !crate::home::config::Config::load(store.home())?.systemd_timers {
        return Ok(None);
    }
    keep(&super::all(store)?, corral, store.home()).map(Some).map_err(ScheduleError::Timers)
}

/// Writes the timers of `schedules` (those whose files changed) and
/// removes Corral's timers of schedules not among them, then tells the
/// user's systemd (reload, enable and start the timers).
pub fn keep(schedules: &[Schedule], corral: &Path, home: &Home) -> io::Result<Kept> {
    let dir = units_dir().ok_or_else(|| io::Error::other("no home folder to keep systemd units in"))?;
    std::fs::create_dir_all(&dir)?;
    let mut kept = Kept::default();
    let now = super::now();
    let prefix = prefix_of(home);
    for schedule in schedules {
        let (service, timer) = units(schedule, corral, now);
        for (file, text) in [
            (unit(&dir, &prefix, &schedule.name, "service"), service),
            (unit(&dir, &prefix, &schedule.name, "timer"), timer),
        ] {
            if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
                write_atomically(&file, &text)?;
                kept.written.push(file);
            }
        }
    }
    // Only this installation's: another `CORRAL_HOME`'s timers are its own.
    let ours = format!("{}={}", crate::home::HOME_ENV, home.data_dir().display());
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let file_name = entry.file_name();
        let Some(file) = file_name.to_str() else { continue };
        let Some(unit_name) = file.strip_suffix(".timer").or_else(|| file.strip_suffix(".service")) else { continue };
        let gone = match unit_name.strip_prefix(&prefix) {
            Some(escaped) => !schedules.iter().any(|s| escape(&s.name) == escaped),
            // A unit an earlier Corral wrote (no installation in its name)
            // is this one's if it names this installation's store.
            None => {
                unit_name.starts_with(PREFIX)
                    && !unit_name[PREFIX.len()..].contains('-')
                    && names_home(&entry.path(), &ours, home.env_value().is_none())
            }
        };
        if gone {
            std::fs::remove_file(entry.path())?;
            kept.removed.push(entry.path());
        }
    }
    if !kept.written.is_empty() || !kept.removed.is_empty() {
        let timers: Vec<String> = schedules.iter().map(|s| format!("{prefix}{}.timer", escape(&s.name))).collect();
        kept.not_loaded = load(&timers).err();
    }
    Ok(kept)
}

/// The start of this installation's unit names: Corral's, then 8 hex
/// digits of its data folder's path, so two installations (`CORRAL_HOME`)
/// keep their own timers.
fn prefix_of(home: &Home) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(home.data_dir().as_os_str().as_encoded_bytes());
    let short: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{short}-")
}

/// Whether the unit file at `path` is for the installation `ours`
/// (`CORRAL_HOME=…`), or names none and this is the default one.
fn names_home(path: &Path, ours: &str, default: bool) -> bool {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    match text.lines().find(|l| l.contains(crate::home::HOME_ENV)) {
        Some(line) => line.contains(ours),
        None => default,
    }
}

fn unit(dir: &Path, prefix: &str, name: &str, kind: &str) -> PathBuf {
    dir.join(format!("{prefix}{}.{kind}", escape(name)))
}

/// A schedule's name as a unit name may hold it: what systemd does not
/// take (`+`, `%`, a space, …) written as `\xNN`, as `systemd-escape` does.
fn escape(name: &str) -> String {
    let mut escaped = String::with_capacity(name.len());
    for byte in name.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b':' | b'_' | b'.' | b'-'
                if !(byte == b'.' && escaped.is_empty()) =>
            {
                escaped.push(byte as char)
            }
            _ => escaped.push_str(&format!("\\x{byte:02x}")),
        }
    }
    escaped
}

/// `systemctl --user daemon-reload`, then enables and starts `timers`.
fn load(timers: &[String]) -> Result<(), String> {
    let systemctl = |args: &[&str]| {
        let out = Command::new("systemctl").arg("--user").args(args).output().map_err(|e| format!("systemctl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    };
    systemctl(&["daemon-reload"])?;
    if !timers.is_empty() {
        let mut args = vec!["enable", "--now"];
        args.extend(timers.iter().map(String::as_str));
        systemctl(&args)?;
    }
    Ok(())
}

fn write_atomically(file: &Path, text: &str) -> io::Result<()> {
    let tmp = file.with_extension("corral-tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, file)
}

/// A word of a unit file, quoted as systemd reads it (`%` doubled).
fn quoted(word: &str) -> String {
    let word = word.replace('%', "%%");
    if word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:+,@".contains(c)) {
        word
    } else {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    }
}
