//! The run's branch pushed to the repository's remote by git itself (the
//! user's credentials, their `pre-push` hook), and git's refusals said in
//! words with what to run.

use std::path::Path;
use std::process::Command;

use super::ForgeError;

/// The remote a run's branch goes to: the one asked for, else the base
/// branch's upstream remote, else `origin`, else the only remote there
/// is. Its name and address.
pub(super) fn remote_for(repo: &Path, asked: Option<&str>, base: &str) -> Result<(String, String), ForgeError> {
    let no_remote = || ForgeError::NoRemote { repo: repo.display().to_string() };
    let remotes: Vec<String> =
        git(repo, &["remote"]).map(|s| s.lines().map(str::to_string).collect()).unwrap_or_default();
    let name = match asked {
        Some(name) => name.to_string(),
        None => git(repo, &["config", &format!("branch.{base}.remote")])
            .map(|s| s.trim().to_string())
            .filter(|r| remotes.contains(r))
            .or_else(|| remotes.iter().find(|r| *r == "origin").cloned())
            .or_else(|| (remotes.len() == 1).then(|| remotes[0].clone()))
            .ok_or_else(no_remote)?,
    };
    let url = git(repo, &["remote", "get-url", &name]).ok_or_else(no_remote)?;
    Ok((name, url.trim().to_string()))
}

/// A push the remote (or git) refused.
#[derive(Debug)]
pub(super) struct Refusal {
    /// The user may not push to the remote at all (a fork would take it).
    pub no_rights: bool,
    /// Why, in words, with what to run.
    pub words: String,
}

impl From<Refusal> for ForgeError {
    fn from(refusal: Refusal) -> Self {
        ForgeError::PushRefused(refusal.words)
    }
}

/// Pushes the ref `from` of `repo` (`refs/heads/corral/ID`) to the branch
/// `to` of `remote`: a fast-forward only (never over commits someone else
/// pushed there).
pub(super) fn push(repo: &Path, remote: &str, from: &str, to: &str) -> Result<(), Refusal> {
    let refspec = format!("{from}:refs/heads/{to}");
    let out = Command::new("git")
        .args(["-C", &repo.to_string_lossy(), "push", "--porcelain", remote, &refspec])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output();
    let out = match out {
        Ok(out) if out.status.success() => return Ok(()),
        Ok(out) => out,
        Err(e) => {
            let words = format!("cannot run git to push the run's branch: {e}");
            return Err(Refusal { no_rights: false, words });
        }
    };
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let lower = said.to_lowercase();
    let no_rights = !lower.contains("protected")
        && (lower.contains("permission") || lower.contains("403") || lower.contains("denied to"));
    let words = refusal(&said, repo, remote, to);
    Err(Refusal { no_rights, words })
}

/// git's refusal of a push, in words, with what to run.
fn refusal(said: &str, repo: &Path, remote: &str, branch: &str) -> String {
    let repo = repo.display();
    let lower = said.to_lowercase();
    let why = if lower.contains("non-fast-forward") || lower.contains("fetch first") || lower.contains("[rejected]") {
        format!(
            "{remote} has commits on {branch} that the run's branch does not (someone pushed to the pull request): \
             bring them into the run's worktree (`git -C {repo} fetch {remote} {branch}` and merge them there), or \
             push over them yourself (`git -C {repo} push --force-with-lease {remote} {branch}`)"
        )
    } else if lower.contains("protected branch") || lower.contains("protected") {
        format!("{remote} protects {branch}: push the run's branch under another name, or ask for the rule to change")
    } else if lower.contains("permission") || lower.contains("403") || lower.contains("denied") {
        format!(
            "you may not push to {remote}: push to a fork of yours (`git -C {repo} remote add fork URL`, then \
             `corral pr RUN --remote fork`)"
        )
    } else if lower.contains("could not read from remote")
        || lower.contains("could not resolve host")
        || lower.contains("does not appear to be a git repository")
    {
        format!("{remote} cannot be reached: check `git -C {repo} remote get-url {remote}` and your network")
    } else if lower.contains("hook declined") || lower.contains("pre-receive") {
        format!("{remote}'s hooks refused the push: see what they said below")
    } else {
        format!("{remote} refused the push")
    };
    let detail: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("To ") && *l != "Done")
        .take(6)
        .collect();
    format!("the run's branch {branch} was not pushed: {why}. git said: {}", detail.join(" / "))
}

/// What `git -C repo ARGS` printed, if it succeeded (never asking for a
/// password on the terminal: a remote that wants one fails).
pub(super) fn git(repo: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(repo).args(args).env("GIT_TERMINAL_PROMPT", "0").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
