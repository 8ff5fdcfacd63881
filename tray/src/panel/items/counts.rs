//! The counts, as the menu's first (disabled) line.

use corral::store::Counts;

use crate::panel::menu::Line;

pub const ID: &str = "counts";

pub fn line(counts: &Counts) -> Line {
    Line::Item { id: ID.into(), label: crate::view::title(counts), enabled: false }
}
