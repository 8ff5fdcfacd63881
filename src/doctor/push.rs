//! Pushes to the phone (`[push]`): whether the ntfy server answers, and
//! pushes that could not be sent.

use super::{Finding, Level};
use crate::config::Config;
use crate::home::Home;
use crate::push::Channel;
use crate::store::Store;

const AREA: &str = "push";

/// The push channel asked now, if one is set.
pub fn check(home: &Home) -> Vec<Finding> {
    let Ok(config) = Config::load(home) else { return Vec::new() };
    let Some(push) = config.push else {
        return vec![Finding::new(AREA, "channel", Level::Note, "no pushes to a phone".to_string())
            .fix("add [push] ntfy = \"https://ntfy.sh/<a random topic>\" to config.toml, then `corral push test`")];
    };
    let mut findings = Vec::new();
    match Channel::new(&push).and_then(|c| c.check()) {
        Ok(said) => findings.push(Finding::ok(AREA, "channel", said)),
        Err(e) => findings.push(
            Finding::new(AREA, "channel", Level::Warn, format!("the push server does not answer: {e}"))
                .fix("check the address in [push]; pushes wait in the store and are sent once it answers"),
        ),
    }
    if let Some((n, trouble)) = Store::open(home).ok().and_then(|s| s.push_trouble().ok().flatten()) {
        findings.push(
            Finding::new(AREA, "unsent", Level::Warn, format!("{n} push(es) not sent yet: {trouble}"))
                .fix("they are sent again by the tray or `corral push listen` while either runs"),
        );
    }
    if push.ntfy.is_some() {
        findings.push(Finding::ok(
            AREA,
            "answers",
            "answers are followed by the tray while it runs (or `corral push listen`)".to_string(),
        ));
    }
    findings
}
