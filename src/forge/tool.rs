//! The forge's own CLI, run as the user would run it: `gh` for GitHub,
//! `glab` for GitLab, chosen by the remote's address. Its prompts are off
//! (Corral asks nothing it cannot answer); what it says on failure is
//! passed on in its words.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::ForgeError;

/// Where the repository's pull requests live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Forge {
    /// github.com or a GitHub Enterprise host: `gh`.
    GitHub,
    /// gitlab.com or a self-hosted GitLab: `glab`.
    GitLab,
}

impl Forge {
    /// The forge of a remote at `url`: GitLab when its host says so, else
    /// GitHub (`gh` also serves GitHub Enterprise hosts).
    pub fn of_remote(url: &str) -> Forge {
        let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':']).next().unwrap_or_default();
        let host = host.rsplit('@').next().unwrap_or(host);
        if host.contains("gitlab") {
            Forge::GitLab
        } else {
            Forge::GitHub
        }
    }

    /// Its name as stored: `github`, `gitlab`.
    pub fn as_str(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
        }
    }

    /// What it calls a pull request.
    pub fn request_name(self) -> &'static str {
        match self {
            Forge::GitHub => "pull request",
            Forge::GitLab => "merge request",
        }
    }

    /// Where it is, said to a user: `GitHub`, `GitLab`.
    pub fn site(self) -> &'static str {
        match self {
            Forge::GitHub => "GitHub",
            Forge::GitLab => "GitLab",
        }
    }

    /// How a number of its is written: `#42`, `!42`.
    pub fn numbered(self, number: i64) -> String {
        match self {
            Forge::GitHub => format!("#{number}"),
            Forge::GitLab => format!("!{number}"),
        }
    }
}

/// The forge's CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool(Forge);

impl Tool {
    /// The CLI of `forge`.
    pub fn of(forge: Forge) -> Tool {
        Tool(forge)
    }

    /// Its forge.
    pub fn forge(self) -> Forge {
        self.0
    }

    /// Its program.
    pub fn program(self) -> &'static str {
        match self.0 {
            Forge::GitHub => "gh",
            Forge::GitLab => "glab",
        }
    }

    /// How a user installs it on Debian.
    pub fn install(self) -> &'static str {
        match self.0 {
            Forge::GitHub => "install the GitHub CLI (`sudo apt install gh`)",
            Forge::GitLab => {
                "install the GitLab CLI (a .deb from https://gitlab.com/gitlab-org/cli/-/releases, or `brew install glab`)"
            }
        }
    }

    /// Fails with how to install it unless it is on the PATH: said before
    /// anything is committed or pushed.
    pub fn require(self) -> Result<(), ForgeError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let found = std::env::split_paths(&path).any(|dir| dir.join(self.program()).is_file());
        if found {
            Ok(())
        } else {
            Err(ForgeError::Missing(self))
        }
    }

    /// Runs it in `dir` with `args` (and `stdin`, if any) to `doing` (what
    /// its refusal says it could not do): what it printed, or its refusal
    /// in its words.
    pub fn run(
        self,
        dir: &Path,
        doing: &'static str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<String, ForgeError> {
        let mut command = Command::new(self.program());
        command
            .args(args)
            .current_dir(dir)
            .env("GH_PROMPT_DISABLED", "1")
            .env("NO_PROMPT", "1")
            .env("GLAB_NO_PROMPT", "1")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ForgeError::Missing(self)),
            Err(e) => return Err(ForgeError::Refused { tool: self, doing, said: e.to_string() }),
        };
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A CLI that exits before reading all of it says why itself.
            let _ = pipe.write_all(text.as_bytes());
        }
        let out =
            child.wait_with_output().map_err(|e| ForgeError::Refused { tool: self, doing, said: e.to_string() })?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = if said.trim().is_empty() { String::from_utf8_lossy(&out.stdout) } else { said };
            return Err(ForgeError::Refused { tool: self, doing, said: said.trim().to_string() });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The items of every page `--paginate` printed: one JSON array a page,
/// one after the other (what cannot be read ends the list).
pub(super) fn pages<T: serde::de::DeserializeOwned>(said: &str) -> Vec<T> {
    serde_json::Deserializer::from_str(said).into_iter::<Vec<T>>().map_while(Result::ok).flatten().collect()
}

/// `said` read as JSON, or the CLI's words said as not understood.
pub(super) fn read<T: serde::de::DeserializeOwned>(tool: Tool, said: &str) -> Result<T, ForgeError> {
    serde_json::from_str(said).map_err(|_| ForgeError::Unread { tool, said: said.chars().take(200).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remotes_address_says_the_forge() {
        assert_eq!(Forge::of_remote("git@github.com:o/r.git"), Forge::GitHub);
        assert_eq!(Forge::of_remote("https://github.example.com/o/r"), Forge::GitHub);
        assert_eq!(Forge::of_remote("git@gitlab.com:o/r.git"), Forge::GitLab);
        assert_eq!(Forge::of_remote("https://user@gitlab.corp.example/o/r.git"), Forge::GitLab);
        assert_eq!(Forge::of_remote("ssh://git@gitlab.example:2222/o/r"), Forge::GitLab);
        assert_eq!(Forge::numbered(Forge::GitLab, 4), "!4");
    }
}
