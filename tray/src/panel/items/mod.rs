//! The tray menu's items, one file each: its id, its line, its handler.

pub mod clear;
pub mod counts;
pub mod launch;
pub mod needs;
pub mod open;
pub mod pause;
pub mod problem;
pub mod quiet;
pub mod quit;
pub mod recent;
pub mod schedules;

use super::menu::Line;
use crate::state::TrayState;
use crate::view::TrayView;

/// The whole menu for `view`.
pub fn lines(view: &TrayView) -> Vec<Line> {
    let mut lines = vec![counts::line(&view.counts), Line::Separator];
    lines.extend(needs::lines(&view.needs));
    lines.extend([launch::line(&view.launchable, &view.hosts), Line::Separator]);
    lines.extend(recent::lines(&view.recent));
    lines.push(Line::Separator);
    let scheduled = schedules::lines(&view.schedules);
    if !scheduled.is_empty() {
        lines.extend(scheduled);
        lines.push(Line::Separator);
    }
    lines.extend(pause::lines(view.working, view.paused));
    lines.extend([open::line(), clear::line(), quiet::line(view.quiet), quit::line()]);
    lines
}

/// Routes a menu click (on the GTK thread) to its item.
pub fn clicked(state: &TrayState, id: &str) {
    if let Some(argv) = id.strip_prefix(needs::PREFIX) {
        needs::clicked(argv);
    } else if let Some(run) = id.strip_prefix(recent::PREFIX) {
        recent::clicked(run);
    } else if let Some(entry) = id.strip_prefix(launch::PREFIX) {
        launch::clicked(entry);
    } else if let Some(host) = id.strip_prefix(launch::HOST_PREFIX) {
        launch::clicked_host(host);
    } else {
        match id {
            open::ID | schedules::ID | needs::MORE_ID => open::clicked(),
            clear::ID => clear::clicked(state),
            pause::PAUSE_ID => pause::clicked(state, true),
            pause::RESUME_ID => pause::clicked(state, false),
            quiet::ID => quiet::clicked(state),
            quit::ID => quit::clicked(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral::store::Counts;

    fn labels(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match l {
                Line::Item { label, .. } | Line::Check { label, .. } | Line::Submenu { label, .. } => label.clone(),
                Line::Separator => "-".into(),
            })
            .collect()
    }

    #[test]
    fn the_menu_reads_counts_launch_runs_then_actions() {
        let view = TrayView {
            counts: Counts { running: 0, total: 0, unseen_failures: 0, paused: 0 },
            recent: Vec::new(),
            launchable: Vec::new(),
            hosts: Vec::new(),
            quiet: true,
            working: 0,
            paused: 0,
            schedules: Vec::new(),
            needs: Default::default(),
        };
        assert_eq!(
            labels(&lines(&view)),
            [
                "0 running / 0 total",
                "-",
                "Launch",
                "-",
                "No runs yet",
                "-",
                "Pause all running",
                "Open Corral",
                "Clear finished",
                "Do not disturb",
                "Quit (runs keep going)"
            ]
        );
        assert!(lines(&view).contains(&quiet::line(true)), "Do not disturb shows checked");
    }
}
