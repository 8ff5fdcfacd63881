//! `corral doctor`: what works on this machine for Corral and its agents,
//! and what to do about what does not. Each area is a file; each finding
//! names the command or setting that fixes it. The CLI prints the report
//! (or JSON) and the window shows it under Settings.

mod agents;
mod containment;
mod desktop;
mod forge;
mod git;
mod hosts;
mod push;
mod run_briefly;
mod sandbox;
mod schedules;
mod settings;
mod store;

use std::time::Instant;

use serde::Serialize;

use crate::home::Home;

/// How a finding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Works.
    Ok,
    /// Worth knowing; nothing to do.
    Note,
    /// Works less well than it could: the fix says how.
    Warn,
    /// Does not work: the fix says how.
    Fail,
}

impl Level {
    /// The word printed before a finding.
    pub fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Note => "note",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        }
    }
}

/// One thing found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Which part of the machine: `containment`, `desktop`, `agents`,
    /// `sandbox`, `git`, `store`, `settings`.
    pub area: &'static str,
    /// What was checked, in a few words (`notifications`, `claude`).
    pub check: String,
    /// How it stands.
    pub level: Level,
    /// What was found.
    pub detail: String,
    /// The command or setting that fixes it, when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn new(area: &'static str, check: impl Into<String>, level: Level, detail: impl Into<String>) -> Finding {
        Finding { area, check: check.into(), level, detail: detail.into(), fix: None }
    }

    fn ok(area: &'static str, check: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding::new(area, check, Level::Ok, detail)
    }

    fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

/// Everything found, in a fixed order of areas.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// The worst level found.
    pub worst: Level,
    /// How long the checks took.
    pub took_ms: u64,
}

/// Checks everything. The slow parts (each agent CLI asked its version, the
/// desktop's D-Bus services, the sandbox tried, each host asked) run side
/// by side.
pub fn examine(home: &Home) -> Report {
    let started = Instant::now();
    let (agents, desktop, sandbox, hosts) = std::thread::scope(|scope| {
        let agents = scope.spawn(agents::check);
        let desktop = scope.spawn(desktop::check);
        let sandbox = scope.spawn(sandbox::check);
        let hosts = scope.spawn(|| hosts::check(home));
        let join = |h: std::thread::ScopedJoinHandle<'_, Vec<Finding>>, area: &'static str| {
            h.join().unwrap_or_else(|_| vec![Finding::new(area, "checks", Level::Fail, "the checks crashed")])
        };
        (join(agents, "agents"), join(desktop, "desktop"), join(sandbox, "sandbox"), join(hosts, "hosts"))
    });
    let mut findings = containment::check(home);
    findings.extend(desktop);
    findings.extend(agents);
    findings.extend(sandbox);
    findings.extend(git::check());
    findings.extend(forge::check());
    findings.extend(store::check(home));
    findings.extend(settings::check(home));
    findings.extend(schedules::check(home));
    findings.extend(push::check(home));
    findings.extend(hosts);
    let worst = findings.iter().map(|f| f.level).max().unwrap_or(Level::Ok);
    Report { findings, worst, took_ms: started.elapsed().as_millis() as u64 }
}
