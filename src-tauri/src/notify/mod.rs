//! Notifications: one per run that reaches a terminal status (the store's
//! `notified_at` claim makes that hold across restarts and instances),
//! worded by outcome, whose click opens the run's transcript. Nothing here
//! steals focus: the window opens only when the user clicks.
//!
//! Platform code is in one file per platform; Linux uses notify-rust over
//! D-Bus with actions (Tauri's notification plugin has no click events).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;

use corral::{time, Run, RunStatus};
use tauri::AppHandle;

/// One notification's words and where its click leads.
pub struct Note {
    pub summary: String,
    pub body: String,
    /// The run to open on click (`None`: the runs list).
    pub run: Option<String>,
}

/// Announces one ended run.
pub fn announce(app: &AppHandle, run: &Run) {
    platform::show(app.clone(), wording(run));
}

/// Announces many runs that ended while the app was away, as one.
pub fn announce_group(app: &AppHandle, runs: &[Run]) {
    let failed = runs.iter().filter(|r| r.status != RunStatus::Completed).count();
    let summary = format!("{} runs finished while Corral was closed", runs.len());
    let body = match failed {
        0 => "All completed.".to_string(),
        n => format!("{} completed, {n} did not.", runs.len() - n),
    };
    platform::show(app.clone(), Note { summary, body, run: None });
}

/// Success and failure worded differently, with the outcome, the duration,
/// and the first line of the final text or error.
pub fn wording(run: &Run) -> Note {
    let duration = run.duration(time::now()).map(time::human_duration);
    let took = duration.map(|d| format!(" in {d}")).unwrap_or_default();
    let summary = match run.status {
        RunStatus::Completed => format!("✓ {} completed{took}", run.preset),
        RunStatus::Failed => format!("✗ {} failed{took}", run.preset),
        RunStatus::Aborted => format!("■ {} aborted{took}", run.preset),
        RunStatus::Lost => format!("? {} lost: its supervisor died", run.preset),
        active => format!("{} {active}", run.preset),
    };
    let source = match run.status {
        RunStatus::Completed => run.final_text.as_deref(),
        _ => run.error.as_deref().or(run.final_text.as_deref()),
    };
    let first = source.and_then(|t| t.lines().find(|l| !l.trim().is_empty())).unwrap_or(&run.task).trim();
    let body: String = first.chars().take(200).collect();
    Note { summary, body, run: Some(run.id.clone()) }
}
