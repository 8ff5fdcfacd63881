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

/// Remembers `folder` as the most recent.
pub fn remember(home: &Home, folder: &Path) -> std::io::Result<()> {
    let mut list = recent(home);
    list.retain(|p| p != folder);
    list.insert(0, folder.to_path_buf());
    list.truncate(KEEP);
    let mut out = crate::home::create_private(&file(home))?;
    std::io::Write::write_all(&mut out, serde_json::to_string_pretty(&list).unwrap_or_default().as_bytes())
}
