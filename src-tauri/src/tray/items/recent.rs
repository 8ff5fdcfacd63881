//! The latest runs, with status marks; a click opens that run's transcript.

use corral::{Run, RunStatus};
use tauri::menu::MenuItem;
use tauri::AppHandle;

pub const PREFIX: &str = "run:";

/// A status as a mark users can tell apart at a glance.
pub fn mark(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Queued => "…",
        RunStatus::Starting | RunStatus::Running => "▶",
        RunStatus::Waiting => "⧗",
        RunStatus::Completed => "✓",
        RunStatus::Failed => "✗",
        RunStatus::Aborted => "■",
        RunStatus::Lost => "?",
    }
}

pub fn items(app: &AppHandle, runs: &[Run]) -> tauri::Result<Vec<MenuItem<tauri::Wry>>> {
    if runs.is_empty() {
        return Ok(vec![MenuItem::with_id(app, "no-runs", "No runs yet", false, None::<&str>)?]);
    }
    runs.iter()
        .map(|run| {
            let task: String = run.task.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(48).collect();
            let label = match &run.retrying {
                Some(retry) => format!("⟳ {} — retrying: {retry}", run.preset),
                None => format!("{} {} — {}", mark(run.status), run.preset, task),
            };
            MenuItem::with_id(app, format!("{PREFIX}{}", run.id), label, true, None::<&str>)
        })
        .collect()
}

pub fn clicked(app: &AppHandle, run: &str) {
    crate::window::open(app, Some(run));
}
