//! Whether the agents' own sandboxes can work here. Claude Code's sandbox
//! runs commands under bubblewrap (with socat for its network proxy), and
//! Codex's Linux sandbox needs user namespaces too; both break, the most
//! reported way on Linux, where unprivileged user namespaces are off or
//! restricted (Debian's `unprivileged_userns_clone`, Ubuntu 23.10+'s
//! AppArmor rule `apparmor_restrict_unprivileged_userns`).

use std::path::Path;
use std::process::Command;

use super::run_briefly::{run, Answer};
use super::{Finding, Level};
use crate::preset::available::locate;

const AREA: &str = "sandbox";

/// Where the .deb puts the AppArmor profile that lets bubblewrap make user
/// namespaces under Ubuntu's restriction.
pub const APPARMOR_PROFILE: &str = "/usr/share/corral/apparmor/bwrap";

/// User namespaces, bubblewrap, socat, and the restrictions on them.
pub fn check() -> Vec<Finding> {
    let mut findings = Vec::new();
    let restricted = sysctl("kernel/apparmor_restrict_unprivileged_userns") == Some(1);
    let userns = crate::process::try_user_namespace();
    findings.push(match &userns {
        Ok(()) => Finding::ok(AREA, "user namespaces", "a process of yours can make one"),
        Err(e) => {
            let why = if sysctl("kernel/unprivileged_userns_clone") == Some(0) {
                "kernel.unprivileged_userns_clone = 0"
            } else if sysctl("user/max_user_namespaces") == Some(0) {
                "user.max_user_namespaces = 0"
            } else if restricted {
                "AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns = 1)"
            } else {
                "refused"
            };
            let finding = Finding::new(
                AREA,
                "user namespaces",
                Level::Warn,
                format!("a process of yours cannot make one ({why}: {e}): agents' sandboxes fail"),
            );
            if restricted {
                finding.fix(apparmor_fix())
            } else {
                finding.fix("sudo sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000 (and the same in /etc/sysctl.d/ to keep it)")
            }
        }
    });
    let path = std::env::var_os("PATH");
    match locate("bwrap", path.as_deref(), Path::new("/")) {
        None => findings.push(
            Finding::new(AREA, "bubblewrap", Level::Note, "bwrap is not installed: Claude Code's sandbox needs it")
                .fix("sudo apt install bubblewrap"),
        ),
        Some(bwrap) => {
            let mut command = Command::new(&bwrap);
            command.args(["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "true"]);
            findings.push(match run(command) {
                Answer::Said(_) => Finding::ok(AREA, "bubblewrap", format!("{} makes a sandbox", bwrap.display())),
                Answer::Failed(text) => {
                    let finding = Finding::new(
                        AREA,
                        "bubblewrap",
                        Level::Warn,
                        format!("{} cannot make a sandbox: {}", bwrap.display(), text.lines().next().unwrap_or("")),
                    );
                    if restricted {
                        finding.fix(apparmor_fix())
                    } else {
                        finding.fix("allow unprivileged user namespaces (see `user namespaces` above)")
                    }
                }
                Answer::NotStarted(e) => {
                    Finding::new(AREA, "bubblewrap", Level::Warn, format!("cannot start {}: {e}", bwrap.display()))
                }
                Answer::Hung => Finding::new(AREA, "bubblewrap", Level::Warn, "bwrap did not return"),
            });
        }
    }
    if locate("socat", path.as_deref(), Path::new("/")).is_none() {
        findings.push(
            Finding::new(
                AREA,
                "socat",
                Level::Note,
                "socat is not installed: Claude Code's sandbox proxies its network through it",
            )
            .fix("sudo apt install socat"),
        );
    }
    findings
}

fn apparmor_fix() -> String {
    format!(
        "let bubblewrap make user namespaces with the profile Corral ships: sudo install -m644 {APPARMOR_PROFILE} \
         /etc/apparmor.d/corral-bwrap && sudo apparmor_parser -r /etc/apparmor.d/corral-bwrap"
    )
}

/// A number under /proc/sys, if it is there.
fn sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(Path::new("/proc/sys").join(name)).ok()?.trim().parse().ok()
}
