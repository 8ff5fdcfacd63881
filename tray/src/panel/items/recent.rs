//! The latest runs, with status marks; a click opens that run's transcript.

use corral::{Run, RunStatus};

use crate::panel::menu::Line;
use crate::window::{self, Route};

pub const PREFIX: &str = "run:";

/// A status as a mark users can tell apart at a glance.
pub fn mark(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Queued => "…",
        RunStatus::Starting | RunStatus::Running => "▶",
        RunStatus::Waiting => "⧗",
        RunStatus::Paused => "⏸",
        RunStatus::Completed => "✓",
        RunStatus::Failed => "✗",
        RunStatus::Aborted => "■",
        RunStatus::Lost => "?",
    }
}

pub fn lines(runs: &[Run]) -> Vec<Line> {
    if runs.is_empty() {
        return vec![Line::Item { id: "no-runs".into(), label: "No runs yet".into(), enabled: false }];
    }
    runs.iter()
        .map(|run| {
            let task: String = run.task.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(48).collect();
            let label = match &run.retrying {
                Some(retry) => format!("⟳ {} — retrying: {retry}", run.preset),
                None => format!("{} {} — {}", mark(run.status), run.preset, task),
            };
            Line::Item { id: format!("{PREFIX}{}", run.id), label, enabled: true }
        })
        .collect()
}

pub fn clicked(run: &str) {
    window::open(&Route::Run(run.to_string()));
}
