//! Opening the runs window: `corral-app`, a program of its own, started on
//! demand. It is single-instance, so starting it again hands the request to
//! the window already open. It is looked for next to `corral-tray` (both
//! are installed together), then on `PATH`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where the window opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The runs list.
    Runs,
    /// One run's transcript.
    Run(String),
    /// The runs that ended since a moment (a summary notification's click).
    EndedSince(String),
    /// The launch form for a preset, in a folder for a project preset.
    Launch { preset: String, folder: Option<PathBuf> },
}

impl Route {
    /// `corral-app`'s arguments for this route.
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        match self {
            Route::Runs => Vec::new(),
            Route::Run(id) => vec!["--open".into(), id.into()],
            Route::EndedSince(since) => vec!["--ended-since".into(), since.into()],
            Route::Launch { preset, folder } => {
                let mut args = vec!["--launch".into(), preset.into()];
                if let Some(folder) = folder {
                    args.extend(["--cwd".into(), folder.into()]);
                }
                args
            }
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_is_the_windows_arguments() {
        let args = |r: Route| r.args().into_iter().map(|a| a.into_string().unwrap()).collect::<Vec<_>>();
        assert!(args(Route::Runs).is_empty());
        assert_eq!(args(Route::Run("r1".into())), ["--open", "r1"]);
        assert_eq!(args(Route::EndedSince("2026-11-23T00:00:00Z".into())), ["--ended-since", "2026-11-23T00:00:00Z"]);
        assert_eq!(
            args(Route::Launch { preset: "fix".into(), folder: Some("/src/app".into()) }),
            ["--launch", "fix", "--cwd", "/src/app"]
        );
        assert_eq!(args(Route::Launch { preset: "fix".into(), folder: None }), ["--launch", "fix"]);
    }
}
