//! "Pause all running" / "Resume all paused": freeze every working run at
//! once (a meeting, a laptop on battery) and thaw them again. Each run is
//! frozen whole, holds no slot and its clocks stop (see `corral::verbs::pause`).

use corral::store::RunFilter;
use corral::upkeep::queue::ShepherdCommand;
use corral::{RunStatus, Store};

use crate::panel::menu::Line;
use crate::state::TrayState;

pub const PAUSE_ID: &str = "pause-all";
pub const RESUME_ID: &str = "resume-all";

/// The pause line (enabled while runs work), and the resume line while any
/// run is paused.
pub fn lines(running: usize, paused: usize) -> Vec<Line> {
    let mut lines = vec![Line::Item {
        id: PAUSE_ID.into(),
        label: if running > 0 { format!("Pause all running ({running})") } else { "Pause all running".into() },
        enabled: running > 0,
    }];
    if paused > 0 {
        lines.push(Line::Item { id: RESUME_ID.into(), label: format!("Resume all paused ({paused})"), enabled: true });
    }
    lines
}

/// Pauses (or resumes) off the GTK thread: each run waits for its shepherd
/// to act; the watcher sees the changes and redraws.
pub fn clicked(state: &TrayState, pause: bool) {
    let home = state.home.clone();
    let spawned = std::thread::Builder::new().name("corral-pause".into()).spawn(move || {
        let from = if pause { RunStatus::Running } else { RunStatus::Paused };
        let result = Store::open(&home).map_err(|e| e.to_string()).and_then(|mut store| {
            let shepherd = ShepherdCommand::lightest().map_err(|e| e.to_string())?;
            let runs =
                store.runs(&RunFilter { status: Some(from), ..RunFilter::default() }).map_err(|e| e.to_string())?;
            for run in runs {
                if let Err(e) =
                    corral::verbs::pause::pause(&mut store, &run.id, pause, corral::verbs::pause::PATIENCE, &shepherd)
                {
                    tracing::warn!(run = %run.id, "cannot pause or resume: {e}");
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            tracing::error!("cannot pause or resume runs: {e}");
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot pause or resume runs: {e}");
    }
}
