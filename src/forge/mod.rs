//! From a run to a pull request: its branch pushed to the repository's
//! remote and a pull request (GitHub, through `gh`) or merge request
//! (GitLab, through `glab`) opened for it, with the forge's own CLI — its
//! login and token are the user's, never Corral's, never in a run's
//! environment.
//!
//! `tool` runs the forge's CLI, `push` says git's refusals in words,
//! `open` is the verb (`corral pr`, MCP `open_pull_request`), `issue` makes
//! an issue a run's task (`corral launch --issue`).

mod issue;
mod open;
mod push;
mod tool;

pub use issue::task_from_issue;
pub use open::{open, Opened, Options};
pub use tool::{Forge, Tool};

use crate::review::ReviewError;
use crate::store::StoreError;
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
    #[error("{} is not installed, and a {} is opened with it: {}; then `{} auth login`", .0.program(), .0.forge().request_name(), .0.install(), .0.program())]
    Missing(Tool),
    /// The forge's CLI refused (not logged in, no such repository, …), in
    /// its own words.
    #[error("{} could not open the {}: {said}", .tool.program(), .tool.forge().request_name())]
    Refused { tool: Tool, said: String },
    /// The forge's CLI said nothing Corral can read as a link.
    #[error("{} opened no {} that it named: it said {said:?}", .tool.program(), .tool.forge().request_name())]
    Unread { tool: Tool, said: String },
    /// The remote refused the push, said in words with what to run.
    #[error("{0}")]
    PushRefused(String),
    /// Asked by an agent whose preset does not allow it.
    #[error(
        "run {caller}'s preset does not let its agent open pull requests: you open them (`corral pr {run}`), or the preset says `pr: allow`"
    )]
    NotAllowed { caller: String, run: String },
}
