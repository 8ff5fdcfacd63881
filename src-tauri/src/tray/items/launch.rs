//! The Launch submenu: the global presets, plus the project presets of
//! recently used folders. A click opens the launch form for that preset.

use std::path::PathBuf;

use corral::preset::{self, PresetSource, Roots};
use corral::Home;
use tauri::menu::{MenuItem, Submenu};
use tauri::AppHandle;

pub const PREFIX: &str = "launch:";
/// Separates the preset name from its folder in an item id.
const SEP: char = '\u{1f}';

/// One launchable preset.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub agent: String,
    /// The project folder of a project preset.
    pub folder: Option<PathBuf>,
}

/// Global presets, then each recent folder's project presets.
pub fn entries(home: &Home) -> Vec<Entry> {
    let global = preset::discover(&Roots::new(home, None));
    let mut entries: Vec<Entry> = global
        .presets
        .iter()
        .map(|e| Entry { name: e.preset.name.clone(), agent: e.preset.agent.to_string(), folder: None })
        .collect();
    for folder in crate::folders::recent(home) {
        let set = preset::discover(&Roots::new(home, Some(&folder)));
        for e in set.presets {
            let project = matches!(
                e.preset.source,
                PresetSource::ClaudeProject | PresetSource::PiProject | PresetSource::CorralProject
            );
            if project {
                entries.push(Entry {
                    name: e.preset.name,
                    agent: e.preset.agent.to_string(),
                    folder: Some(folder.clone()),
                });
            }
        }
    }
    entries
}

pub fn submenu(app: &AppHandle, entries: &[Entry]) -> tauri::Result<Submenu<tauri::Wry>> {
    let menu = Submenu::with_id(app, "launch", "Launch", true)?;
    for entry in entries {
        let folder = entry.folder.as_ref().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let label = match &entry.folder {
            Some(f) => {
                format!("{} ({}) — {}", entry.name, entry.agent, f.file_name().unwrap_or_default().to_string_lossy())
            }
            None => format!("{} ({})", entry.name, entry.agent),
        };
        let id = format!("{PREFIX}{}{SEP}{folder}", entry.name);
        menu.append(&MenuItem::with_id(app, id, label, true, None::<&str>)?)?;
    }
    Ok(menu)
}

pub fn clicked(app: &AppHandle, entry: &str) {
    let (name, folder) = entry.split_once(SEP).unwrap_or((entry, ""));
    let route = format!("#/launch?preset={}&cwd={}", encode(name), encode(folder));
    crate::window::navigate(app, &route);
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
