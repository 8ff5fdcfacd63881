//! The runs window: one per program, which ends when it closes (WebKit's
//! processes cost hundreds of MB; the store holds all state, so opening it
//! again loses nothing).

use std::path::PathBuf;

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

/// The window's label.
pub const MAIN: &str = "main";

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
    /// The UI's route (`#/runs`, `#/run/ID`, `#/launch?preset=x&cwd=y`),
    /// with anything that is not plainly an id or a time dropped or encoded.
    pub fn hash(&self) -> String {
        match self {
            Route::Runs => "#/runs".into(),
            Route::Run(id) => format!("#/run/{}", keep(id, |c| c.is_ascii_alphanumeric())),
            Route::EndedSince(since) => {
                format!("#/runs?ended_since={}", keep(since, |c| c.is_ascii_alphanumeric() || "-:.TZ".contains(c)))
            }
            Route::Launch { preset, folder } => {
                let folder = folder.as_ref().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                format!("#/launch?preset={}&cwd={}", encode(preset), encode(&folder))
            }
        }
    }
}

fn keep(text: &str, keep: impl Fn(char) -> bool) -> String {
    text.chars().filter(|c| keep(*c)).collect()
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_keep_only_what_a_url_may_carry() {
        assert_eq!(Route::Runs.hash(), "#/runs");
        assert_eq!(Route::Run("ab12<script>".into()).hash(), "#/run/ab12script");
        assert_eq!(
            Route::EndedSince("2026-11-23T00:00:00Z\"".into()).hash(),
            "#/runs?ended_since=2026-11-23T00:00:00Z"
        );
        assert_eq!(
            Route::Launch { preset: "fix it".into(), folder: Some("/src/my app".into()) }.hash(),
            "#/launch?preset=fix%20it&cwd=/src/my%20app"
        );
    }
}
