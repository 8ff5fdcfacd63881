//! The panel: the tray icon with the running count drawn on it, `N running
//! / M total` beside it, and its menu. GTK objects live on the GTK thread
//! only: the watcher sends plain [`TrayView`]s here, and the panel redraws
//! only what differs from what it shows. One file per menu item in
//! `items/`, each with its id, its line and its handler.

mod icon;
mod items;
mod menu;

use std::cell::RefCell;
use std::sync::Arc;

use gtk::glib;
use tray_icon::menu::MenuEvent;
use tray_icon::{TrayIcon, TrayIconBuilder};

use crate::error::TrayError;
use crate::state::TrayState;
use crate::view::TrayView;
use menu::Line;

thread_local! {
    /// The panel, owned by the GTK thread.
    static PANEL: RefCell<Option<Panel>> = const { RefCell::new(None) };
}

/// What the panel shows now. Runtime state only.
struct Panel {
    tray: TrayIcon,
    title: String,
    look: (u64, bool),
    lines: Vec<Line>,
    /// The last view, drawn again when a problem goes.
    view: Option<TrayView>,
    /// Why the tray cannot follow the store, while it cannot.
    problem: Option<String>,
}

/// Settings GTK reads once, at `gtk::init`, set for the tray alone.
#[must_use = "take the settings back once GTK has started"]
pub struct LightGtk {
    set: Vec<&'static str>,
}

/// The tray draws no widgets of its own (the panel draws its menu from
/// D-Bus), so GTK is told before it starts: never use GL (no GL driver is
/// loaded; Mesa's alone is tens of MB), and no accessibility bridge (which
/// would start the AT-SPI bus where none runs). A user's own settings win.
pub fn lighten_gtk() -> LightGtk {
    let mut set = Vec::new();
    for (var, value) in [("GDK_GL", "disable"), ("NO_AT_BRIDGE", "1")] {
        if std::env::var_os(var).is_none() {
            // Before any thread exists: nothing reads the environment meanwhile.
            std::env::set_var(var, value);
            set.push(var);
        }
    }
    LightGtk { set }
}

impl LightGtk {
    /// Takes the settings back once GTK has read them (before the tray
    /// starts any thread of its own), so what the tray starts — the window,
    /// which has widgets and readers of them, and shepherds with their
    /// agents — does not inherit them.
    pub fn take_back(self) {
        for var in self.set {
            std::env::remove_var(var);
        }
    }
}

/// Creates the tray icon (on the GTK thread, after `gtk::init`) with a
/// menu to open the window or quit; the watcher fills it at once.
pub fn create(state: Arc<TrayState>) -> Result<(), TrayError> {
    let lines = vec![items::open::line(), items::quit::line()];
    let (rgba, width, height) = icon::draw(0, false);
    let tray = TrayIconBuilder::new()
        .with_id("corral")
        .with_icon(tray_icon::Icon::from_rgba(rgba, width, height)?)
        .with_title("Corral")
        .with_tooltip("Corral")
        .with_menu(Box::new(menu::build(&lines)?))
        .build()?;
    MenuEvent::set_event_handler(Some(move |event: MenuEvent| items::clicked(&state, event.id().as_ref())));
    PANEL.with(|panel| {
        *panel.borrow_mut() =
            Some(Panel { tray, title: "Corral".into(), look: (0, false), lines, view: None, problem: None })
    });
    Ok(())
}

/// Shows `view` (from any thread: drawn on the GTK thread).
pub fn show(view: TrayView) {
    // Coalesced: the newest view waits here, and one draw is queued on the
    // GTK thread at a time, which takes whichever view is newest when it
    // runs. A burst of changes costs the draws the panel can make, never
    // a queue of stale ones behind it.
    *NEXT_VIEW.lock().unwrap_or_else(|e| e.into_inner()) = Some(view);
    if DRAW_QUEUED.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    on_panel(|panel| {
        DRAW_QUEUED.store(false, std::sync::atomic::Ordering::Release);
        if let Some(view) = NEXT_VIEW.lock().unwrap_or_else(|e| e.into_inner()).take() {
            panel.view = Some(view);
            panel.draw();
        }
    });
}

/// The newest view not drawn yet (see [`show`]). Runtime state only.
static NEXT_VIEW: std::sync::Mutex<Option<TrayView>> = std::sync::Mutex::new(None);
/// A draw is queued on the GTK thread.
static DRAW_QUEUED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Shows (or, with `None`, clears) why the tray cannot follow the store: a
/// line at the top of the menu and the tooltip. From any thread.
pub fn show_problem(problem: Option<String>) {
    on_panel(move |panel| {
        panel.problem = problem;
        panel.draw();
    });
}

/// Runs `work` on the GTK thread with the panel.
fn on_panel(work: impl FnOnce(&mut Panel) + Send + 'static) {
    glib::MainContext::default().invoke(move || {
        PANEL.with(|panel| {
            if let Some(panel) = panel.borrow_mut().as_mut() {
                work(panel);
            }
        })
    });
}

impl Panel {
    fn draw(&mut self) {
        let lines = match (&self.problem, &self.view) {
            (Some(problem), _) => {
                vec![items::problem::line(problem), Line::Separator, items::open::line(), items::quit::line()]
            }
            (None, Some(view)) => items::lines(view),
            (None, None) => return,
        };
        if let Some(view) = &self.view {
            let title = view.title();
            if self.title != title {
                self.tray.set_title(Some(&title));
                self.title = title;
            }
            let look = view.look();
            if self.look != look {
                let (rgba, width, height) = icon::draw(look.0, look.1);
                match tray_icon::Icon::from_rgba(rgba, width, height).map(|icon| self.tray.set_icon(Some(icon))) {
                    Ok(Ok(())) => self.look = look,
                    Ok(Err(e)) => tracing::warn!("cannot set the tray icon: {e}"),
                    Err(e) => tracing::warn!("cannot draw the tray icon: {e}"),
                }
            }
        }
        let tooltip = match &self.problem {
            Some(problem) => format!("Corral: {problem}"),
            None => self.title.clone(),
        };
        let _ = self.tray.set_tooltip(Some(&tooltip));
        if self.lines != lines {
            match menu::build(&lines) {
                Ok(built) => {
                    self.tray.set_menu(Some(Box::new(built)));
                    self.lines = lines;
                }
                Err(e) => tracing::warn!("cannot build the tray menu: {e}"),
            }
        }
    }
}
