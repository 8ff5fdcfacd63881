//! "Quit": the tray ends; runs keep going under their shepherds (and an
//! open window stays), and the tray shows them as they are when it starts
//! again.

use crate::panel::menu::Line;

pub const ID: &str = "quit";

pub fn line() -> Line {
    Line::Item { id: ID.into(), label: "Quit (runs keep going)".into(), enabled: true }
}

pub fn clicked() {
    gtk::main_quit();
}
