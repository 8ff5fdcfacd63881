//! Opening a folder in the desktop's file manager, or a terminal in it: the
//! one place that knows which programs a Linux desktop offers for that.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

/// Terminals tried in order after `$TERMINAL`: Debian's alternative first,
/// then those of the common desktops.
const TERMINALS: &[&str] =
    &["x-terminal-emulator", "gnome-terminal", "konsole", "xfce4-terminal", "kitty", "alacritty", "xterm"];

/// Opens `folder` in the file manager (`xdg-open`).
pub fn folder(folder: &Path) -> io::Result<()> {
    ensure_folder(folder)?;
    start(Command::new("xdg-open").arg(folder)).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot open {} with xdg-open: {e}; install xdg-utils", folder.display()))
    })
}

/// Opens a terminal whose working folder is `folder`.
pub fn terminal(folder: &Path) -> io::Result<()> {
    ensure_folder(folder)?;
    let from_env = std::env::var("TERMINAL").ok().filter(|t| !t.trim().is_empty());
    for program in from_env.iter().map(String::as_str).chain(TERMINALS.iter().copied()) {
        match start(Command::new(program).current_dir(folder)) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("cannot start {program}: {e}"))),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no terminal found (tried $TERMINAL, {}): set TERMINAL to yours", TERMINALS.join(", ")),
    ))
}

fn ensure_folder(folder: &Path) -> io::Result<()> {
    if folder.is_dir() {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::NotFound, format!("the folder {} does not exist any more", folder.display())))
    }
}

/// Starts `command`; a thread reaps it whenever it ends, so none lingers
/// as a zombie of the app.
fn start(command: &mut Command) -> io::Result<()> {
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    std::thread::spawn(move || child.wait());
    Ok(())
}
