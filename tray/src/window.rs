//! Opening the runs window: `corral-app`, a program of its own, started on
//! demand. It is single-instance, so starting it again hands the request to
//! the window already open. It is looked for next to `corral-tray` (both
//! are installed together), then on `PATH`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

pub use corral::attention::window_route::Route;

/// The window's program.
fn program() -> PathBuf {
    let beside = std::env::current_exe().ok().map(|exe| exe.with_file_name("corral-app"));
    beside.filter(|p| p.is_file()).unwrap_or_else(|| PathBuf::from("corral-app"))
}

/// Opens the window on `route`. It runs on its own; a thread reaps it when
/// it ends. If it cannot start, the user is told with a notification (they
/// clicked something and expect to see a window).
pub fn open(route: &Route) {
    let program = program();
    let started = Command::new(&program).args(route.args()).stdin(Stdio::null()).stdout(Stdio::null()).spawn();
    match started {
        Ok(mut child) => {
            let reaper = std::thread::Builder::new().name("corral-window".into()).spawn(move || child.wait());
            if let Err(e) = reaper {
                tracing::warn!("cannot watch the window's process: {e}");
            }
        }
        Err(e) => {
            let text =
                format!("Cannot open the window: {} ({e}). Install corral-app next to corral-tray.", program.display());
            tracing::error!("{text}");
            crate::notify::problem(&text);
        }
    }
}
