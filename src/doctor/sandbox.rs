//! Whether sandboxes can work here: Corral's own (a preset's `sandbox:`,
//! made by bubblewrap; see `crate::sandbox::engine`) and the agents' own.
//! Claude Code's sandbox runs commands under bubblewrap (with socat for
//! its network proxy), and Codex's Linux sandbox needs user namespaces
//! too; all of them break, the most
//! reported way on Linux, where unprivileged user namespaces are off or
//! restricted (Debian's `unprivileged_userns_clone`, Ubuntu 23.10+'s
//! AppArmor rule `apparmor_restrict_unprivileged_userns`).

use std::path::Path;
use std::process::Command;

use super::run_briefly::{run, Answer};
use super::{Finding, Level};
use crate::preset::available::locate;
use crate::sandbox::engine;

const AREA: &str = "sandbox";

/// User namespaces, bubblewrap, socat, and the restrictions on them.
pub fn check() -> Vec<Finding> {
    let mut findings = Vec::new();
    let restricted = engine::restricted_by_apparmor();
    let userns = crate::process::try_user_namespace();
    findings.push(match &userns {
        Ok(()) => Finding::ok(AREA, "user namespaces", "a process of yours can make one"),
        Err(e) => Finding::new(
            AREA,
            "user namespaces",
            Level::Warn,
            format!(
                "a process of yours cannot make one ({}: {e}): sandboxed presets do not start, agents' own sandboxes fail",
                engine::namespaces_why()
            ),
        )
        .fix(engine::namespaces_fix()),
    });
    let path = std::env::var_os("PATH");
    match locate("bwrap", path.as_deref(), Path::new("/")) {
        None => findings.push(
            Finding::new(
                AREA,
                "bubblewrap",
                Level::Note,
                "bwrap is not installed: sandboxed presets and Claude Code's sandbox need it",
            )
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
                        finding.fix(engine::namespaces_fix())
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
