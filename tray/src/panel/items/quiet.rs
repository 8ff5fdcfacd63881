//! "Do not disturb": pauses notifications; what ends meanwhile is announced
//! as one summary when they resume. A check item; runtime state only.

use crate::panel::menu::Line;
use crate::state::TrayState;

pub const ID: &str = "quiet";

pub fn line(quiet: bool) -> Line {
    Line::Check { id: ID.into(), label: "Do not disturb".into(), checked: quiet }
}

/// The watcher announces what waited when notifications resume, and
/// redraws the menu at once.
pub fn clicked(state: &TrayState) {
    state.set_quiet(!state.quiet());
}
