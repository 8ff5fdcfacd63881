//! What the tray shows, as plain data: read from the store on the
//! watcher's thread (preset discovery reads files too), then drawn by the
//! panel on the GTK thread. Two equal views draw the same, so the panel
//! redraws only what differs.

use std::path::PathBuf;

use corral::preset::{self, PresetSource, Roots};
use corral::store::{Counts, RunFilter};
use corral::{Home, Run, RunStatus, Store};

use crate::error::TrayError;

/// Runs listed in the menu.
pub const RECENT: usize = 8;

/// Everything the tray shows.
#[derive(Debug, Clone, PartialEq)]
pub struct TrayView {
    pub counts: Counts,
    /// The latest runs, newest first.
    pub recent: Vec<Run>,
    /// What the Launch submenu offers.
    pub launchable: Vec<Launchable>,
    /// The hosts of config.toml, offered in the Launch submenu.
    pub hosts: Vec<String>,
    /// "Do not disturb" is on.
    pub quiet: bool,
    /// Runs whose agents work (what "Pause all running" would freeze).
    pub working: usize,
    /// Runs paused.
    pub paused: usize,
    /// The schedules, soonest next fire first.
    pub schedules: Vec<ScheduleLine>,
    /// What needs the user (the one list: see `corral::attention`), with
    /// what it leaves out counted.
    pub needs: corral::attention::Needs,
}

/// A schedule as the menu says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleLine {
    pub name: String,
    /// Its next fire, in local time (`None`: paused, or never again).
    pub next: Option<String>,
}

/// One preset the Launch submenu offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launchable {
    pub name: String,
    pub agent: String,
    /// The project folder of a project preset.
    pub folder: Option<PathBuf>,
}

impl TrayView {
    /// Reads the view from `store`, with `counts` read by the caller.
    pub fn read(store: &Store, home: &Home, counts: Counts, quiet: bool) -> Result<TrayView, TrayError> {
        let recent = store.runs(&RunFilter { limit: Some(RECENT), ..RunFilter::default() })?;
        let count = |status| store.runs(&RunFilter { status: Some(status), ..RunFilter::default() }).map(|r| r.len());
        let (working, paused) = (count(RunStatus::Running)?, count(RunStatus::Paused)?);
        let hosts = corral::home::config::Config::load(home).map(|c| c.hosts.into_iter().map(|h| h.name).collect());
        let hosts = hosts.unwrap_or_default();
        let schedules = schedules(store);
        let needs = corral::attention::needs(store)?;
        let launchable = launchable(home, store, std::env::var_os("PATH").as_deref());
        Ok(TrayView { counts, recent, launchable, hosts, quiet, working, paused, schedules, needs })
    }

    /// The title beside the icon: `N running / M total`, with the paused
    /// ones apart (`1 running · 1 paused / 17 total`).
    pub fn title(&self) -> String {
        title(&self.counts)
    }

    /// The icon's look: the running count — or, red, how many things
    /// need the user (the one list: a budget reached, a failure or a
    /// refusal not yet looked at, a usage limit, a run retrying, a schedule
    /// that paused itself or keeps failing): the number on a red icon says
    /// what the red is about.
    pub fn look(&self) -> (u64, bool) {
        match self.needs.total() {
            0 => (self.counts.running, false),
            needing => (needing, true),
        }
    }
}

/// `N running / M total`, with paused runs apart: a paused run is not
/// working.
pub fn title(counts: &Counts) -> String {
    match counts.paused {
        0 => format!("{} running / {} total", counts.running, counts.total),
        paused => format!("{} running · {paused} paused / {} total", counts.running, counts.total),
    }
}

/// The schedules, soonest next fire first (a schedule that cannot be read
/// is left out: `corral schedule ls` says why).
fn schedules(store: &Store) -> Vec<ScheduleLine> {
    let Ok(all) = corral::schedule::all(store) else { return Vec::new() };
    let now = corral::schedule::now();
    let mut lines: Vec<(Option<corral::text::time::Timestamp>, ScheduleLine)> = all
        .iter()
        .map(|s| {
            let next = if s.paused_at.is_some() { None } else { s.next_due(now) };
            let shown = next.map(|at| at.with_timezone(&chrono::Local).format("%a %H:%M").to_string());
            (next, ScheduleLine { name: s.name.clone(), next: shown })
        })
        .collect();
    lines.sort_by_key(|(next, line)| (next.is_none(), *next, line.name.clone()));
    lines.into_iter().map(|(_, line)| line).collect()
}

