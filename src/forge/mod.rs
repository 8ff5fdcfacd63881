//! From a run to a pull request: its branch pushed to the repository's
//! remote and a pull request (GitHub, through `gh`) or merge request
//! (GitLab, through `glab`) opened for it, with the forge's own CLI — its
//! login and token are the user's, never Corral's, never in a run's
//! environment.
//!
//! `open` is the verb (`corral pr`, MCP `open_pull_request`), `together`
//! the same for several runs' work as one, `request` what both are made
//! of; `push` says git's refusals in words, `fork` pushes to the user's
//! fork where they may not push; `tool` runs the forge's CLI; `issue`
//! makes an issue a run's task (`corral launch --issue`); `follow` reads
//! what the forge says of a pull request and sends it to the run
//! (`gitlab` what GitLab says, `log_tail` the end of a failed check's
//! log).

mod follow;
mod fork;
mod gitlab;
mod issue;
mod log_tail;
mod onto;
mod open;
mod push;
mod request;
mod together;
mod tool;

pub use follow::{look, send, start_following, Follower, Sent, LOOK_EVERY};
pub use issue::task_from_issue;
pub use onto::{pull_request_head, PullRequestHead};
pub use open::{open, open_together};
pub use request::{Opened, Options};
pub use tool::{Forge, Tool};

use crate::store::StoreError;
use crate::verbs::review::ReviewError;
use crate::worktree::WorktreeError;

