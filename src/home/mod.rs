//! Where Corral keeps its files.
//!
//! `CORRAL_HOME` relocates everything (database, run folders, config, global
//! presets) under one folder, which is how tests and users keep installations
//! apart. Without it the platform's data and config folders are used.
//! Every folder Corral creates is 0700 and every file 0600: transcripts hold
//! source code and prompts that other local users have no business reading.
//!
//! The wing around it holds what Corral keeps there for the user: the
//! settings of `config.toml` (`config`), what its programs log
//! (`logging`), the tray's start at login (`autostart`), and the folders
//! the window last worked in (`recent_folders`).

pub mod autostart;
pub mod config;
pub mod logging;
pub mod recent_folders;

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The environment variable that relocates all of Corral's files.
pub const HOME_ENV: &str = "CORRAL_HOME";

/// Mode of every folder Corral creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file Corral creates.
pub const FILE_MODE: u32 = 0o600;

/// Failure to find or prepare Corral's folders.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// Neither `CORRAL_HOME` nor a home directory is known.
    #[error("cannot find a home folder for Corral: set CORRAL_HOME or HOME")]
    NoHome,
    /// A folder could not be created or secured.
    #[error("cannot prepare folder {path}: {source}")]
    Folder { path: PathBuf, source: io::Error },
    /// Corral's folder is another user's, or others can write it.
    #[error(transparent)]
    NotYours(#[from] crate::trust::ownership::NotYours),
}

/// The folders Corral uses: data (database, runs) and config (settings,
/// global presets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    data: PathBuf,
    config: PathBuf,
}

impl Home {
    /// Corral's folders as this process's environment says: `CORRAL_HOME`
    /// if set, else the platform's data and config folders. (Inside a run,
    /// see `caller::home`.)
    pub fn from_env() -> Result<Home, HomeError> {
        Home::from_root(std::env::var_os(HOME_ENV))
    }

    /// Everything under `root` if it is set and not empty, else the
    /// platform's data and config folders.
    pub fn from_root(root: Option<std::ffi::OsString>) -> Result<Home, HomeError> {
        match root {
            Some(root) if !root.is_empty() => Ok(Home::at(absolute(Path::new(&root)))),
            _ => {
                let dirs = directories::ProjectDirs::from("", "", "corral").ok_or(HomeError::NoHome)?;
                Ok(Home { data: dirs.data_dir().to_path_buf(), config: dirs.config_dir().to_path_buf() })
            }
        }
    }

    /// Everything under one folder, as `CORRAL_HOME` does.
    pub fn at(root: impl Into<PathBuf>) -> Home {
        let root = root.into();
        Home { data: root.clone(), config: root }
    }

    /// The root that a child process must see as `CORRAL_HOME` to share this
    /// installation (the data folder holds the database).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Folder of settings and global presets.
    pub fn config_dir(&self) -> &Path {
        &self.config
    }

    /// The SQLite database.
    pub fn database(&self) -> PathBuf {
        self.data.join("corral.db")
    }

    /// The store's bell (a FIFO), rung after each commit: see
    /// `process::Bell`.
    pub fn bell(&self) -> PathBuf {
        self.data.join("corral.bell")
    }

    /// The launch template's socket (see `template`): a launch asks the
    /// warm process listening there before it starts cold.
    pub fn template_socket(&self) -> PathBuf {
        self.data.join("corral.template")
    }

    /// Held by the one template of this installation while it lives.
    pub fn template_lock(&self) -> PathBuf {
        self.data.join("corral.template.lock")
    }

    /// Parent folder of all run folders.
    pub fn runs_dir(&self) -> PathBuf {
        self.data.join("runs")
    }

    /// One run's folder: stdout.log, stderr.log, signals.log, ...
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir().join(run_id)
    }

    /// One schedule's folder: the environment its runs start with.
    pub fn schedule_dir(&self, name: &str) -> PathBuf {
        self.data.join("schedules").join(name)
    }

    /// Parent folder of the runs' git worktrees.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.data.join("worktrees")
    }

    /// Corral's global presets folder.
    pub fn presets_dir(&self) -> PathBuf {
        self.config.join("presets")
    }

    /// The settings file.
    pub fn config_file(&self) -> PathBuf {
        self.config.join("config.toml")
    }

    /// Environment for a process that must use this same installation.
    pub fn env_value(&self) -> Option<PathBuf> {
        (self.data == self.config).then(|| self.data.clone())
    }

    /// Creates the data, runs and config folders (0700) if missing, and
    /// refuses folders (there already, or above them) that are another
    /// user's or that others can write: the database and the settings
    /// decide what runs as the user. An existing folder's mode is never
    /// changed: Corral did not make it.
    pub fn ensure(&self) -> Result<(), HomeError> {
        for dir in [self.data.clone(), self.runs_dir(), self.config.clone()] {
            ensure_private_dir(&dir)?;
        }
        // The runs' folders are Corral's own, whatever the mode of a home
        // the user made (or an older Corral left): never readable by others.
        keep_private(&self.runs_dir())?;
        for dir in [&self.data, &self.config] {
            crate::trust::ownership::check(dir)?;
        }
        Ok(())
    }
}

/// Creates `path` and its missing parents as 0700. A folder that exists is
/// left as it is.
pub fn ensure_private_dir(path: &Path) -> Result<(), HomeError> {
    let err = |source| HomeError::Folder { path: path.to_path_buf(), source };
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(path).map_err(err)
}

/// Creates `path` (and its parents) as [`ensure_private_dir`] does, and
/// makes it 0700 if it exists with more: for the folders that are Corral's
/// own (runs, worktrees), which must stay the user's alone.
pub fn keep_private(path: &Path) -> Result<(), HomeError> {
    ensure_private_dir(path)?;
    let err = |source| HomeError::Folder { path: path.to_path_buf(), source };
    let mode = std::fs::metadata(path).map_err(err)?.permissions().mode() & 0o777;
    if mode != DIR_MODE {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE)).map_err(err)?;
    }
    Ok(())
}

/// Opens (creating 0600 if needed) a file for appending.
pub fn open_private_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(FILE_MODE).open(path)
}

/// Creates (or truncates) a 0600 file for writing.
pub fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).write(true).truncate(true).mode(FILE_MODE).open(path)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