/// Global presets, then each recent folder's project presets: those whose
/// agent can start here (on `path`), so the menu offers no launch that
/// would fail ("Claude Code is not installed").
fn launchable(home: &Home, store: &Store, path: Option<&std::ffi::OsStr>) -> Vec<Launchable> {
    let startable =
        |preset: &corral::Preset, cwd: &std::path::Path| preset::available::unavailable(preset, path, cwd).is_none();
    let global = preset::discover(&Roots::new(home, None));
    let mut entries: Vec<Launchable> = global
        .presets
        .iter()
        .filter(|e| startable(&e.preset, home.data_dir()))
        .map(|e| Launchable { name: e.preset.name.clone(), agent: e.preset.agent.to_string(), folder: None })
        .collect();
    for folder in corral::home::recent_folders::with_runs(home, store) {
        let set = preset::discover(&Roots::new(home, Some(&folder)));
        for e in set.presets {
            let project = matches!(
                e.preset.source,
                PresetSource::ClaudeProject | PresetSource::PiProject | PresetSource::CorralProject
            );
            if project && startable(&e.preset, &folder) {
                entries.push(Launchable {
                    name: e.preset.name,
                    agent: e.preset.agent.to_string(),
                    folder: Some(folder.clone()),
                });
            }
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_and_the_icon_follow_the_counts() {
        let counts = Counts { running: 2, total: 5, unseen_failures: 0, paused: 0 };
        let view = TrayView {
            counts,
            recent: Vec::new(),
            launchable: Vec::new(),
            hosts: Vec::new(),
            quiet: false,
            working: 0,
            paused: 0,
            schedules: Vec::new(),
            needs: Default::default(),
        };
        assert_eq!(view.title(), "2 running / 5 total");
        assert_eq!(view.look(), (2, false));
        let paused = TrayView { counts: Counts { running: 1, paused: 1, ..counts }, ..view.clone() };
        assert_eq!(paused.title(), "1 running · 1 paused / 5 total", "a paused run is not running");
        let item = corral::attention::Item {
            subject: corral::attention::Subject::Schedule { name: "nightly".into() },
            reason: corral::attention::Reason::ScheduleFailing { failed: 3 },
            chip: "failing schedule",
            words: "schedule nightly: its last 3 fires failed".into(),
            actions: Vec::new(),
            since: None,
        };
        let needs = TrayView { needs: corral::attention::Needs { items: vec![item], beyond: 0 }, ..view.clone() };
        assert_eq!(needs.look(), (1, true), "red, counting what needs the user");
        let many = TrayView { needs: corral::attention::Needs { beyond: 449, ..needs.needs.clone() }, ..view.clone() };
        assert_eq!(many.look(), (450, true), "the whole count, listed or not");
    }

    #[test]
    fn global_presets_then_the_project_presets_of_recent_folders() {
        let root = tempfile::tempdir().unwrap();
        let home = Home::at(root.path().join("home"));
        home.ensure().unwrap();
        std::fs::create_dir_all(home.presets_dir()).unwrap();
        std::fs::write(
            home.presets_dir().join("echo.md"),
            "---\nname: echo\ndescription: echoes\nagent: command\ncommand: [echo]\n---\n",
        )
        .unwrap();
        let project = root.path().join("project");
        std::fs::create_dir_all(project.join(".corral/presets")).unwrap();
        std::fs::write(project.join(".corral/presets/fix.md"), "---\nname: fix\ndescription: fixes\nagent: pi\n---\n")
            .unwrap();
        corral::home::recent_folders::remember(&home, &project).unwrap();

        // pi is installed here; Claude Code is not.
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("pi"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(bin.join("pi"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::write(
            project.join(".corral/presets/review.md"),
            "---\nname: review\ndescription: r\nagent: claude\n---\n",
        )
        .unwrap();
        let path =
            std::env::join_paths([&bin, &std::path::PathBuf::from("/usr/bin"), &std::path::PathBuf::from("/bin")])
                .unwrap();

        let store = Store::open(&home).unwrap();
        let found = launchable(&home, &store, Some(&path));
        let echo = found.iter().position(|e| e.name == "echo" && e.folder.is_none()).expect("the global preset");
        let fix =
            found.iter().position(|e| e.name == "fix" && e.folder.as_ref() == Some(&project)).expect("the project's");
        assert!(echo < fix, "global first: {found:?}");
        assert_eq!(found[fix].agent, "pi");
        assert!(!found.iter().any(|e| e.agent == "claude"), "offered an agent that is not installed: {found:?}");
    }
}
