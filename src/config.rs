//! Settings from `config.toml` in Corral's config folder.
//!
//! Every setting has a default, so the file is optional; a file that cannot
//! be read is an error that names the file and the key, never a silent
//! fallback.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::home::Home;

/// Corral's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// How long an agent may take to exit by itself after its terminal event.
    pub exit_grace: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config { exit_grace: Duration::from_secs(1), stop_grace: Duration::from_secs(3) }
    }
}

/// A settings file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It exists but could not be read.
    #[error("cannot read the settings file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// It is not valid TOML of the expected shape.
    #[error("invalid settings file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ConfigFile {
    exit_grace: Option<String>,
    stop_grace: Option<String>,
}

impl Config {
    /// Reads `config.toml` of `home`, or the defaults if there is none.
    pub fn load(home: &Home) -> Result<Config, ConfigError> {
        Config::load_file(&home.config_file())
    }

    /// Reads one settings file, or the defaults if it does not exist.
    pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => return Err(ConfigError::Read { path: path.to_path_buf(), source }),
        };
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        let file: ConfigFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let mut config = Config::default();
        let duration = |key: &str, value: &str| {
            humantime::parse_duration(value)
                .map_err(|e| invalid(format!("`{key} = \"{value}\"` is not a duration ({e}); write e.g. \"3s\"")))
        };
        if let Some(v) = &file.exit_grace {
            config.exit_grace = duration("exit_grace", v)?;
        }
        if let Some(v) = &file.stop_grace {
            config.stop_grace = duration("stop_grace", v)?;
        }
        Ok(config)
    }
}
