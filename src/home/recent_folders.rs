//! Recently used working folders, so the tray's Launch menu can offer
//! their project presets: the window remembers them, the tray reads them.
//! Kept in `recent-folders.json` in the config folder.

use std::path::{Path, PathBuf};

use crate::Home;

/// Most folders remembered.
const KEEP: usize = 8;

fn file(home: &Home) -> PathBuf {
    home.config_dir().join("recent-folders.json")
}

/// The remembered folders that still exist, most recent first.
pub fn recent(home: &Home) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file(home)).unwrap_or_default();
    let list: Vec<PathBuf> = serde_json::from_str(&text).unwrap_or_default();
    list.into_iter().filter(|p| p.is_dir()).collect()
}

/// Most folders [`with_runs`] gives.
const WITH_RUNS: usize = 12;

/// The remembered folders, then the folders the latest runs were launched
/// in (from the CLI, an agent, a schedule; a worktree run's repository),
/// most recent first, each once, those that exist: what the launch form,
/// the Presets view and the tray's Launch menu offer.
pub fn with_runs(home: &Home, store: &crate::Store) -> Vec<PathBuf> {
    let mut folders = recent(home);
    let filter = crate::store::RunFilter { include_dismissed: true, limit: Some(200), ..Default::default() };
    for run in store.runs(&filter).unwrap_or_default() {
        let folder = PathBuf::from(run.worktree_repo.unwrap_or(run.cwd));
        if folders.len() < WITH_RUNS && !folders.contains(&folder) && folder.is_dir() {
            folders.push(folder);
        }
    }
    folders.truncate(WITH_RUNS);
    folders
}

/// Remembers `folder` as the most recent.
pub fn remember(home: &Home, folder: &Path) -> std::io::Result<()> {
    let mut list = recent(home);
    list.retain(|p| p != folder);
    list.insert(0, folder.to_path_buf());
    list.truncate(KEEP);
    let mut out = crate::home::create_private(&file(home))?;
    std::io::Write::write_all(&mut out, serde_json::to_string_pretty(&list).unwrap_or_default().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::{parse_preset, PresetSource};
    use crate::store::NewRun;

    #[test]
    fn folders_runs_were_launched_in_follow_the_remembered_ones() {
        let root = tempfile::tempdir().unwrap();
        let home = Home::at(root.path().join("home"));
        let (remembered, launched) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&remembered).unwrap();
        std::fs::create_dir_all(&launched).unwrap();
        let mut store = crate::Store::open(&home).unwrap();
        remember(&home, &remembered).unwrap();
        let text = "---\nname: w\ndescription: d\nagent: command\ncommand: [true]\n---\n";
        let preset = parse_preset(text, "w.md", PresetSource::Global).unwrap();
        let cwd = launched.to_string_lossy().into_owned();
        for _ in 0..2 {
            let new = NewRun::plain(&preset, "t", &cwd);
            store.insert_run(&new, 0, |_| Ok(())).unwrap();
        }
        assert_eq!(with_runs(&home, &store), [remembered, launched]);
    }
}
