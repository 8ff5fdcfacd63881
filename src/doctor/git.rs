//! git: worktree runs, `diff`, `merge` and `discard` need it, and a merge
//! commit needs an author.

use std::process::Command;

use super::run_briefly::{run, version_in, Answer};
use super::{Finding, Level};

const AREA: &str = "git";

/// Whether git is here, new enough, and knows who commits.
pub fn check() -> Vec<Finding> {
    let version = match run(git(&["--version"])) {
        Answer::Said(text) => version_in(&text).unwrap_or(text),
        Answer::NotStarted(_) => {
            return vec![Finding::new(
                AREA,
                "git",
                Level::Warn,
                "git is not on PATH: worktree runs, diff and merge need it",
            )
            .fix("sudo apt install git")]
        }
        Answer::Failed(text) => {
            return vec![Finding::new(AREA, "git", Level::Warn, format!("`git --version` failed: {text}"))]
        }
        Answer::Hung => return vec![Finding::new(AREA, "git", Level::Warn, "`git --version` did not answer")],
    };
    let mut findings = vec![Finding::ok(AREA, "git", format!("git {version}"))];
    let name = matches!(run(git(&["config", "user.name"])), Answer::Said(n) if !n.is_empty());
    let email = matches!(run(git(&["config", "user.email"])), Answer::Said(e) if !e.is_empty());
    findings.push(if name && email {
        Finding::ok(AREA, "author", "user.name and user.email are set (merge commits are yours)")
    } else {
        Finding::new(AREA, "author", Level::Warn, "git does not know who you are: `corral merge` cannot commit")
            .fix("git config --global user.name \"Your Name\" && git config --global user.email you@example.com")
    });
    findings
}

fn git(args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command.args(args);
    command
}
