//! Presets as the window shows them: each with its file, what it
//! overrides, and the files that could not be used.

use corral::preset::{self, PresetSet, Roots};
use tauri::State;

use crate::error::AppError;
use crate::state::AppState;

/// The presets in effect for `cwd` (or only the global ones), each marked
/// if its agent cannot start (with this program's PATH, which runs
/// launched from the window get).
#[tauri::command(async)]
pub fn list_presets(
    state: State<'_, AppState>,
    cwd: Option<String>,
    host: Option<String>,
) -> Result<serde_json::Value, AppError> {
    let cwd = cwd.filter(|c| !c.is_empty());
    if let Some(host) = host.filter(|h| !h.is_empty()) {
        return remote_presets(&state, &host, cwd.as_deref());
    }
    let set = local_presets(&state, cwd.map(std::path::PathBuf::from));
    serde_json::to_value(set).map_err(|e| AppError::Invalid(e.to_string()))
}

/// The names of the hosts of config.toml, for the launch form.
#[tauri::command(async)]
pub fn list_hosts(state: State<'_, AppState>) -> Result<Vec<String>, AppError> {
    Ok(corral::home::config::Config::load(&state.home)?.hosts.into_iter().map(|h| h.name).collect())
}

/// The presets of host `host` for its folder `cwd`, as its `corral
/// presets --json` says, in the shape the form reads.
fn remote_presets(state: &AppState, host: &str, cwd: Option<&str>) -> Result<serde_json::Value, AppError> {
    let mut args: Vec<std::ffi::OsString> = vec!["presets".into(), "--json".into()];
    if let Some(cwd) = cwd {
        args.extend(["--cwd".into(), cwd.into()]);
    }
    let (_, printed) = corral::remote::call(&state.home, host, &args)?;
    let entries: Vec<serde_json::Value> =
        serde_json::from_slice(&printed).map_err(|e| corral::remote::RemoteError::Garbled {
            host: host.to_string(),
            what: "corral presets --json",
            detail: e.to_string(),
        })?;
    let presets: Vec<&serde_json::Value> = entries.iter().filter(|e| e["name"].is_string()).collect();
    Ok(serde_json::json!({ "presets": presets, "problems": [], "searched": [] }))
}

fn local_presets(state: &AppState, cwd: Option<std::path::PathBuf>) -> PresetSet {
    let mut set = preset::discover(&Roots::new(&state.home, cwd.as_deref()));
    let folder = cwd.unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| "/".into()));
    set.mark_unavailable(std::env::var_os("PATH").as_deref(), &folder);
    set
}
