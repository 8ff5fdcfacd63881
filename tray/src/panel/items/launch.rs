//! The Launch submenu: the global presets, plus the project presets of
//! recently used folders, then each host of config.toml. A click opens the
//! window's launch form for that preset, or with that host chosen.

use std::path::PathBuf;

use crate::panel::menu::Line;
use crate::view::Launchable;
use crate::window::{self, Route};

pub const PREFIX: &str = "launch:";
pub const HOST_PREFIX: &str = "launch-on:";
/// Separates the preset name from its folder in an item id.
const SEP: char = '\u{1f}';

pub fn line(entries: &[Launchable], hosts: &[String]) -> Line {
    let mut lines: Vec<Line> = entries
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
    if !hosts.is_empty() {
        lines.push(Line::Separator);
        lines.extend(hosts.iter().map(|host| Line::Item {
            id: format!("{HOST_PREFIX}{host}"),
            label: format!("On {host}…"),
            enabled: true,
        }));
    }
    Line::Submenu { id: "launch".into(), label: "Launch".into(), lines }
}

pub fn clicked(entry: &str) {
    let (name, folder) = entry.split_once(SEP).unwrap_or((entry, ""));
    let folder = (!folder.is_empty()).then(|| PathBuf::from(folder));
    window::open(&Route::Launch { preset: name.to_string(), folder });
}

pub fn clicked_host(host: &str) {
    window::open(&Route::LaunchOn(host.to_string()));
}
