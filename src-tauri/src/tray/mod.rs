//! The tray: the running count drawn on the icon, `N running / M total` as
//! its title, and a menu rebuilt only when what it shows changed. One file
//! per menu item in `items/`, each with its id and its handler.

mod icon;
mod items;

use std::sync::Mutex;

use corral::store::{Counts, RunFilter};
use corral::Store;
use tauri::menu::{Menu, PredefinedMenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Manager};

use crate::error::AppError;
use crate::state::AppState;

/// The tray's id.
const TRAY: &str = "corral";
/// Runs listed in the menu.
const RECENT: usize = 8;

/// What the tray shows now, to skip redundant updates.
#[derive(Default)]
struct Shown {
    title: String,
    icon: Option<(u64, bool)>,
    menu: String,
    /// Why the tray cannot follow the store, while it cannot.
    problem: Option<String>,
}

/// Creates the tray icon with an empty state; the watcher fills it at once.
pub fn create(app: &AppHandle) -> tauri::Result<TrayIcon> {
    app.manage(Mutex::new(Shown::default()));
    TrayIconBuilder::with_id(TRAY)
        .icon(icon::draw(0, false))
        .title("Corral")
        .tooltip("Corral")
        .show_menu_on_left_click(false)
        .on_menu_event(|app, event| items::handle(app, event.id().as_ref()))
        .on_tray_icon_event(|tray, event| {
            if let TrayIconEvent::Click { button: MouseButton::Left, button_state: MouseButtonState::Up, .. } = event {
                crate::window::open(tray.app_handle(), None);
            }
        })
        .build(app)
}

/// The title: `N running / M total`.
pub fn title(counts: &Counts) -> String {
    format!("{} running / {} total", counts.running, counts.total)
}

/// Brings the tray up to date with the store and `counts` (read by the
/// caller, who may need them too).
pub fn refresh(app: &AppHandle, store: &Store, counts: Counts) -> Result<(), AppError> {
    let Some(tray) = app.tray_by_id(TRAY) else { return Ok(()) };
    let runs = store.runs(&RunFilter { limit: Some(RECENT), ..RunFilter::default() })?;
    let state = app.state::<AppState>();
    let launchable = items::launch::entries(&state.home);
    let shown = app.state::<Mutex<Shown>>();
    let mut shown = shown.lock().expect("tray state");

    let title = title(&counts);
    if shown.title != title {
        let _ = tray.set_title(Some(&title));
        let _ = tray.set_tooltip(Some(&title));
        shown.title = title;
    }
    // Red while something needs the user: an unseen failure or denial, or
    // a run whose agent keeps retrying.
    let look = (counts.running, counts.attention > 0);
    if shown.icon != Some(look) {
        let _ = tray.set_icon(Some(icon::draw(look.0, look.1)));
        shown.icon = Some(look);
    }
    let quiet = state.quiet();
    let signature = format!(
        "{counts:?}|{:?}|{launchable:?}|{:?}|{quiet}",
        runs.iter().map(|r| (&r.id, r.status, &r.retrying)).collect::<Vec<_>>(),
        shown.problem
    );
    if shown.menu != signature {
        let menu = build_menu(app, &counts, &runs, &launchable, shown.problem.as_deref(), quiet)?;
        let _ = tray.set_menu(Some(menu));
        shown.menu = signature;
    }
    Ok(())
}

/// Shows (or, with `None`, clears) why the tray cannot follow the store:
/// a line at the top of the menu and the tooltip. Works without the store.
pub fn set_problem(app: &AppHandle, problem: Option<&str>) {
    let Some(tray) = app.tray_by_id(TRAY) else { return };
    let shown = app.state::<Mutex<Shown>>();
    let mut shown = shown.lock().expect("tray state");
    shown.problem = problem.map(str::to_string);
    shown.menu.clear(); // rebuilt by the next refresh
    if let Some(problem) = problem {
        let _ = tray.set_tooltip(Some(&format!("Corral: {problem}")));
        if let Ok(menu) = problem_menu(app, problem) {
            let _ = tray.set_menu(Some(menu));
        }
    } else {
        shown.title.clear();
    }
}

/// The menu while the store cannot be read: the problem, Open, Quit.
fn problem_menu(app: &AppHandle, problem: &str) -> tauri::Result<Menu<tauri::Wry>> {
    let menu = Menu::new(app)?;
    menu.append(&items::problem::item(app, problem)?)?;
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    menu.append(&items::open::item(app)?)?;
    menu.append(&items::quit::item(app)?)?;
    Ok(menu)
}

fn build_menu(
    app: &AppHandle,
    counts: &Counts,
    runs: &[corral::Run],
    launchable: &[items::launch::Entry],
    problem: Option<&str>,
    quiet: bool,
) -> tauri::Result<Menu<tauri::Wry>> {
    let menu = Menu::new(app)?;
    if let Some(problem) = problem {
        menu.append(&items::problem::item(app, problem)?)?;
    }
    menu.append(&items::counts::item(app, counts)?)?;
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    menu.append(&items::launch::submenu(app, launchable)?)?;
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    for item in items::recent::items(app, runs)? {
        menu.append(&item)?;
    }
    menu.append(&PredefinedMenuItem::separator(app)?)?;
    menu.append(&items::open::item(app)?)?;
    menu.append(&items::clear::item(app)?)?;
    menu.append(&items::quiet::item(app, quiet)?)?;
    menu.append(&items::quit::item(app)?)?;
    Ok(menu)
}
