//! Starting the tray at login: an XDG `.desktop` entry. The user's own entry
//! in `~/.config/autostart/` decides; without one, the system's (the Debian
//! package installs `/etc/xdg/autostart/corral.desktop`) does. Turning it
//! off while the system's exists writes a user entry with `Hidden=true`,
//! which is how XDG autostart lets a user opt out.
//!
//! The window switches it (Settings); the tray brings an entry written by an
//! older Corral, which started `corral-app` when that was the tray, up to
//! date when it starts.

use std::path::{Path, PathBuf};

/// Why the autostart entry could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum AutostartError {
    /// No home folder to find `~/.config` in.
    #[error("cannot find the autostart folder: neither XDG_CONFIG_HOME nor HOME is set")]
    NoHome,
    /// The tray is not installed beside this program.
    #[error("corral-tray is not installed beside {0}: install it there to start it at login")]
    NoTray(String),
    /// Writing or removing the entry failed.
    #[error("cannot change {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

const FILE: &str = "corral.desktop";

/// Where the entries are: the user's, and the system's folders in order.
struct Places {
    user: PathBuf,
    system: Vec<PathBuf>,
}

impl Places {
    /// As XDG says: `$XDG_CONFIG_HOME` (else `~/.config`) and
    /// `$XDG_CONFIG_DIRS` (else `/etc/xdg`).
    fn of_this_session() -> Option<Places> {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        let dirs = std::env::var("XDG_CONFIG_DIRS").ok().filter(|d| !d.is_empty()).unwrap_or_else(|| "/etc/xdg".into());
        Some(Places { user: config, system: dirs.split(':').map(PathBuf::from).collect() })
    }

    fn user_entry(&self) -> PathBuf {
        self.user.join("autostart").join(FILE)
    }

    fn system_entry(&self) -> Option<PathBuf> {
        self.system.iter().map(|d| d.join("autostart").join(FILE)).find(|p| p.is_file())
    }

    fn enabled(&self) -> bool {
        let user = self.user_entry();
        if user.is_file() {
            return !std::fs::read_to_string(user).unwrap_or_default().lines().any(|l| l.trim() == "Hidden=true");
        }
        self.system_entry().is_some()
    }

    fn set(&self, on: bool, exe: &Path) -> Result<(), AutostartError> {
        let path = self.user_entry();
        let failed = |source| AutostartError::Io { path: path.clone(), source };
        let text = match (on, self.system_entry().is_some()) {
            (false, false) => {
                return match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(failed(e)),
                    _ => Ok(()),
                };
            }
            (false, true) => "[Desktop Entry]\nType=Application\nName=Corral\nHidden=true\n".to_string(),
            (true, _) => format!(
                "[Desktop Entry]\nType=Application\nName=Corral\nComment=Background coding agents, supervised\nExec=\"{}\"\nX-GNOME-Autostart-enabled=true\nTerminal=false\n",
                exe.display()
            ),
        };
        std::fs::create_dir_all(path.parent().expect("has a parent")).map_err(failed)?;
        std::fs::write(&path, text).map_err(failed)
    }

    /// Points a user entry that starts the window's program (an older
    /// Corral's tray) at `tray`. True if it did.
    fn migrate(&self, tray: &Path) -> Result<bool, AutostartError> {
        let text = std::fs::read_to_string(self.user_entry()).unwrap_or_default();
        let starts_the_window = text
            .lines()
            .filter_map(|line| line.strip_prefix("Exec="))
            .any(|exec| Path::new(program(exec)).file_name() == Some("corral-app".as_ref()));
        if !starts_the_window || !self.enabled() {
            return Ok(false);
        }
        self.set(true, tray)?;
        Ok(true)
    }
}

/// The program of an `Exec=` value: quoted, or up to the first space.
fn program(exec: &str) -> &str {
    match exec.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or(quoted),
        None => exec.split_whitespace().next().unwrap_or(exec),
    }
}

/// True if the tray starts at login.
pub fn enabled() -> bool {
    Places::of_this_session().is_some_and(|p| p.enabled())
}

/// `corral-tray` in this program's folder (this program, for the tray),
/// if it is installed there: what the entry starts.
fn tray_beside_this_program() -> Result<PathBuf, AutostartError> {
    let exe = std::env::current_exe().map_err(|e| AutostartError::NoTray(e.to_string()))?;
    let tray = exe.with_file_name("corral-tray");
    if tray.is_file() {
        Ok(tray)
    } else {
        Err(AutostartError::NoTray(exe.display().to_string()))
    }
}

/// Turns starting the tray at login on or off.
pub fn set(on: bool) -> Result<(), AutostartError> {
    Places::of_this_session().ok_or(AutostartError::NoHome)?.set(on, &tray_beside_this_program()?)
}

/// Brings the user's entry up to date if an older Corral wrote it to start
/// `corral-app` (the tray then; the window now, which would open at every
/// login): it starts the tray from then on. Said in the log; never fails
/// the caller (the tray or the window, as they start).
pub fn bring_up_to_date() {
    let (Some(places), Ok(tray)) = (Places::of_this_session(), tray_beside_this_program()) else { return };
    match places.migrate(&tray) {
        Ok(true) => tracing::info!("the autostart entry now starts {}", tray.display()),
        Ok(false) => {}
        Err(e) => tracing::warn!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_choice_wins_over_the_packages_entry() {
        let root = tempfile::tempdir().unwrap();
        let places = Places { user: root.path().join("home"), system: vec![root.path().join("etc")] };
        let exe = Path::new("/usr/bin/corral-tray");
        assert!(!places.enabled());
        places.set(true, exe).unwrap();
        assert!(places.enabled());
        places.set(false, exe).unwrap();
        assert!(!places.enabled() && !places.user_entry().exists(), "no system entry: just removed");

        // The package installs a system entry: on for everyone by default...
        std::fs::create_dir_all(root.path().join("etc/autostart")).unwrap();
        std::fs::write(root.path().join("etc/autostart").join(FILE), "[Desktop Entry]\nExec=corral-tray\n").unwrap();
        assert!(places.enabled());
        // ...and a user turns it off with Hidden=true, and on again.
        places.set(false, exe).unwrap();
        assert!(!places.enabled());
        assert!(std::fs::read_to_string(places.user_entry()).unwrap().contains("Hidden=true"));
        places.set(true, exe).unwrap();
        assert!(places.enabled());
    }

    #[test]
    fn an_entry_that_started_the_window_starts_the_tray() {
        let root = tempfile::tempdir().unwrap();
        let places = Places { user: root.path().join("home"), system: vec![root.path().join("etc")] };
        let tray = Path::new("/opt/corral/bin/corral-tray");
        assert!(!places.migrate(tray).unwrap(), "no entry: nothing to do");
        std::fs::create_dir_all(places.user_entry().parent().unwrap()).unwrap();
        std::fs::write(
            places.user_entry(),
            "[Desktop Entry]\nType=Application\nExec=\"/home/u/.local/bin/corral-app\"\n",
        )
        .unwrap();
        assert!(places.migrate(tray).unwrap());
        let text = std::fs::read_to_string(places.user_entry()).unwrap();
        assert!(text.contains("Exec=\"/opt/corral/bin/corral-tray\""), "{text}");
        assert!(!places.migrate(tray).unwrap(), "once");

        // A user who turned it off stays off.
        std::fs::write(places.user_entry(), "[Desktop Entry]\nExec=corral-app --open x\nHidden=true\n").unwrap();
        assert!(!places.migrate(tray).unwrap());
        assert!(!places.enabled());
    }
}
