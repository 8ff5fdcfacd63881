//! Pushes to the phone (`[push]`): whether the ntfy server answers (asked
//! by `corral-push check`, the program that speaks HTTPS, next to this
//! one), and pushes that could not be sent.

use std::process::Command;

use super::run_briefly::{run, Answer};
use super::{Finding, Level};
use crate::home::config::Config;
use crate::home::Home;
use crate::store::Store;

const AREA: &str = "push";

/// The push channel asked now, if one is set.
pub fn check(home: &Home) -> Vec<Finding> {
    let Ok(config) = Config::load(home) else { return Vec::new() };
    let Some(push) = config.push.as_ref() else {
        return vec![Finding::new(AREA, "channel", Level::Note, "no pushes to a phone".to_string())
            .fix("add [push] ntfy = \"https://ntfy.sh/<a random topic>\" to config.toml, then `corral push test`")];
    };
    let mut findings = Vec::new();
    let helper = std::env::current_exe().map(|me| me.with_file_name("corral-push"));
    let answer = match helper {
        Ok(helper) => {
            let mut check = Command::new(helper);
            check.arg("check");
            run(check)
        }
        Err(e) => Answer::NotStarted(e),
    };
    // Answers from the phone, as `corral-push check` found the server.
    let answers_off = match &answer {
        Answer::Said(said) => {
            said.split_once("answers from the phone: off (").map(|(_, why)| why.trim_end_matches(')').to_string())
        }
        _ => None,
    };
    match answer {
        Answer::Said(said) => findings.push(Finding::ok(AREA, "channel", said)),
        Answer::Failed(why) => findings.push(
            Finding::new(AREA, "channel", Level::Warn, format!("the push server does not answer: {why}"))
                .fix("check the address in [push]; pushes wait in the store and are sent once it answers"),
        ),
        Answer::NotStarted(e) => findings.push(
            Finding::new(AREA, "channel", Level::Warn, format!("corral-push could not be started: {e}"))
                .fix("install Corral whole (corral-push sits next to corral)"),
        ),
        Answer::Hung => findings.push(Finding::new(
            AREA,
            "channel",
            Level::Warn,
            "the push server did not answer in time".to_string(),
        )),
    }
    if let Some((n, trouble)) = Store::open(home).ok().and_then(|s| s.push_trouble().ok().flatten()) {
        findings.push(
            Finding::new(AREA, "unsent", Level::Warn, format!("{n} push(es) not sent yet: {trouble}"))
                .fix("they are sent again by the tray or `corral push listen` while either runs"),
        );
    }
    if let Some(why) = answers_off {
        findings.push(Finding::new(AREA, "answers", Level::Warn, format!("pushes carry no buttons: {why}")).fix(
            "on your ntfy server deny anonymous access (auth-default-access: deny-all), give a user read and \
                 write on the topic and TOPIC-answers, make a token for it (ntfy token add), log the phone's ntfy \
                 app in as that user, and set [push] token",
        ));
    } else if push.ntfy.is_some() {
        findings.push(Finding::ok(
            AREA,
            "answers",
            "answers are followed by the tray while it runs (or `corral push listen`)".to_string(),
        ));
    }
    findings
}