/// What stops a pull request.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run has no worktree, still writes, or its work cannot be
    /// committed (a hook refused it, it changed nothing).
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// git said no.
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// The run was launched on a detached HEAD and no base was named.
    #[error(
        "run {run} was launched on a detached HEAD: name the branch to merge into (`corral pr {run} --base main`)"
    )]
    NoBase { run: String },
    /// The repository has no remote to push to.
    #[error(
        "the repository {repo} has no remote to push the run's branch to: add one (`git -C {repo} remote add origin URL`), then run `corral pr` again"
    )]
    NoRemote { repo: String },
    /// The forge's CLI is not installed.
    #[error("{} is not installed, and Corral reaches {} with it: {}; then `{} auth login`", .0.program(), .0.forge().site(), .0.install(), .0.program())]
    Missing(Tool),
    /// The forge's CLI refused (not logged in, no such repository, …), in
    /// its own words.
    #[error("{} could not {doing}: {said}", .tool.program())]
    Refused { tool: Tool, doing: &'static str, said: String },
    /// The forge's CLI said nothing Corral can read as a link.
    #[error("{} opened no {} that it named: it said {said:?}", .tool.program(), .tool.forge().request_name())]
    Unread { tool: Tool, said: String },
    /// The remote refused the push, said in words with what to run.
    #[error("{0}")]
    PushRefused(String),
    /// The agent asked for a run outside its own tree.
    #[error("run {run} is not one of run {caller}'s: an agent opens pull requests only for the runs it launched")]
    NotItsOwn { caller: String, run: String },
    /// The pull request was merged or closed on the forge.
    #[error("pull request {name} is {state} on the forge (run {run}): nothing was pushed. Open a new one from a new run, or reopen it there")]
    Ended { run: String, name: String, state: String },
    /// Asked to change what only opening sets.
    #[error("pull request {name} of run {run} is open already, and {asked} can only be given when one is opened: nothing was pushed. Change it on the forge (`gh pr edit`), or run `corral pr {run}` without them to push")]
    AlreadyOpen { run: String, name: String, asked: String },
    /// The base branch is not on the remote.
    #[error("{remote} has no branch {base} to open the pull request into: push it first (`git push {remote} {base}`), or name one it has with --base")]
    NoBaseThere { remote: String, base: String },
    /// The run started from commits the remote's base does not have.
    #[error("the run started from {count} commit(s) that {remote}/{base} does not have (your own unpushed work, or another branch's): the pull request would carry them without a word, so nothing was pushed. Push them first (`git push {remote} {base}`), or name the branch that holds them with --base")]
    UnpublishedBase { remote: String, base: String, count: u64 },
    /// `--issue` or `--pr` given something that is neither a number nor a page.
    #[error("{flag} {given:?} is neither {what}'s number nor its page: give one (`{flag} 12`, or its https:// page)")]
    BadReference { flag: &'static str, what: &'static str, given: String },
    /// `--pr` of a pull request from a fork (its branch is not the repository's).
    #[error("pull request {name} comes from a fork ({head}): a run starts on a pull request of this repository's own branches; fetch it yourself and launch with --base")]
    FromFork { name: String, head: String },
    /// One of several runs for one pull request has one of its own, or
    /// of other runs.
    #[error("run {run} has a pull request already ({name}): a pull request of several runs is opened for runs that have none, or pushed to with its own runs")]
    OtherPullRequest { run: String, name: String },
    /// A run named with the runs of a pull request of several is not one
    /// of them.
    #[error("run {run} is not one of pull request {name}'s runs: push to it with its own runs (`corral pr` of any of them), or open a new one for run {run}")]
    NotInIt { run: String, name: String },
    /// Two runs for one pull request change the same lines.
    #[error("runs {} and {} both change {}; nothing was pushed. Open a pull request of one, then reply to the other to redo its change on top (or leave it out)", .0.first, .0.second, .0.files.join(", "))]
    Clash(crate::worktree::Conflict),
    /// No run of a pull request of several can go on in a session.
    #[error("no run of pull request {name} can go on in a session ({runs}: command runs, or their worktrees discarded): nothing was sent; launch a new run with what it asks")]
    NoSession { name: String, runs: String },
    /// Every run of a pull request of several was discarded.
    #[error("every run of pull request {name} was discarded: nothing is left to push to it")]
    AllDiscarded { name: String },
    /// One run of several cannot go in the pull request.
    #[error("run {run}: {why}")]
    OneOfThem { run: String, why: Box<ForgeError> },
    /// The run has no pull request.
    #[error("run {run} has no pull request: open one with `corral pr {run}`")]
    NoPullRequest { run: String },
    /// The forge asks nothing of the run now.
    #[error("the pull request of run {run} asks nothing of it now: what it asked was sent, pushed upon or dismissed (`corral pr {run} --check` asks the forge again; `corral reply {run} …` says more)")]
    NothingAsked { run: String },
    /// The reply to the run was refused.
    #[error(transparent)]
    Reply(#[from] crate::verbs::reply::ReplyError),
    /// Asked by an agent whose preset does not allow it.
    #[error(
        "run {caller}'s preset does not let its agent open pull requests: you open them (`corral pr {run}`), or the preset says `pr: allow`"
    )]
    NotAllowed { caller: String, run: String },
}

/// The forge's words without escape sequences (whole: a colour's `[31m`
/// or a clipboard write's payload is not left behind) nor control
/// characters but line breaks and tabs: what an issue, a review or a log
/// holds never reaches a terminal or an agent's screen as a command.
fn clean(text: &str) -> String {
    static ESCAPE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b[@-_]|\u{9b}[0-?]*[ -/]*[@-~]")
            .expect("a valid pattern")
    });
    ESCAPE.replace_all(text, "").chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect()
}
/// The most characters of one thing the forge asks (a review, a line
/// comment, a failed check with its log), and of all of them: what reaches
/// the run is a reply, which has a bound, and a bot's review can be a
/// megabyte.
const ENTRY_MOST: usize = 16_000;
const FEEDBACK_MOST: usize = 64_000;

