//! Settings and presets with problems: a `config.toml` that cannot be read,
//! preset files that cannot be used, presets whose agent cannot start, and
//! misspelt keys.

use super::{Finding, Level};
use crate::home::config::Config;
use crate::home::Home;
use crate::preset::{self, Roots};

const AREA: &str = "settings";

/// `config.toml` and the presets in effect from the current folder.
pub fn check(home: &Home) -> Vec<Finding> {
    let mut findings = vec![match Config::load(home) {
        Ok(_) if home.config_file().exists() => {
            Finding::ok(AREA, "config.toml", home.config_file().display().to_string())
        }
        Ok(_) => Finding::ok(AREA, "config.toml", format!("none at {}: the defaults", home.config_file().display())),
        Err(e) => Finding::new(AREA, "config.toml", Level::Fail, e.to_string())
            .fix(format!("fix {} (every key is in the manual: docs/settings.md)", home.config_file().display())),
    }];
    let cwd = std::env::current_dir().ok();
    let mut set = preset::discover(&Roots::new(home, cwd.as_deref()));
    set.mark_unavailable(std::env::var_os("PATH").as_deref(), cwd.as_deref().unwrap_or(home.data_dir()));
    let usable = set.presets.iter().filter(|e| e.unavailable.is_none()).count();
    findings.push(Finding::ok(AREA, "presets", format!("{usable} of {} can start from here", set.presets.len())));
    for e in &set.presets {
        let p = &e.preset;
        if let Some(why) = &e.unavailable {
            findings.push(Finding::new(
                AREA,
                format!("preset {}", p.name),
                Level::Note,
                format!("cannot start here: {why}"),
            ));
        }
        for warning in &p.warnings {
            findings.push(
                Finding::new(AREA, format!("preset {}", p.name), Level::Warn, warning.clone())
                    .fix(format!("edit {}", p.path)),
            );
        }
    }
    for problem in &set.problems {
        findings.push(
            Finding::new(AREA, "preset file", Level::Warn, format!("{}: {}", problem.path, problem.reason))
                .fix(format!("fix or remove {}", problem.path)),
        );
    }
    findings
}
