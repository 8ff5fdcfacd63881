//! One pull request of several runs' work (`corral pr A B C`, MCP
//! `open_pull_request` with several runs): what "review together" judged
//! fit to merge as a set goes out as one pull request. Each run's work is
//! committed on its own branch as `corral pr` commits one (the user's
//! hooks judge it), then the runs' branches are merged in the order given
//! onto the base as the remote has it, apart from any checkout, kept under
//! `refs/corral/together/FIRST` and pushed as `corral/together-FIRST`.
//! Runs that change the same lines, or that started from other branches or
//! repositories, are refused before anything is committed, as `corral
//! merge A B C` refuses them. Run again (with any of its runs), it merges
//! what the runs committed since and pushes to the same pull request.

use std::path::{Path, PathBuf};

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
use crate::verbs::review::{self, ReviewError};
use crate::worktree::{self, Worktree};

/// Opens one pull request for the work of runs `ids`, or pushes what they
/// did since to the one they have.
pub(super) fn open(store: &mut Store, ids: &[String], options: &Options) -> Result<Opened, ForgeError> {
    // One at a time per repository, from reading which runs have which
    // pull request to recording what was done: two sets opened at once
    // that share a run make one pull request and refuse the other.
    let named = store.find_run(ids.first().map(String::as_str).unwrap_or_default())?;
    let repo = PathBuf::from(named.worktree_repo.clone().unwrap_or_default());
    let _lock = if repo.is_dir() { Some(worktree::MergeLock::take(&repo)?) } else { None };
    let ids = members(store, ids)?;
    let known = store.pull_request(&ids[0])?;
    let mut runs: Vec<(Run, Worktree)> = Vec::new();
    for id in &ids {
        let run = store.find_run(id)?;
        // A run of an open pull request whose worktree was discarded since:
        // its work is in the pull request already.
        if known.is_some() && run.worktree.is_none() && run.worktree_repo.is_some() {
            continue;
        }
        runs.push(ready(store, run, options)?);
    }
    let Some(first) = runs.first().map(|(run, _)| run.clone()) else {
        let name = known.as_ref().map(PullRequestRow::name).unwrap_or_default();
        return Err(ForgeError::AllDiscarded { name });
    };
    for (other, _) in &runs[1..] {
        let apart =
            |why: &str| ReviewError::Apart { first: first.id.clone(), second: other.id.clone(), why: why.into() };
        if other.worktree_repo != first.worktree_repo {
            return Err(apart("another repository").into());
        }
        if other.worktree_from_branch != first.worktree_from_branch {
            return Err(apart("another branch").into());
        }
    }
    // Two runs that change the same lines are said as a pair, as a merge
    // of them says it.
    let kept: Vec<String> = runs.iter().map(|(run, _)| run.id.clone()).collect();
    let (_, found) = review::conflicts(store, &kept, Path::new("/"))?;
    if let Some(pair) = found.into_iter().next() {
        return Err(ForgeError::Clash(pair));
    }
    if first.worktree_repo.as_deref() != Some(&*repo.to_string_lossy()) {
        return Err(ReviewError::Apart { first: named.id, second: first.id, why: "another repository".into() }.into());
    }
    let Destination { base, remote, url, tool } = destination(store, &repo, &first, known.as_ref(), options)?;
    let base_remote = remote_for(&repo, None, &base).map_or_else(|_| remote.clone(), |(name, _)| name);
    let mut there = String::new();
    for (_, worktree) in &runs {
        there = refuse_unpublished_base(&repo, &base_remote, &base, worktree)?;
    }
    // Built on what the pull request holds, else on the base as the
    // remote has it: each run's branch merged in, in order.
    let start = known.as_ref().map_or(there, |pr| pr.pushed.clone());
    let (mut tip, mut committed, mut changes) = (start.clone(), false, Vec::new());
    for (run, worktree) in &runs {
        changes.push(worktree::changes(worktree)?);
        let published = worktree::commit_for_review(&repo, worktree, &review::commit_message(run))
            .map_err(|e| apart_from(run, e))?;
        committed |= published.committed;
        let message = format!("Merge run {} ({}): {}", run.id, run.preset, first_line(&run.task));
        let merged = worktree::merge_for_review(&repo, (&tip, &published.commit), &message, &run.id)
            .map_err(|e| apart_from(run, e))?;
        if let Some(merged) = merged {
            tip = merged;
        }
    }
    let local = format!("refs/corral/together/{}", first.id);
    super::push::git(&repo, &["update-ref", &local, &tip]).ok_or_else(|| {
        ForgeError::PushRefused(format!("the runs' merges could not be kept under {local} in {}", repo.display()))
    })?;
    let head = known.as_ref().map_or_else(|| format!("corral/together-{}", first.id), |pr| pr.head.clone());
    let may_fork = known.is_none() && options.remote.is_none();
    let (remote, from) = push_or_fork(tool, &repo, (&remote, &url), (&local, &head), may_fork)?;
    let (url, number, opened) = match &known {
        Some(pr) => (pr.url.clone(), pr.number, false),
        None => {
            let title = match &options.title {
                Some(title) => clean_line(title),
                None => title_of(&runs),
            };
            let body = options.body.clone().unwrap_or_else(|| body_of(&runs, &changes));
            let asked = Asked { head: &head, base: &base, title: &title, body: &body, draft: options.draft };
            let (url, number) = create(tool, &repo, &asked, &from)?;
            (url, number, true)
        }
    };
    let now = time::format(time::now());
    // Every run of it, those whose worktree went too: what it holds now.
    for id in &ids {
        store.record_pull_request(&PullRequestRow {
            run_id: id.clone(),
            forge: tool.forge().as_str().to_string(),
            url: url.clone(),
            number,
            remote: remote.clone(),
            head: head.clone(),
            base: base.clone(),
            draft: options.draft,
            state: "open".into(),
            pushed: tip.clone(),
            opened_at: now.clone(),
            pushed_at: now.clone(),
            together: true,
            ..PullRequestRow::default()
        })?;
    }
    Ok(Opened {
        run: first.id,
        forge: tool.forge(),
        url,
        number,
        opened,
        pushed: tip,
        committed,
        remote,
        head,
        base,
        together: ids,
    })
}

