//! Whether a preset's agent can start here: its program found on the PATH
//! the run will have, and executable. A preset that can never start is
//! refused at launch (never recorded, then failed in 0 ms) and marked
//! unavailable, with why and what to install, wherever presets are offered.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Preset;
use crate::run::AgentKind;

/// The program a preset starts: the agent CLI's, or its `command`'s first.
pub fn program(preset: &Preset) -> Option<&str> {
    agent_program(preset.agent).or_else(|| preset.command.first().map(String::as_str))
}

/// The program an agent CLI is started as (`None` for `command`).
pub fn agent_program(agent: AgentKind) -> Option<&'static str> {
    match agent {
        AgentKind::Pi => Some("pi"),
        AgentKind::Claude => Some("claude"),
        AgentKind::Codex => Some("codex"),
        AgentKind::Gemini => Some("gemini"),
        AgentKind::Opencode => Some("opencode"),
        AgentKind::Command => None,
    }
}

/// Where `program` is found on `path` (or as given, if it holds a `/`,
/// from `cwd`), if it is there and executable.
pub fn locate(program: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    candidates(program, path, cwd).into_iter().find(|f| f.is_file() && is_executable(f))
}

fn candidates(program: &str, path: Option<&OsStr>, cwd: &Path) -> Vec<PathBuf> {
    if program.contains('/') {
        vec![cwd.join(program)]
    } else {
        std::env::split_paths(path.unwrap_or_default())
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(program))
            .collect()
    }
}

fn is_executable(file: &Path) -> bool {
    file.metadata().is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// How to install an agent CLI, for the message that says it is missing.
pub fn install_hint(agent: AgentKind) -> &'static str {
    match agent {
        AgentKind::Pi => "install pi: npm install -g @mariozechner/pi-coding-agent",
        AgentKind::Claude => "install Claude Code: npm install -g @anthropic-ai/claude-code",
        AgentKind::Codex => "install Codex: npm install -g @openai/codex",
        AgentKind::Gemini => "install Gemini CLI: npm install -g @google/gemini-cli",
        AgentKind::Opencode => "install opencode: npm install -g opencode-ai",
        AgentKind::Command => "install it, or fix `command:` in the preset",
    }
}

/// Why `preset` cannot start from `cwd` with `path` as its PATH, if it
/// cannot: its program is not on it, or not executable.
pub fn unavailable(preset: &Preset, path: Option<&OsStr>, cwd: &Path) -> Option<String> {
    let program = program(preset)?;
    let candidates = candidates(program, path, cwd);
    let files: Vec<&PathBuf> = candidates.iter().filter(|c| c.is_file()).collect();
    if files.iter().any(|f| is_executable(f)) {
        return None;
    }
    let hint = install_hint(preset.agent);
    Some(match files.first() {
        Some(file) => format!("'{}' is not executable: chmod +x it, or fix the preset {}", file.display(), preset.path),
        None if program.contains('/') => format!("'{program}' does not exist: {hint} ({})", preset.path),
        None => format!("'{program}' is not on PATH: {hint} ({})", preset.path),
    })
}
