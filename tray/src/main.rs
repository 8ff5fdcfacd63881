//! `corral-tray`: Corral's tray. It sits in the panel all day, so it holds
//! no webview: the running count drawn on the icon and `N running / M
//! total` beside it, a menu of recent runs and presets, and one
//! notification per piece of work (a click opens the run). The runs window
//! is another program, `corral-app`, started on demand and gone when
//! closed.
//!
//! One tray per Corral home: a second start (`corral-tray --window`, as the
//! desktop entry does) opens the window and leaves. The same binary is also
//! a shepherd (`corral-tray shepherd <id>`), as the tray starts queued runs
//! when it heals the store.

mod asks;
mod error;
mod hosts;
mod instance;
mod notify;
mod panel;
mod retention;
mod schedules;
mod state;
mod view;
mod watcher;
mod window;

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use state::TrayState;
use window::Route;

/// Corral's tray: the running count, recent runs, notifications.
#[derive(Parser)]
#[command(name = "corral-tray", version)]
struct Args {
    /// Also open the runs window (the desktop entry's start: the tray
    /// starts if it is not running, and the window opens either way).
    #[arg(long)]
    window: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Supervises one run (started by the tray when it starts queued runs).
    #[command(hide = true)]
    Shepherd { run: String },
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Shepherd { run }) = args.command {
        return corral::shepherd::main("corral-tray", &run);
    }
    corral::home::logging::init("warn");
    match run_tray(args.window) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("corral-tray: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_tray(open_window: bool) -> anyhow::Result<()> {
    let home = corral::Home::from_env()?;
    let Some(_instance) = instance::claim(&home)? else {
        if open_window {
            window::open(&Route::Runs);
        } else {
            eprintln!("corral-tray: already running for {}", home.data_dir().display());
        }
        return Ok(());
    };
    // An entry an older Corral wrote to start `corral-app` (the tray then)
    // would open the window at every login.
    corral::home::autostart::bring_up_to_date();
    let light = panel::lighten_gtk();
    gtk::init()?;
    light.take_back();
    // The StatusNotifierItem's title, which panels that draw no label (KDE,
    // Xfce) show on hover: libayatana-appindicator says the application's
    // name there, the program's file name ("corral-tray") unless set.
    gtk::glib::set_application_name("Corral");
    let state = Arc::new(TrayState::new(home));
    panel::create(state.clone())?;
    retention::start(state.home.clone()).map_err(error::TrayError::Retention)?;
    hosts::start(state.home.clone()).map_err(error::TrayError::Hosts)?;
    // Each open pull request asked about at most once a minute: what the
    // forge asks of a run becomes a "Needs you" item.
    corral::forge::start_following(state.home.clone()).map_err(error::TrayError::Pulls)?;
    schedules::start(state.home.clone()).map_err(error::TrayError::Schedules)?;
    // Answers from the phone and what needs the user pushed, while the tray
    // runs (a change to [push] takes effect at the tray's next start).
    match corral::push::listen::start(&state.home) {
        Ok(_) | Err(corral::push::listen::ListenError::NoPush) => {}
        Err(e) => {
            tracing::warn!("pushes do not start: {e}");
            notify::problem(&format!("Pushes to your phone do not start: {e}"));
        }
    }
    watcher::start(state)?;
    if open_window {
        window::open(&Route::Runs);
    }
    gtk::main();
    Ok(())
}
