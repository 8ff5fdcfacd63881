//! "Open Corral": starts the runs window (or shows the one open).

use crate::panel::menu::Line;
use crate::window::{self, Route};

pub const ID: &str = "open";

pub fn line() -> Line {
    Line::Item { id: ID.into(), label: "Open Corral".into(), enabled: true }
}

pub fn clicked() {
    window::open(&Route::Runs);
}
