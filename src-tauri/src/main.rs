//! `corral-app`: Corral's runs window, a thin shell over the `corral` core.
//! It lists and inspects runs, launches, reviews and replies. The tray
//! (`corral-tray`, no webview) starts it on demand; it ends when its window
//! closes, and WebKit's processes with it. One window at a time: a second
//! start hands its request to the open window and leaves. It works without
//! the tray (it follows and heals the store itself).
//!
//! The same binary is also a shepherd (`corral-app shepherd <id>`), so the
//! window works without the `corral` CLI installed.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod commands;
mod error;
mod events;
mod open;
mod state;
mod watcher;
mod window;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use state::AppState;
use window::Route;

/// Corral's runs window.
#[derive(Parser, Debug)]
#[command(name = "corral-app", version)]
struct Args {
    /// Open on this run's transcript.
    #[arg(long, value_name = "RUN", conflicts_with_all = ["launch", "ended_since", "launch_on"])]
    open: Option<String>,
    /// Open the launch form for a host of config.toml.
    #[arg(long, value_name = "HOST", conflicts_with_all = ["launch", "ended_since"])]
    launch_on: Option<String>,
    /// Open the launch form for this preset.
    #[arg(long, value_name = "PRESET", conflicts_with = "ended_since")]
    launch: Option<String>,
    /// The folder of the preset to launch (a project preset's folder).
    #[arg(long, value_name = "DIR", requires = "launch")]
    cwd: Option<PathBuf>,
    /// Open on the runs that ended since this moment (RFC 3339).
    #[arg(long, value_name = "TIME")]
    ended_since: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Supervises one run (started when the window launches or heals).
    #[command(hide = true)]
    Shepherd { run: String },
}

impl Args {
    /// Where the window opens.
    fn route(&self) -> Route {
        match (&self.open, &self.launch, &self.ended_since) {
            (Some(run), _, _) => Route::Run(run.clone()),
            (_, Some(preset), _) => Route::Launch { preset: preset.clone(), folder: self.cwd.clone() },
            (_, _, Some(since)) => Route::EndedSince(since.clone()),
            _ if self.launch_on.is_some() => Route::LaunchOn(self.launch_on.clone().unwrap_or_default()),
            _ => Route::Runs,
        }
    }
}

