//! Starting the tray at login: an XDG `.desktop` entry. The user's own entry
//! in `~/.config/autostart/` decides; without one, the system's (the Debian
//! package installs `/etc/xdg/autostart/corral.desktop`) does. Turning it
//! off while the system's exists writes a user entry with `Hidden=true`,
//! which is how XDG autostart lets a user opt out.

use std::path::{Path, PathBuf};

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

    fn set(&self, on: bool, exe: &Path) -> std::io::Result<()> {
        let path = self.user_entry();
        let text = match (on, self.system_entry().is_some()) {
            (false, false) => {
                return match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                };
            }
            (false, true) => "[Desktop Entry]\nType=Application\nName=Corral\nHidden=true\n".to_string(),
            (true, _) => format!(
                "[Desktop Entry]\nType=Application\nName=Corral\nComment=Background coding agents, supervised\nExec=\"{}\"\nX-GNOME-Autostart-enabled=true\nTerminal=false\n",
                exe.display()
            ),
        };
        std::fs::create_dir_all(path.parent().expect("has a parent"))?;
        std::fs::write(path, text)
    }
}

/// True if the app starts at login.
pub fn enabled() -> bool {
    Places::of_this_session().is_some_and(|p| p.enabled())
}

/// Turns starting at login on or off. What starts is the tray
/// (`corral-tray`, installed beside this program); the window opens from it.
pub fn set(on: bool) -> std::io::Result<()> {
    let places = Places::of_this_session().ok_or_else(|| std::io::Error::other("no home folder"))?;
    places.set(on, &std::env::current_exe()?.with_file_name("corral-tray"))
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
}
