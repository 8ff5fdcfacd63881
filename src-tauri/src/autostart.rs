//! The optional autostart entry: an XDG `.desktop` file in
//! `~/.config/autostart/` that starts the app at login.

use std::path::PathBuf;

fn entry() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("autostart").join("corral.desktop"))
}

/// True if the app starts at login.
pub fn enabled() -> bool {
    entry().is_some_and(|p| p.is_file())
}

/// Turns starting at login on or off.
pub fn set(on: bool) -> std::io::Result<()> {
    let path = entry().ok_or_else(|| std::io::Error::other("no home folder"))?;
    if !on {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(path.parent().expect("has a parent"))?;
    let text = format!(
        "[Desktop Entry]\nType=Application\nName=Corral\nComment=Background coding agents, supervised\nExec=\"{}\"\nX-GNOME-Autostart-enabled=true\nTerminal=false\n",
        exe.display()
    );
    std::fs::write(path, text)
}
