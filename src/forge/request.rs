//! What a pull request is made of, whether of one run's work or of several:
//! what the user asked (`Options`) and what was done (`Opened`), the
//! checks before anything is pushed (an agent's right to ask, what only an
//! opening sets, a base the remote holds), its title and description from
//! the runs, and the forge's CLI asked to open it.

use std::path::Path;

use serde::Serialize;

use super::fork::FromWhere;
use super::push::remote_for;
use super::tool::{Forge, Tool};
use super::{clean, ForgeError};
use crate::run::Run;
use crate::store::{PullRequestRow, Store};
use crate::verbs::review::{self, ReviewError};
use crate::worktree;

/// What the user asked of the pull request.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Opened as a draft.
    pub draft: bool,
    /// The branch it asks to merge into (default: the one the run started
    /// from).
    pub base: Option<String>,
    /// Its title (default: the task's first line).
    pub title: Option<String>,
    /// Its description (default: the task, what the agent said, the files
    /// changed, and which run made it).
    pub body: Option<String>,
    /// The remote to push to (default: the base's upstream, else `origin`).
    pub remote: Option<String>,
    /// The run that asks, when an agent asks (from inside a run): allowed
    /// only where its preset says `pr: allow`.
    pub caller: Option<String>,
}

/// A pull request opened, or pushed to again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Opened {
    /// The run.
    pub run: String,
    /// `github` or `gitlab`.
    pub forge: Forge,
    /// Its page.
    pub url: String,
    /// Its number, when the forge said one.
    pub number: Option<i64>,
    /// True if this call opened it; false if it pushed to the one open.
    pub opened: bool,
    /// The commit pushed.
    pub pushed: String,
    /// True if the agent's uncommitted work was committed first.
    pub committed: bool,
    /// Where it was pushed, and what it asks to merge into.
    pub remote: String,
    pub head: String,
    pub base: String,
    /// Its runs, when it is one pull request of several runs' work.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub together: Vec<String>,
}

impl Opened {
    /// `#42` (GitHub) or `!42` (GitLab), else its page.
    pub fn name(&self) -> String {
        self.number.map_or_else(|| self.url.clone(), |n| self.forge.numbered(n))
    }
}

/// Run `run` with its worktree, once its work may go out: it ended (and
/// its processes are gone), an agent asking may ask for it, its worktree
/// is there, no run works in it and none of it is what Corral carried in
/// from the checkout.
pub(super) fn ready(store: &mut Store, run: Run, options: &Options) -> Result<(Run, worktree::Worktree), ForgeError> {
    let run = review::once_exited(store, run)?;
    if let Some(caller) = &options.caller {
        allowed(store, caller, &run)?;
    }
    let worktree = review::worktree_of(&run).map_err(ReviewError::from)?.clone();
    review::refuse_still_writing(&run).map_err(ReviewError::from)?;
    if let Some(other) = review::working_in(store, &worktree)? {
        return Err(worktree::WorktreeError::InUse { run: other.id, path: worktree.path.clone() }.into());
    }
    review::refuse_carried(store, &run, &worktree)?;
    Ok((run, worktree))
}

/// Where a pull request goes: the branch it asks to merge into, the
/// remote its branch is pushed to (name and address), and the forge's CLI
/// that opens it.
pub(super) struct Destination {
    pub base: String,
    pub remote: String,
    pub url: String,
    pub tool: Tool,
}

/// Where the pull request of `run` (the first, of several) goes, `known`
/// its pull request if one is open: said before anything is committed or
/// pushed — options only an opening sets, a run launched on a detached
/// HEAD with no base named, a remote missing, the forge's CLI missing, and
/// a pull request merged or closed on the forge since (pushing would make
/// a branch nobody reviews) are refused.
pub(super) fn destination(
    store: &mut Store,
    repo: &Path,
    run: &Run,
    known: Option<&PullRequestRow>,
    options: &Options,
) -> Result<Destination, ForgeError> {
    if let Some(pr) = known {
        refuse_changes_to(pr, options)?;
    }
    let base = match (&options.base, known, &run.worktree_from_branch) {
        (Some(base), _, _) => base.clone(),
        (None, Some(pr), _) => pr.base.clone(),
        (None, None, Some(branch)) => branch.clone(),
        (None, None, None) => return Err(ForgeError::NoBase { run: run.id.clone() }),
    };
    let (remote, url) = match known {
        Some(pr) => remote_for(repo, Some(&pr.remote), &base)?,
        None => remote_for(repo, options.remote.as_deref(), &base)?,
    };
    let tool = Tool::of(Forge::of_remote(&url));
    tool.require()?;
    if let Some(pr) = known {
        let now = super::look(store, &pr.run_id)?;
        if now.state != "open" {
            return Err(ForgeError::Ended { run: run.id.clone(), name: now.name(), state: now.state });
        }
    }
    Ok(Destination { base, remote, url, tool })
}

