//! The runs window: one per program, which ends when it closes (WebKit's
//! processes cost hundreds of MB; the store holds all state, so opening it
//! again loses nothing).

pub use corral::attention::window_route::Route;
use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

/// The window's label.
pub const MAIN: &str = "main";

/// Shows the window on `route`, creating it if needed. Safe to call from
/// any thread: the work is done on the main thread.
pub fn show(app: &AppHandle, route: &Route) {
    let handle = app.clone();
    let hash = route.hash();
    let _ = app.run_on_main_thread(move || show_hash(&handle, &hash));
}

fn show_hash(app: &AppHandle, hash: &str) {
    if let Some(window) = app.get_webview_window(MAIN) {
        let script = format!("window.location.hash = {};", serde_json::to_string(hash).unwrap_or_default());
        let _ = window.eval(&script);
        let _ = window.unminimize();
        let _ = window.show();
        let _ = window.set_focus();
        return;
    }
    let url = WebviewUrl::App(format!("index.html{hash}").into());
    let built = WebviewWindowBuilder::new(app, MAIN, url)
        .title("Corral")
        .inner_size(1120.0, 740.0)
        .min_inner_size(720.0, 480.0)
        .build();
    if let Err(e) = built {
        tracing::error!("cannot open the window: {e}");
        app.exit(1);
    }
}