/// What the forge asks, from its `entries` in order: each within
/// [`ENTRY_MOST`], all within [`FEEDBACK_MOST`], what did not fit counted
/// with where to read it (`url`). `None` when it asks nothing.
fn feedback_of(entries: Vec<String>, url: &str) -> Option<String> {
    let mut kept: Vec<String> = Vec::new();
    let mut room = FEEDBACK_MOST;
    let mut left = 0;
    for entry in entries {
        let entry = match entry.char_indices().nth(ENTRY_MOST) {
            Some((at, _)) => format!("{}…(cut: the rest is on the forge)", &entry[..at]),
            None => entry,
        };
        let size = entry.chars().count() + 2;
        if size > room {
            left += 1;
            continue;
        }
        room -= size;
        kept.push(entry);
    }
    if left > 0 {
        kept.push(format!("…and {left} more, too long to send: read them on the forge, {}", clean(url)));
    }
    (!kept.is_empty()).then(|| kept.join("\n\n"))
}

/// The repository a forge's page belongs to — `https://HOST/PATH` then
/// `marker` (`/pull/`, `/-/merge_requests/`, `/actions/runs/`) — as its
/// host and path (`OWNER/REPO`, or a GitLab group's path): what is read of
/// a pull request is read of its own repository, never of whichever one
/// the checkout's remotes name.
fn repository_of_page(url: &str, marker: &str) -> Option<(String, String)> {
    let rest = url.split_once("://")?.1;
    let (host, rest) = rest.split_once('/')?;
    let path = rest.split_once(marker.trim_start_matches('/'))?.0.trim_end_matches('/');
    let fine = |part: &str| {
        !part.is_empty()
            && !part.starts_with(['-', '.'])
            && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (fine(host.split(':').next()?) && path.split('/').all(fine) && path.contains('/'))
        .then(|| (host.to_string(), path.to_string()))
}

/// A number or an https:// page: never an option of the forge's CLI
/// (`--web`).
fn is_reference(reference: &str) -> bool {
    let page = reference.starts_with("https://") || reference.starts_with("http://");
    page || (!reference.is_empty() && reference.bytes().all(|b| b.is_ascii_digit()))
}

/// The forge of an issue or pull request: its page's host when a page is
/// given, else the repository's `origin`'s.
fn forge_of(cwd: &std::path::Path, reference: &str) -> Forge {
    if reference.contains("://") {
        return Forge::of_remote(reference);
    }
    let origin = push::git(cwd, &["remote", "get-url", "origin"]).map(|url| url.trim().to_string());
    origin.as_deref().map_or(Forge::GitHub, Forge::of_remote)
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_the_forge_asks_is_bounded_and_says_what_was_left() {
        let entries: Vec<String> = (0..10).map(|n| format!("review {n}: {}", "x".repeat(20_000))).collect();
        let said = super::feedback_of(entries, "https://github.com/o/r/pull/7").unwrap();
        assert!(said.chars().count() <= super::FEEDBACK_MOST + 200, "{}", said.len());
        assert!(said.contains("review 0:") && said.contains("…(cut: the rest is on the forge)"));
        assert!(said.ends_with("…and 7 more, too long to send: read them on the forge, https://github.com/o/r/pull/7"));
        assert_eq!(super::feedback_of(Vec::new(), "u"), None);
    }

    #[test]
    fn a_page_says_its_repository() {
        let of = super::repository_of_page;
        let github = Some(("github.com".to_string(), "octo/app".to_string()));
        assert_eq!(of("https://github.com/octo/app/pull/7", "/pull/"), github);
        assert_eq!(of("https://github.com/octo/app/actions/runs/1/job/2", "/actions/runs/"), github);
        let nested = Some(("gitlab.example.com:8443".to_string(), "group/sub/app".to_string()));
        assert_eq!(
            of("https://gitlab.example.com:8443/group/sub/app/-/merge_requests/3", "/-/merge_requests/"),
            nested
        );
        assert_eq!(of("https://github.com/--paginate/x/pull/7", "/pull/"), None);
        assert_eq!(of("https://ci.example/build/1", "/pull/"), None);
    }
}