/// An agent's `corral pr` (or MCP `open_pull_request`): only on a run of
/// its own tree (itself, or a run it or its runs launched), and only where
/// its preset and every preset above it say `pr: allow` — a run never gains
/// through a child it launched what its own preset withholds.
fn allowed(store: &Store, caller: &str, run: &Run) -> Result<(), ForgeError> {
    let refused = || ForgeError::NotAllowed { caller: caller.to_string(), run: run.id.clone() };
    let mut at = Some(run.id.clone());
    let mut in_tree = false;
    while let Some(id) = at {
        if id == caller {
            in_tree = true;
            break;
        }
        at = store.run(&id)?.parent_id;
    }
    if !in_tree {
        return Err(ForgeError::NotItsOwn { caller: caller.to_string(), run: run.id.clone() });
    }
    let mut at = Some(caller.to_string());
    while let Some(id) = at {
        if store.run_preset(&id)?.pr != Some(crate::preset::PrPolicy::Allow) {
            return Err(refused());
        }
        at = store.run(&id)?.parent_id;
    }
    Ok(())
}

/// What only the opening of a pull request sets, asked of one open: said,
/// never silently dropped.
fn refuse_changes_to(pr: &PullRequestRow, options: &Options) -> Result<(), ForgeError> {
    let asked: Vec<&str> = [
        (options.title.is_some(), "--title"),
        (options.body.is_some(), "--body"),
        (options.base.as_deref().is_some_and(|b| b != pr.base), "--base"),
        (options.draft && !pr.draft, "--draft"),
        (options.remote.as_deref().is_some_and(|r| r != pr.remote), "--remote"),
    ]
    .into_iter()
    .filter_map(|(given, flag)| given.then_some(flag))
    .collect();
    if asked.is_empty() {
        return Ok(());
    }
    Err(ForgeError::AlreadyOpen { run: pr.run_id.clone(), name: pr.name(), asked: asked.join(", ") })
}

/// The run's branch holds every commit of the one it started from: those
/// must be on the remote's `base` already, or the pull request would carry
/// the user's own unpushed commits (or another branch's) without a word.
/// The commit the remote's `base` is on.
pub(super) fn refuse_unpublished_base(
    repo: &Path,
    remote: &str,
    base: &str,
    worktree: &worktree::Worktree,
) -> Result<String, ForgeError> {
    let git = |args: &[&str]| super::push::git(repo, args).map(|said| said.trim().to_string());
    let there = git(&["ls-remote", "--", remote, &format!("refs/heads/{base}")])
        .and_then(|said| said.split_whitespace().next().map(str::to_string))
        .ok_or_else(|| ForgeError::NoBaseThere { remote: remote.into(), base: base.into() })?;
    // Its commits, to compare with (fetched only if not here yet).
    if git(&["cat-file", "-e", &format!("{there}^{{commit}}")]).is_none() {
        git(&["fetch", "-q", "--", remote, &format!("refs/heads/{base}")]);
    }
    let started = worktree.merged.as_deref().unwrap_or(&worktree.base);
    let ahead = git(&["rev-list", "--count", started, "--not", &there]).and_then(|n| n.parse::<u64>().ok());
    match ahead {
        Some(0) => Ok(there),
        Some(count) => Err(ForgeError::UnpublishedBase { remote: remote.into(), base: base.into(), count }),
        None => Err(ForgeError::NoBaseThere { remote: remote.into(), base: base.into() }),
    }
}

/// What a new pull request asks: from which branch into which, and its words.
pub(super) struct Asked<'a> {
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub draft: bool,
}

