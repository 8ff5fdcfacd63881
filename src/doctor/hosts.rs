//! hosts: each `[hosts.NAME]` of config.toml asked now, over SSH, whether it
//! answers and runs this Corral; a host that does not says what to do.

use super::{Finding, Level};
use crate::home::config::Config;
use crate::home::Home;
use crate::remote::{about, Ssh};

const AREA: &str = "hosts";

/// Every configured host, asked side by side.
pub fn check(home: &Home) -> Vec<Finding> {
    let Ok(config) = Config::load(home) else { return Vec::new() }; // said by `settings`
    std::thread::scope(|scope| {
        let asks: Vec<_> =
            config.hosts.iter().map(|host| (host, scope.spawn(move || about(&Ssh::new(home, host))))).collect();
        asks.into_iter()
            .map(|(host, ask)| match ask.join() {
                Ok(Ok(a)) => Finding::ok(
                    AREA,
                    &host.name,
                    format!("{} answers: corral {} on {} {}, {} running", host.ssh, a.version, a.os, a.arch, a.running),
                ),
                Ok(Err(e)) => Finding::new(AREA, &host.name, Level::Warn, e.to_string()),
                Err(_) => Finding::new(AREA, &host.name, Level::Warn, "the check crashed"),
            })
            .collect()
    })
}
