//! The runs window. It exists only while shown: closing it destroys the
//! webview (WebKit's processes cost hundreds of MB), and opening it again
//! builds a new one from the store, which holds all state.

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

/// The window's label.
pub const MAIN: &str = "main";

/// Shows the window (creating it if needed), on run `run` if given.
pub fn open(app: &AppHandle, run: Option<&str>) {
    let route = match run {
        Some(id) => format!("#/run/{}", sanitize(id)),
        None => "#/runs".to_string(),
    };
    navigate(app, &route);
}

/// Shows the runs list filtered to runs that ended since `since` (a
/// summary notification's click).
pub fn open_ended_since(app: &AppHandle, since: &str) {
    let since: String = since.chars().filter(|c| c.is_ascii_alphanumeric() || "-:.TZ".contains(*c)).collect();
    navigate(app, &format!("#/runs?ended_since={since}"));
}

/// Shows the window on a route of the UI (`#/runs`, `#/launch?preset=x`).
/// Safe to call from any thread: the work is done on the main thread.
pub fn navigate(app: &AppHandle, route: &str) {
    let handle = app.clone();
    let route = route.to_string();
    let _ = app.run_on_main_thread(move || show_route(&handle, &route));
}

fn show_route(app: &AppHandle, route: &str) {
    if let Some(window) = app.get_webview_window(MAIN) {
        let script = format!("window.location.hash = {};", serde_json::to_string(route).unwrap_or_default());
        let _ = window.eval(&script);
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
        return;
    }
    let url = WebviewUrl::App(format!("index.html{route}").into());
    let built = WebviewWindowBuilder::new(app, MAIN, url)
        .title("Corral")
        .inner_size(1120.0, 740.0)
        .min_inner_size(720.0, 480.0)
        .build();
    if let Err(e) = built {
        tracing::error!("cannot open the window: {e}");
    }
}

/// Run ids are letters and digits; anything else is dropped before it
/// reaches a URL.
fn sanitize(id: &str) -> String {
    id.chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}