/// Asks the forge's CLI for the pull request: its page and number.
pub(super) fn create(
    tool: Tool,
    repo: &Path,
    asked: &Asked,
    from: &FromWhere,
) -> Result<(String, Option<i64>), ForgeError> {
    let said = match tool.forge() {
        Forge::GitHub => {
            let head = match from {
                FromWhere::Repository => asked.head.to_string(),
                FromWhere::Fork(fork) => format!("{}:{}", fork.owner, asked.head),
            };
            let mut args =
                vec!["pr", "create", "--head", &head, "--base", asked.base, "--title", asked.title, "--body-file", "-"];
            if let FromWhere::Fork(fork) = from {
                args.extend(["--repo", fork.upstream.as_str()]);
            }
            if asked.draft {
                args.push("--draft");
            }
            match tool.run(repo, "open the pull request", &args, Some(asked.body)) {
                // One this run's branch already has (a `corral pr` killed
                // after the forge made it, before Corral recorded it): it.
                Err(ForgeError::Refused { said, .. }) if said.contains("already exists") && said.contains("://") => {
                    said
                }
                other => other?,
            }
        }
        Forge::GitLab => {
            // `glab` takes it as an argument, which Linux bounds at 128 KiB.
            let mut end = asked.body.len().min(120 << 10);
            while !asked.body.is_char_boundary(end) {
                end -= 1;
            }
            let mut args = vec![
                "mr",
                "create",
                "--source-branch",
                asked.head,
                "--target-branch",
                asked.base,
                "--title",
                asked.title,
                "--description",
                &asked.body[..end],
                "--yes",
            ];
            if asked.draft {
                args.push("--draft");
            }
            tool.run(repo, "open the merge request", &args, None)?
        }
    };
    let url = said
        .split_whitespace()
        .rev()
        .find(|w| w.starts_with("https://") || w.starts_with("http://"))
        .ok_or_else(|| ForgeError::Unread { tool, said: said.trim().to_string() })?;
    // The page alone: no query, no fragment, no trailing slash.
    let url = url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/').to_string();
    let number = url.rsplit('/').next().and_then(|n| n.parse::<i64>().ok()).filter(|n| *n > 0);
    Ok((url, number))
}

/// The task's first line that says something.
pub(super) fn first_line(task: &str) -> &str {
    task.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("Work of a Corral run")
}

/// One line for a title: no control characters (a task or an agent can
/// hold escape sequences), at most 72 characters, cut at a word.
pub(super) fn clean_line(text: &str) -> String {
    let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= 72 {
        return text;
    }
    let mut out = String::new();
    for word in text.split(' ') {
        if out.chars().count() + word.chars().count() + 1 > 71 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    // One long word (a URL, a language written without spaces): cut it.
    if out.is_empty() {
        out = text.chars().take(71).collect();
    }
    out.push('…');
    out
}

/// A run's work for a description: its task, what its agent said last,
/// the files it changed, under headings of `level` (`###`).
pub(super) fn work_of(run: &Run, changes: &worktree::Changes, level: &str) -> String {
    let mut body = format!("{}\n", clean(run.task.trim()));
    if let Some(said) = run.final_text.as_deref().filter(|t| !t.trim().is_empty()) {
        body.push_str(&format!("\n{level} What the agent said\n\n"));
        for line in clean(said.trim()).lines().take(60) {
            body.push_str(&format!("> {line}\n"));
        }
    }
    if !changes.files.is_empty() {
        body.push_str(&format!("\n{level} Files changed (+{} −{})\n\n", changes.added, changes.removed));
        for file in changes.files.iter().take(50) {
            let counts =
                if file.binary { "binary".to_string() } else { format!("+{} −{}", file.added, file.removed) };
            body.push_str(&format!("- `{}` {counts}\n", clean(&file.path).replace('`', "'")));
        }
        if changes.files.len() > 50 {
            body.push_str(&format!("- and {} more\n", changes.files.len() - 50));
        }
    }
    body
}

/// `preset `fixer`, agent claude, model sonnet`.
pub(super) fn made_by(run: &Run) -> String {
    let model =
        run.resolved_model.as_deref().or(run.model.as_deref()).map(|m| format!(", model {m}")).unwrap_or_default();
    format!("preset `{}`, agent {}{model}", run.preset, run.agent)
}

/// `text` cut to `most` characters, saying where the rest is (run `id`).
pub(super) fn within(mut text: String, most: usize, id: &str) -> String {
    if text.chars().count() > most {
        text = text.chars().take(most).collect();
        text.push_str(&format!("\n\n…(cut: the rest is in Corral's run `{id}`)\n"));
    }
    text
}

/// The most characters of a description Corral writes (GitHub takes 65,536).
pub(super) const BODY_MOST: usize = 60_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_one_clean_line_cut_at_a_word() {
        assert_eq!(clean_line("fix \x1b[31mthe\x1b[0m bug\tnow"), "fix [31mthe [0m bug now");
        let long = "word ".repeat(30);
        let cut = clean_line(&long);
        assert!(cut.chars().count() <= 72 && cut.ends_with("word…"), "{cut}");
        assert_eq!(first_line("\n  \n  the task\nmore"), "the task");
    }
}
