//! `corral pr RUN` (and MCP `open_pull_request`): the run's work committed
//! on its branch as the user's commit would be, the branch pushed, and a
//! pull request opened for it — or, once one is open, pushed to again, so
//! a run that went on after a review lands in the same pull request.

use super::fork::push_or_fork;
use super::push::remote_for;
use super::request::{
    clean_line, create, destination, first_line, made_by, ready, refuse_unpublished_base, within, work_of, Asked,
    Destination, Opened, Options, BODY_MOST,
};
use super::ForgeError;
use crate::run::Run;
use crate::store::{PullRequestRow, Store};
use crate::text::time;
use crate::verbs::review;
use crate::worktree;

/// Opens a pull request for run `id`'s work, or pushes to the one it has
/// (with all its runs, if it is one of several runs' work).
pub fn open(store: &mut Store, id: &str, options: &Options) -> Result<Opened, ForgeError> {
    let found = store.find_run(id)?;
    if store.pull_request(&found.id)?.is_some_and(|pr| pr.together) {
        return super::together::open(store, &[found.id], options);
    }
    let (run, worktree) = ready(store, found, options)?;
    let repo = std::path::PathBuf::from(run.worktree_repo.clone().unwrap_or_default());
    // One at a time per repository, from reading what is known to
    // recording what was done: two `corral pr` at once open one pull
    // request, and a merge of the same run never commits beside it.
    let lock = worktree::MergeLock::take(&repo)?;
    let known = store.pull_request(&run.id)?;
    if known.as_ref().is_some_and(|pr| pr.together) {
        // Made one of several while this waited for the lock: pushed
        // with its runs, never alone over theirs.
        drop(lock);
        return super::together::open(store, &[run.id], options);
    }
    let Destination { base, remote, url, tool } = destination(store, &repo, &run, known.as_ref(), options)?;
    // The branch it is pushed to: its own, or the pull request's it was
    // started on (`launch --pr`), which its commits must build upon.
    let to = known.as_ref().map_or_else(|| worktree.branch.clone(), |pr| pr.head.clone());
    let upon = if to == worktree.branch { base.clone() } else { to.clone() };
    // The base lives on the repository the pull request is opened in (not
    // on a fork its branch is pushed to).
    let base_remote = match to == worktree.branch {
        true => remote_for(&repo, None, &base).map_or_else(|_| remote.clone(), |(name, _)| name),
        false => remote.clone(),
    };
    refuse_unpublished_base(&repo, &base_remote, &upon, &worktree)?;
    let changes = worktree::changes(&worktree)?;
    let published = worktree::commit_for_review(&repo, &worktree, &review::commit_message(&run))?;
    let may_fork = known.is_none() && options.remote.is_none();
    let from_ref = format!("refs/heads/{}", worktree.branch);
    let (remote, from) = push_or_fork(tool, &repo, (&remote, &url), (&from_ref, &to), may_fork)?;
    let now = time::format(time::now());
    let (url, number, opened) = match &known {
        Some(pr) => (pr.url.clone(), pr.number, false),
        None => {
            let title = clean_line(options.title.as_deref().unwrap_or_else(|| first_line(&run.task)));
            let body = options.body.clone().unwrap_or_else(|| body_of(&run, &changes));
            let asked = Asked { head: &worktree.branch, base: &base, title: &title, body: &body, draft: options.draft };
            let (url, number) = create(tool, &repo, &asked, &from)?;
            (url, number, true)
        }
    };
    store.record_pull_request(&PullRequestRow {
        run_id: run.id.clone(),
        forge: tool.forge().as_str().to_string(),
        url: url.clone(),
        number,
        remote: remote.clone(),
        head: to.clone(),
        base: base.clone(),
        draft: options.draft,
        state: "open".into(),
        pushed: published.commit.clone(),
        opened_at: now.clone(),
        pushed_at: now,
        ..PullRequestRow::default()
    })?;
    Ok(Opened {
        run: run.id,
        forge: tool.forge(),
        url,
        number,
        opened,
        pushed: published.commit,
        committed: published.committed,
        remote,
        head: to,
        base,
        together: Vec::new(),
    })
}

/// Opens one pull request for the work of runs `ids`, merged in that
/// order, or pushes what they did since to the one they have (see
/// `together`). One run is [`open`].
pub fn open_together(store: &mut Store, ids: &[String], options: &Options) -> Result<Opened, ForgeError> {
    match ids {
        [one] => open(store, one, options),
        _ => super::together::open(store, ids, options),
    }
}

/// The description: the task, what the agent said last (quoted: its words,
/// not the user's), the files changed, and which run made it.
fn body_of(run: &Run, changes: &worktree::Changes) -> String {
    let made = format!("\n---\nMade by Corral run `{}`: {}.\n", run.id, made_by(run));
    let mut body = within(work_of(run, changes, "###"), BODY_MOST, &run.id);
    body.push_str(&made);
    body
}
