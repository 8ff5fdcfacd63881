//! `corral-app`: Corral's tray app. A thin shell over the `corral` core: the
//! running count in the tray, one notification per finished run (a click
//! opens its transcript), and a runs window that is destroyed when closed.
//!
//! The same binary is also a shepherd (`corral-app shepherd <id>`), so the
//! app works without the `corral` CLI installed.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod autostart;
mod commands;
mod error;
mod events;
mod folders;
mod notify;
mod open;
mod state;
mod tray;
mod watcher;
mod window;

use tauri::{Manager, RunEvent};

use state::AppState;

/// The window is a small page of text and tables: WebKitGTK's accelerated
/// compositing costs more than it brings, above all where GL is software
/// (llvmpipe: ~100 ms of CPU per redraw of a streaming transcript, against
/// a few ms painted without it). A user's own setting wins.
fn paint_without_gl_compositing() {
    const VAR: &str = "WEBKIT_DISABLE_COMPOSITING_MODE";
    if std::env::var_os(VAR).is_none() {
        // Before any thread exists: nothing reads the environment meanwhile.
        std::env::set_var(VAR, "1");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("shepherd") {
        std::process::exit(run_shepherd(args.get(2)));
    }
    paint_without_gl_compositing();
    init_logging();
    let open = open_argument(&args);
    let home = match corral::Home::from_env() {
        Ok(home) => home,
        Err(e) => {
            eprintln!("corral-app: {e}");
            std::process::exit(2);
        }
    };

    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| {
            // A second launch focuses this instance, on a run if asked.
            window::open(app, open_argument(&argv).as_deref());
        }))
        .plugin(tauri_plugin_dialog::init())
        .manage(AppState::new(home))
        .invoke_handler(tauri::generate_handler![
            commands::runs::list_runs,
            commands::runs::get_run,
            commands::runs::transcript,
            commands::runs::transcript_size,
            commands::runs::abort_run,
            commands::runs::relaunch_run,
            commands::runs::clear_finished,
            commands::runs::timeline,
            commands::review::run_changes,
            commands::review::merge_run,
            commands::review::discard_run,
            commands::review::open_run_folder,
            commands::review::open_run_terminal,
            commands::review::reply_run,
            commands::review::run_replies,
            commands::review::worktrees_usage,
            commands::presets::list_presets,
            commands::launch::launch_run,
            commands::launch::pick_folder,
            commands::launch::recent_folders,
            commands::store::counts,
            commands::store::store_problem,
            commands::settings::settings,
            commands::settings::set_autostart,
        ])
        .setup(move |app| {
            let handle = app.handle().clone();
            tray::create(&handle)?;
            watcher::start(handle.clone());
            if let Some(run) = &open {
                window::open(&handle, Some(run));
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .expect("the app starts");

    app.run(|app, event| {
        if let RunEvent::ExitRequested { code, api, .. } = event {
            // Closing the window destroys it; the app lives on in the tray
            // until Quit.
            if code.is_none() && !app.state::<AppState>().quitting() {
                api.prevent_exit();
            }
        }
    });
}

/// `--open RUN` or `--open=RUN`.
fn open_argument(args: &[String]) -> Option<String> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--open" {
            return iter.next().cloned();
        }
        if let Some(id) = arg.strip_prefix("--open=") {
            return Some(id.to_string());
        }
    }
    None
}

fn run_shepherd(run: Option<&String>) -> i32 {
    init_logging();
    let Some(run) = run else {
        eprintln!("corral-app shepherd: missing run id");
        return 2;
    };
    let result = corral::Home::from_env()
        .map_err(anyhow::Error::from)
        .and_then(|home| corral::shepherd::shepherd(&home, run).map_err(anyhow::Error::from));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("corral-app shepherd {run}: {e:#}");
            1
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORRAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