/// The window is a small page of text and tables, painted without GL:
/// WebKitGTK's accelerated compositing costs more than it brings, above all
/// where GL is software (llvmpipe: ~100 ms of CPU per redraw of a streaming
/// transcript, against a few ms painted without it); and its DMA-BUF
/// renderer, which hands GPU buffers between WebKit's processes, only delays
/// the first paint then (390–930 ms after start with it, 330–450 ms without,
/// under Xvfb). A user's own settings win.
fn paint_without_gl() {
    for var in ["WEBKIT_DISABLE_COMPOSITING_MODE", "WEBKIT_DISABLE_DMABUF_RENDERER"] {
        if std::env::var_os(var).is_none() {
            // Before any thread exists: nothing reads the environment meanwhile.
            std::env::set_var(var, "1");
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Shepherd { run }) = &args.command {
        return corral::shepherd::main("corral-app", run);
    }
    corral::home::logging::init("warn");
    paint_without_gl();
    let home = match corral::Home::from_env() {
        Ok(home) => home,
        Err(e) => {
            eprintln!("corral-app: {e}");
            return ExitCode::from(2);
        }
    };
    let route = args.route();
    // An older Corral's autostart entry started this program (the tray
    // then): the window opens at the first login after an upgrade, once.
    corral::home::autostart::bring_up_to_date();

    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| {
            // A second start shows this window, where it asked.
            match Args::try_parse_from(&argv) {
                Ok(args) => window::show(app, &args.route()),
                Err(e) => tracing::warn!("a second start asked for something unknown: {e}"),
            }
        }))
        .plugin(tauri_plugin_dialog::init())
        .manage(AppState::new(home))
        .invoke_handler(tauri::generate_handler![
            commands::runs::list_runs,
            commands::needs::needs,
            commands::needs::act_on_need,
            commands::runs::get_run,
            commands::runs::transcript,
            commands::runs::transcript_size,
            commands::runs::abort_run,
            commands::runs::pause_run,
            commands::runs::answer_budget,
            commands::runs::relaunch_run,
            commands::runs::clear_finished,
            commands::runs::timeline,
            commands::review::run_changes,
            commands::review::merge_run,
            commands::review::open_pull_request,
            commands::review::pull_request,
            commands::review::review_runs,
            commands::review::merge_runs,
            commands::review::discard_run,
            commands::review::open_run_folder,
            commands::review::open_run_terminal,
            commands::review::reply_run,
            commands::review::run_replies,
            commands::review::worktrees_usage,
            commands::presets::list_presets,
            commands::presets::list_hosts,
            commands::launch::launch_run,
            commands::launch::pick_folder,
            commands::launch::recent_folders,
            commands::store::counts,
            commands::store::store_problem,
            commands::settings::settings,
            commands::settings::set_autostart,
            commands::settings::doctor,
            commands::schedules::list_schedules,
            commands::schedules::pause_schedule,
            commands::schedules::run_schedule_now,
        ])
        .setup(move |app| {
            let handle = app.handle().clone();
            watcher::start(handle.clone())?;
            window::show(&handle, &route);
            Ok(())
        })
        .build(tauri::generate_context!());
    match app {
        // Closing the window ends the program.
        Ok(app) => {
            app.run(|_, _| {});
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("corral-app: cannot start the window: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command registered but not declared in build.rs and granted in
    /// the capability is refused to the window at run time (the Pause
    /// button was, for a round).
    #[test]
    fn every_registered_command_is_declared_and_granted() {
        let main = include_str!("main.rs");
        let handlers = main.split("generate_handler![").nth(1).unwrap().split("])").next().unwrap();
        let build = include_str!("../build.rs");
        let granted = include_str!("../capabilities/default.json");
        for name in handlers.split(',').filter_map(|h| h.trim().rsplit("::").next()).filter(|n| !n.is_empty()) {
            assert!(build.contains(&format!("\"{name}\"")), "{name} is not declared in build.rs");
            let permission = format!("\"allow-{}\"", name.replace('_', "-"));
            assert!(granted.contains(&permission), "{name} is not granted in capabilities/default.json");
        }
    }

    #[test]
    fn the_arguments_say_where_the_window_opens() {
        let route = |argv: &[&str]| Args::try_parse_from(argv).unwrap().route();
        assert_eq!(route(&["corral-app"]), Route::Runs);
        assert_eq!(route(&["corral-app", "--open", "r1"]), Route::Run("r1".into()));
        assert_eq!(
            route(&["corral-app", "--launch", "fix", "--cwd", "/src/app"]),
            Route::Launch { preset: "fix".into(), folder: Some("/src/app".into()) }
        );
        assert_eq!(
            route(&["corral-app", "--ended-since", "2026-11-23T00:00:00Z"]),
            Route::EndedSince("2026-11-23T00:00:00Z".into())
        );
        assert!(Args::try_parse_from(["corral-app", "--cwd", "/src"]).is_err(), "a folder needs a preset");
        assert!(
            Args::try_parse_from(["corral-app", "--open", "r1", "--launch", "fix"]).is_err(),
            "one place at a time"
        );
    }

    #[test]
    fn what_the_tray_asks_for_is_where_the_window_opens() {
        for route in [
            Route::Runs,
            Route::Run("r1".into()),
            Route::EndedSince("2026-11-23T00:00:00.000Z".into()),
            Route::Launch { preset: "fix".into(), folder: Some("/src/my app".into()) },
            Route::Launch { preset: "review".into(), folder: None },
            Route::LaunchOn("box".into()),
        ] {
            let argv = std::iter::once("corral-app".into()).chain(route.args());
            assert_eq!(Args::try_parse_from(argv).unwrap().route(), route);
        }
    }
}