/// The runs a pull request of several is for: `ids` themselves for a new
/// one (none with a pull request of its own); all of its runs, in their
/// order, once it is open (any one of them names it).
fn members(store: &Store, ids: &[String]) -> Result<Vec<String>, ForgeError> {
    let mut given: Vec<String> = Vec::new();
    for id in ids {
        let run = store.find_run(id)?;
        if !given.contains(&run.id) {
            given.push(run.id);
        }
    }
    let mut set: Option<(PullRequestRow, Vec<String>)> = None;
    for id in &given {
        match store.pull_request(id)? {
            None if set.is_none() => {}
            Some(pr) if pr.together => {
                let runs = store.runs_together(&pr.url)?;
                if set.as_ref().is_some_and(|(known, _)| known.url != pr.url) {
                    return Err(ForgeError::OtherPullRequest { run: id.clone(), name: pr.name() });
                }
                set = Some((pr, runs));
            }
            Some(pr) => return Err(ForgeError::OtherPullRequest { run: id.clone(), name: pr.name() }),
            None => {
                let name = set.as_ref().map(|(pr, _)| pr.name()).unwrap_or_default();
                return Err(ForgeError::NotInIt { run: id.clone(), name });
            }
        }
    }
    match set {
        None => Ok(given),
        Some((pr, runs)) => match given.iter().find(|id| !runs.contains(id)) {
            Some(id) => Err(ForgeError::NotInIt { run: id.clone(), name: pr.name() }),
            None => Ok(runs),
        },
    }
}

/// A run's own refusal in the set, naming it.
fn apart_from(run: &Run, e: worktree::WorktreeError) -> ForgeError {
    ForgeError::OneOfThem { run: run.id.clone(), why: Box::new(e.into()) }
}

/// The description of several runs' work: each in the order merged, with
/// its task, what its agent said and the files it changed, each within its
/// share of what the forge takes (a long task never hides the runs after
/// it).
fn body_of(runs: &[(Run, Worktree)], changes: &[worktree::Changes]) -> String {
    let mut body = format!("The work of {} Corral runs, merged in this order.\n", runs.len());
    let share = (BODY_MOST / runs.len().max(1)).saturating_sub(200).max(200);
    for (n, ((run, _), changes)) in runs.iter().zip(changes).enumerate() {
        let title = clean_line(first_line(&run.task));
        body.push_str(&format!("\n## {}. {title}\n\nRun `{}`: {}.\n\n", n + 1, run.id, made_by(run)));
        body.push_str(&within(work_of(run, changes, "###"), share, &run.id));
    }
    body.push_str("\n---\nMade by Corral.\n");
    body
}

/// The title of several runs' work: their tasks' first lines, or the
/// first's and how many more when they do not fit on one line.
fn title_of(runs: &[(Run, Worktree)]) -> String {
    let lines: Vec<&str> = runs.iter().map(|(run, _)| first_line(&run.task)).collect();
    let all = lines.join("; ");
    if all.chars().count() <= 72 {
        return clean_line(&all);
    }
    let more = format!(" (and {} more)", lines.len() - 1);
    let first = clean_line(lines[0]);
    let room = 72 - more.chars().count();
    let first = if first.chars().count() > room {
        format!("{}…", first.chars().take(room - 1).collect::<String>())
    } else {
        first
    };
    format!("{first}{more}")
}
