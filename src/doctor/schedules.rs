//! Schedules: who fires them here. The tray does while it runs; without
//! it, `corral schedule run`, or a systemd user timer per schedule
//! (`[schedules] systemd_timers = true`), which needs the user's systemd.

use std::process::Command;

use super::run_briefly::{run, Answer};
use super::{Finding, Level};
use crate::home::config::Config;
use crate::home::Home;
use crate::store::Store;

const AREA: &str = "schedules";

/// How many schedules there are, and what will fire them.
pub fn check(home: &Home) -> Vec<Finding> {
    let Ok(store) = Store::open(home) else { return Vec::new() };
    let Ok(schedules) = store.schedules() else { return Vec::new() };
    let timers = Config::load(home).map(|c| c.systemd_timers).unwrap_or(false);
    let mut systemctl = Command::new("systemctl");
    systemctl.args(["--user", "show-environment"]);
    let manager = match run(systemctl) {
        Answer::Said(_) => Ok(()),
        Answer::NotStarted(why) => Err(why.to_string()),
        Answer::Failed(why) => Err(why),
        Answer::Hung => Err("`systemctl --user` did not answer".to_string()),
    };
    let said = match schedules.len() {
        0 => "no schedules".to_string(),
        1 => "1 schedule".to_string(),
        n => format!("{n} schedules"),
    };
    let finding = match (timers, manager) {
        (true, Ok(())) => Finding::ok(AREA, "firer", format!("{said}, fired by systemd user timers (and the tray)")),
        (true, Err(why)) => Finding::new(
            AREA,
            "firer",
            Level::Warn,
            format!("{said}; `systemd_timers = true`, but the user's systemd does not answer ({why}): the timers are written and wait for it"),
        )
        .fix("loginctl enable-linger $USER (a user manager without a login), or run `corral schedule run` as a service"),
        (false, Ok(())) => Finding::new(
            AREA,
            "firer",
            Level::Note,
            format!("{said}, fired by the tray while it runs (or `corral schedule run`)"),
        )
        .fix("to fire them with nothing running, set `[schedules] systemd_timers = true` in config.toml, then `corral schedule timers`"),
        (false, Err(_)) => {
            Finding::ok(AREA, "firer", format!("{said}, fired by the tray while it runs (or `corral schedule run`)"))
        }
    };
    vec![finding]
}
