//! Why the tray cannot follow the store right now (a broken `config.toml`,
//! an unreadable database), as a disabled line at the top of the menu. The
//! watcher keeps retrying; the line goes when it succeeds.

use crate::panel::menu::Line;

pub const ID: &str = "problem";

/// Longest text shown; the whole message is in the tooltip and the log.
const MAX_CHARS: usize = 90;

pub fn line(problem: &str) -> Line {
    let mut text: String = problem.chars().take(MAX_CHARS).collect();
    if text.len() < problem.len() {
        text.push('…');
    }
    Line::Item { id: ID.into(), label: format!("⚠ {text}"), enabled: false }
}
