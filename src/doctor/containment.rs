//! Run containment: whether a run gets a cgroup here, with which limits,
//! and how pause and abort work (see the manual, docs/supervision.md).

use super::{Finding, Level};
use crate::cost::resources::ResourceLimits;
use crate::home::config::Config;
use crate::home::Home;
use crate::process::cgroup;

const AREA: &str = "containment";

/// How a run started from here would be held.
pub fn check(home: &Home) -> Vec<Finding> {
    if Config::load(home).is_ok_and(|c| !c.cgroups) {
        return vec![Finding::new(
            AREA,
            "cgroups",
            Level::Warn,
            "turned off by `cgroups = false` in config.toml: runs are followed by process tree, without limits",
        )
        .fix(format!("remove `cgroups = false` from {}", home.config_file().display()))];
    }
    // Every limit asked for, to learn which controllers take them.
    let limits =
        ResourceLimits { memory_bytes: Some(1 << 30), cpu_percent: Some(100), tasks: Some(1024), lifted: Vec::new() };
    match cgroup::probe(&limits) {
        Ok((dir, notes)) => {
            let base = dir.parent().map_or_else(String::new, |d| d.display().to_string());
            let mut findings = vec![Finding::ok(AREA, "cgroup per run", format!("each run gets a group under {base}"))];
            for note in notes {
                let level = if note.contains("not applied") || note.starts_with("no ") { Level::Warn } else { Level::Ok };
                let (check, detail) = match note.split_once(" (") {
                    Some((what, how)) if level == Level::Ok => (what.to_string(), format!("applied by {}", how.trim_end_matches(')'))),
                    _ => ("limits".to_string(), note.clone()),
                };
                let finding = Finding::new(AREA, check, level, detail);
                findings.push(if level == Level::Warn {
                    finding.fix("enable the controller for your user's cgroup (systemd: `Delegate=memory pids cpu` for user@.service), or run without that limit")
                } else {
                    finding
                });
            }
            findings
        }
        Err(why) => vec![Finding::new(
            AREA,
            "cgroup per run",
            Level::Warn,
            format!(
                "no cgroup can be made from here ({why}): runs are followed by process tree and environment; \
                 limits, pause by freezing and peak memory need a cgroup"
            ),
        )
        .fix("start Corral in a cgroup you own: `systemd-run --user --scope corral-tray` (systemd), or as a user with a delegated cgroup v2 subtree")],
    }
}
