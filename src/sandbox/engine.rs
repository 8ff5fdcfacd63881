//! Whether bubblewrap can make a sandbox here, and if not, why and what
//! fixes it: the one answer `doctor` gives and a sandboxed launch fails
//! with. User namespaces are what usually breaks it: off (Debian's
//! `kernel.unprivileged_userns_clone = 0`, `user.max_user_namespaces = 0`)
//! or restricted by AppArmor (Ubuntu 23.10+).

use std::ffi::OsStr;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the .deb puts the AppArmor profile that lets bubblewrap make user
/// namespaces under Ubuntu's restriction.
pub const APPARMOR_PROFILE: &str = "/usr/share/corral/apparmor/bwrap";

/// Why no sandbox can be made here, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no sandbox can be made here: {why}; to fix: {fix} (`corral doctor` checks it)")]
pub struct NoEngine {
    /// What failed.
    pub why: String,
    /// What fixes it.
    pub fix: String,
}

/// The bubblewrap on `path`, if it is installed.
pub fn locate(path: Option<&OsStr>) -> Result<PathBuf, NoEngine> {
    crate::preset::available::locate("bwrap", path, Path::new("/")).ok_or_else(|| NoEngine {
        why: "bubblewrap (bwrap) is not installed".into(),
        fix: "sudo apt install bubblewrap".into(),
    })
}

/// The bubblewrap on `path`, if it makes a sandbox here: tried with the
/// namespaces every sandbox needs (a user namespace where this user is not
/// root, and a mount namespace), running `true` (~3.5 ms).
pub fn bwrap(path: Option<&OsStr>) -> Result<PathBuf, NoEngine> {
    let bwrap = locate(path)?;
    let mut command = Command::new(&bwrap);
    command
        .args(["--ro-bind", "/", "/", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let refused = |said: String| {
        let said = said.lines().next().unwrap_or("").trim().to_string();
        NoEngine {
            why: format!("{} cannot make one ({said}; {})", bwrap.display(), namespaces_why()),
            fix: namespaces_fix(),
        }
    };
    match command.spawn() {
        Err(e) => Err(NoEngine {
            why: format!("cannot start {}: {e}", bwrap.display()),
            fix: "reinstall it: sudo apt install --reinstall bubblewrap".into(),
        }),
        Ok(mut child) => {
            let mut said = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut said);
            }
            match child.wait() {
                Ok(status) if status.success() => Ok(bwrap),
                Ok(_) => Err(refused(said)),
                Err(e) => Err(refused(e.to_string())),
            }
        }
    }
}

/// Why user namespaces are refused, as far as the kernel's settings say.
pub fn namespaces_why() -> &'static str {
    if sysctl("kernel/unprivileged_userns_clone") == Some(0) {
        "kernel.unprivileged_userns_clone = 0"
    } else if sysctl("user/max_user_namespaces") == Some(0) {
        "user.max_user_namespaces = 0"
    } else if restricted_by_apparmor() {
        "AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns = 1)"
    } else {
        "user namespaces refused"
    }
}

/// What lets a user's processes make user namespaces again.
pub fn namespaces_fix() -> String {
    if restricted_by_apparmor() {
        format!(
            "let bubblewrap make user namespaces with the profile Corral ships: sudo install -m644 {APPARMOR_PROFILE} \
             /etc/apparmor.d/corral-bwrap && sudo apparmor_parser -r /etc/apparmor.d/corral-bwrap"
        )
    } else {
        "sudo sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and the same in \
         /etc/sysctl.d/ to keep it)"
            .into()
    }
}

/// Whether AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+).
pub fn restricted_by_apparmor() -> bool {
    sysctl("kernel/apparmor_restrict_unprivileged_userns") == Some(1)
}

/// A number under /proc/sys, if it is there.
fn sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(Path::new("/proc/sys").join(name)).ok()?.trim().parse().ok()
}
