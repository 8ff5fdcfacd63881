//! The schedules in the menu: when the soonest fires next, and each one
//! whose last fires failed (it also turns the icon red). A click opens the
//! window's runs.

use super::super::menu::Line;
use crate::view::{ScheduleLine, FAILING};

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
    for failing in schedules.iter().filter(|s| s.failing >= FAILING) {
        let label = format!("⚠ schedule {}: its last {} fires failed", failing.name, failing.failing);
        lines.push(Line::Item { id: ID.to_string(), label, enabled: true });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soonest_fire_and_each_failing_schedule_are_said() {
        let line = |name: &str, next: Option<&str>, failing| ScheduleLine {
            name: name.into(),
            next: next.map(str::to_string),
            failing,
        };
        assert!(lines(&[]).is_empty());
        let said =
            lines(&[line("triage", Some("Thu 09:00"), 0), line("nightly", Some("Fri 03:00"), 3), line("off", None, 0)]);
        let labels: Vec<&str> = said
            .iter()
            .map(|l| match l {
                Line::Item { label, .. } => label.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(labels, ["Next: triage Thu 09:00 (+1 more)", "⚠ schedule nightly: its last 3 fires failed"]);
    }
}
