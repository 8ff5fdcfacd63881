//! The schedules in the menu: when the soonest fires next (one whose last
//! fires failed is in "Needs you"). A click opens the window's runs.

use super::super::menu::Line;
use crate::view::ScheduleLine;

/// The id of every schedule line (they open the runs window).
pub const ID: &str = "schedules";

/// The schedules' lines: nothing without schedules.
pub fn lines(schedules: &[ScheduleLine]) -> Vec<Line> {
    let mut lines = Vec::new();
    if let Some(next) = schedules.iter().find(|s| s.next.is_some()) {
        let more = schedules.iter().filter(|s| s.next.is_some()).count() - 1;
        let more = if more > 0 { format!(" (+{more} more)") } else { String::new() };
        let label = format!("Next: {} {}{more}", next.name, next.next.as_deref().unwrap_or_default());
        lines.push(Line::Item { id: ID.to_string(), label, enabled: false });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soonest_fire_is_said() {
        let line = |name: &str, next: Option<&str>| ScheduleLine { name: name.into(), next: next.map(str::to_string) };
        assert!(lines(&[]).is_empty());
        let said = lines(&[line("triage", Some("Thu 09:00")), line("nightly", Some("Fri 03:00")), line("off", None)]);
        let labels: Vec<&str> = said
            .iter()
            .map(|l| match l {
                Line::Item { label, .. } => label.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(labels, ["Next: triage Thu 09:00 (+1 more)"]);
    }
}
