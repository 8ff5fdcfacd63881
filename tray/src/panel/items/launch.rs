//! The Launch submenu: the global presets, plus the project presets of
//! recently used folders. A click opens the window's launch form for that
//! preset.

use std::path::PathBuf;

use crate::panel::menu::Line;
use crate::view::Launchable;
use crate::window::{self, Route};

pub const PREFIX: &str = "launch:";
/// Separates the preset name from its folder in an item id.
const SEP: char = '\u{1f}';

pub fn line(entries: &[Launchable]) -> Line {
    let lines = entries
        .iter()
        .map(|entry| {
            let folder = entry.folder.as_ref().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let label = match &entry.folder {
                Some(f) => {
                    format!(
                        "{} ({}) — {}",
                        entry.name,
                        entry.agent,
                        f.file_name().unwrap_or_default().to_string_lossy()
                    )
                }
                None => format!("{} ({})", entry.name, entry.agent),
            };
            Line::Item { id: format!("{PREFIX}{}{SEP}{folder}", entry.name), label, enabled: true }
        })
        .collect();
    Line::Submenu { id: "launch".into(), label: "Launch".into(), lines }
}

pub fn clicked(entry: &str) {
    let (name, folder) = entry.split_once(SEP).unwrap_or((entry, ""));
    let folder = (!folder.is_empty()).then(|| PathBuf::from(folder));
    window::open(&Route::Launch { preset: name.to_string(), folder });
}
