//! Each agent CLI: found on PATH, its version, whether Corral knows that
//! version's stream, and whether it is signed in for a run nobody watches
//! (a background run cannot answer a login prompt).

use std::path::PathBuf;
use std::process::Command;

use super::run_briefly::{run, version_in, Answer};
use super::{Finding, Level};
use crate::adapter::tested_version;
use crate::preset::available::{agent_program, install_hint, locate};
use crate::run::AgentKind;

const AREA: &str = "agents";

/// Where an agent CLI keeps what lets it run without a person: API keys in
/// the environment, or the credentials its own login writes.
struct SignIn {
    env: &'static [&'static str],
    /// Files under the user's home (or under the folder an environment
    /// variable names, when it is set).
    files: &'static [(Option<&'static str>, &'static str)],
    how: &'static str,
}

fn sign_in(agent: AgentKind) -> SignIn {
    match agent {
        AgentKind::Claude => SignIn {
            env: &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"],
            files: &[(Some("CLAUDE_CONFIG_DIR"), ".credentials.json"), (None, ".claude/.credentials.json")],
            how: "`claude setup-token` (a long-lived token for background runs: export CLAUDE_CODE_OAUTH_TOKEN), or run `claude` once and /login",
        },
        AgentKind::Codex => SignIn {
            env: &["OPENAI_API_KEY", "CODEX_API_KEY"],
            files: &[(Some("CODEX_HOME"), "auth.json"), (None, ".codex/auth.json")],
            how: "`codex login`, or export OPENAI_API_KEY",
        },
        AgentKind::Gemini => SignIn {
            env: &["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"],
            files: &[(None, ".gemini/oauth_creds.json")],
            how: "run `gemini` once and sign in with Google, or export GEMINI_API_KEY",
        },
        AgentKind::Pi => SignIn {
            env: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY"],
            files: &[(None, ".pi/agent/auth.json"), (None, ".pi/agent/models.json")],
            how: "run `pi` once and /login, or export a provider's API key (ANTHROPIC_API_KEY, ...)",
        },
        AgentKind::Opencode => SignIn {
            env: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"],
            files: &[
                (Some("XDG_DATA_HOME"), "opencode/auth.json"),
                (None, ".local/share/opencode/auth.json"),
                (None, ".config/opencode/opencode.json"),
            ],
            how: "`opencode auth login`, or export a provider's API key",
        },
        AgentKind::Command => SignIn { env: &[], files: &[], how: "" },
    }
}

/// Every agent CLI Corral knows, checked side by side.
pub fn check() -> Vec<Finding> {
    let agents: Vec<AgentKind> = AgentKind::ALL.iter().copied().filter(|a| *a != AgentKind::Command).collect();
    std::thread::scope(|scope| {
        let checks: Vec<_> = agents.iter().map(|a| scope.spawn(move || check_one(*a))).collect();
        checks.into_iter().flat_map(|c| c.join().unwrap_or_default()).collect()
    })
}

fn check_one(agent: AgentKind) -> Vec<Finding> {
    let program = agent_program(agent).expect("agent CLIs have a program");
    let path = std::env::var_os("PATH");
    let Some(found) = locate(program, path.as_deref(), std::path::Path::new("/")) else {
        return vec![Finding::new(AREA, program, Level::Note, "not installed (its presets cannot start)")
            .fix(install_hint(agent))];
    };
    let mut command = Command::new(&found);
    command.arg("--version");
    let version = match run(command) {
        Answer::Said(text) => version_in(&text),
        Answer::Failed(text) => {
            return vec![Finding::new(
                AREA,
                program,
                Level::Fail,
                format!("{} --version failed: {}", found.display(), first_line(&text)),
            )
            .fix(format!("reinstall it: {}", install_hint(agent)))]
        }
        Answer::NotStarted(e) => {
            return vec![Finding::new(AREA, program, Level::Fail, format!("cannot start {}: {e}", found.display()))
                .fix(format!("reinstall it: {}", install_hint(agent)))]
        }
        Answer::Hung => {
            return vec![Finding::new(
                AREA,
                program,
                Level::Fail,
                format!("{} --version did not answer within 30 s", found.display()),
            )]
        }
    };
    let tested = tested_version(agent).unwrap_or_default();
    let mut findings = vec![match &version {
        Some(v) if same_minor(v, tested) => {
            Finding::ok(AREA, program, format!("{v} at {} (its stream is known)", found.display()))
        }
        Some(v) => Finding::new(
            AREA,
            program,
            Level::Note,
            format!(
                "{v} at {}: Corral was tested with {tested}; an unknown event is kept as text, never fatal",
                found.display()
            ),
        ),
        None => Finding::new(AREA, program, Level::Note, format!("at {}, version not understood", found.display())),
    }];
    findings.push(signed_in(agent, program));
    findings
}

/// Whether `agent` has what it needs to run with nobody at the keyboard.
fn signed_in(agent: AgentKind, program: &str) -> Finding {
    let how = sign_in(agent);
    let check = format!("{program} sign-in");
    if let Some(var) = how.env.iter().find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty())) {
        return Finding::ok(AREA, check, format!("{var} is set"));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for (under, file) in how.files {
        let base = match under {
            Some(var) => std::env::var_os(var).map(PathBuf::from),
            None => home.clone(),
        };
        if let Some(path) = base.map(|b| b.join(file)).filter(|p| p.is_file()) {
            return Finding::ok(AREA, check, format!("credentials in {}", path.display()));
        }
    }
    Finding::new(AREA, check, Level::Warn, "no sign-in found: a background run would stop at a login prompt or fail")
        .fix(how.how)
}

/// Whether versions `a` and `b` share major and minor.
fn same_minor(a: &str, b: &str) -> bool {
    let head = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    head(a) == head(b)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_match_by_major_and_minor() {
        assert!(same_minor("2.1.200", "2.1.197"));
        assert!(!same_minor("2.2.0", "2.1.197"));
        assert!(!same_minor("0.170.0", "0.169.0"));
    }
}
