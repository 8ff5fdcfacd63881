//! Where the runs window opens. Shared by the two desktop programs: the
//! tray starts `corral-app` with a route's arguments ([`Route::args`]), and
//! the window shows the page's route for them ([`Route::hash`]).

use std::ffi::OsString;
use std::path::PathBuf;

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
    /// The launch form with a host of config.toml chosen.
    LaunchOn(String),
}

impl Route {
    /// `corral-app`'s arguments for this route.
    pub fn args(&self) -> Vec<OsString> {
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
            Route::LaunchOn(host) => vec!["--launch-on".into(), host.into()],
        }
    }

    /// The page's route (`#/runs`, `#/run/ID`, `#/launch?preset=x&cwd=y`),
    /// with anything that is not plainly an id or a time dropped, and
    /// names and folders percent-encoded.
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
            Route::LaunchOn(host) => format!("#/launch?host={}", encode(host)),
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
        assert_eq!(args(Route::LaunchOn("box".into())), ["--launch-on", "box"]);
        assert_eq!(Route::LaunchOn("b x".into()).hash(), "#/launch?host=b%20x");
        assert_eq!(args(Route::Launch { preset: "fix".into(), folder: None }), ["--launch", "fix"]);
    }

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
