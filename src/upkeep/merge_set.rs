//! Merges cut short: a merge of runs whose process died mid-way (a closed
//! terminal's SIGHUP, SIGTERM, SIGKILL during a slow hook) is finished by
//! the next heal from its journal (`merge_sets`, begun by `review`), so
//! the branch and what Corral records agree. A set lands in one step
//! (see `worktree::land`): killed before it, nothing is merged; killed
//! between its files and its branch, the files go back; killed after,
//! what the branch holds of it is recorded as merged. The branch itself
//! is never moved back: whatever else landed on it stays. Never merged
//! and unrecorded.

use std::path::Path;

use crate::adapter::{EventKind, TranscriptEvent};
use crate::store::{MergeSet, Store, StoreError};
use crate::worktree::{self, SetRun};

/// How a merge set cut short was finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// Nothing of it had been made.
    Nothing,
    /// All its runs were merged: recorded.
    Whole,
    /// The branch holds part of it (the user moved it since): those runs
    /// are recorded as merged.
    Stands(Vec<String>),
    /// Its files stayed in the checkout, staged, while the branch is
    /// where it was: the user's changes were in the way of putting them
    /// back.
    FilesLeft,
}

/// Finishes every journaled merge whose process is gone; what was
/// finished, set by set. A set another process finishes meanwhile is left
/// to it.
pub fn finish_cut_short(store: &mut Store) -> Result<Vec<(MergeSet, Finished)>, StoreError> {
    let mut finished = Vec::new();
    for set in store.merge_sets()? {
        if set.owner.is_alive() {
            continue;
        }
        // A git at work there (the user's), or a branch that cannot be
        // read for now (renamed, git failing): a later heal finishes it.
        let repo = Path::new(&set.repo);
        let unready = match std::fs::metadata(repo) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false, // gone: said, and dropped
            Err(_) => true, // cannot be reached for now (a folder's permissions)
            Ok(_) => worktree::git_busy(repo) || worktree::branch_tip(repo, &set.branch).is_err(),
        };
        if unready {
            continue;
        }
        // A merge of this repository at work now finishes first.
        let lock = match std::fs::metadata(repo) {
            Ok(_) => match worktree::MergeLock::try_take(repo) {
                Some(lock) => Some(lock),
                None => continue,
            },
            Err(_) => None,
        };
        if !store.claim_merge_set(set.id, set.owner)? {
            continue;
        }
        let done = finish(store, &set)?;
        drop(lock);
        finished.push((set, done));
    }
    Ok(finished)
}

/// Finishes one set this process holds.
fn finish(store: &mut Store, set: &MergeSet) -> Result<Finished, StoreError> {
    let runs: Vec<SetRun> = set
        .runs
        .iter()
        .filter_map(|id| store.run(id).ok())
        .filter_map(|run| {
            let commit = set.made.get(&run.id).cloned();
            Some(SetRun { branch: run.worktree?.branch, id: run.id, commit })
        })
        .collect();
    let repo = Path::new(&set.repo);
    if std::fs::metadata(repo).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        // The repository is gone (moved or deleted): nothing to agree with.
        let said = format!(
            "the merge of {} into {} was cut short (its process ended), and {} is gone: what it merged, if \
             anything, is not recorded; `corral diff` says what is left",
            set.runs.join(", "),
            set.branch,
            set.repo
        );
        store.end_merge_set(set.id, &[], set.squashed)?;
        tell(store, set, &said)?;
        return Ok(Finished::Nothing);
    }
    // A landing killed between its files and its branch: the files go
    // back from the last merge it journaled (each was made on the one
    // before, so the last holds them all).
    let last = set.runs.iter().rev().find_map(|id| set.made.get(id));
    let files_back = last.is_none_or(|last| worktree::take_back_files(repo, &set.before, last));
    let found = match worktree::in_branch(repo, &set.branch, &set.before, &runs) {
        Ok(found) => found,
        Err(e) => {
            // Unreadable for now (a branch renamed, git failing): left to
            // a later heal, never dropped.
            tracing::warn!("a merge cut short in {} cannot be read yet: {e}", set.repo);
            store.release_merge_set(set.id, set.owner)?;
            return Ok(Finished::Nothing);
        }
    };
    let merged = found.merged;
    let done = if merged.is_empty() && !files_back {
        Finished::FilesLeft
    } else if merged.is_empty() {
        Finished::Nothing
    } else if merged.len() == set.runs.len() {
        Finished::Whole
    } else {
        Finished::Stands(merged.iter().map(|(id, _)| id.clone()).collect())
    };
    let record = merged;
    store.end_merge_set(set.id, &record, set.squashed)?;
    tell(store, set, &say(set, &done))?;
    Ok(done)
}

/// Says `said` in the transcript of each run of `set`.
fn tell(store: &mut Store, set: &MergeSet, said: &str) -> Result<(), StoreError> {
    for id in &set.runs {
        if store.run(id).is_err() {
            continue; // removed meanwhile
        }
        let next = store.last_event_seq(id)? + 1;
        store.append_events(id, next, &[TranscriptEvent::text(EventKind::System, said.to_string())])?;
    }
    Ok(())
}

/// What each run's transcript says of it.
fn say(set: &MergeSet, done: &Finished) -> String {
    let what = format!("the merge of {} into {} was cut short (its process ended)", set.runs.join(", "), set.branch);
    match done {
        Finished::Nothing => format!("{what} before anything was merged: nothing is"),
        Finished::Whole => format!("{what} after every run was merged: recorded as merged"),
        Finished::Stands(ids) => format!(
            "{what}; {} are in the branch (it was moved since) and are recorded as merged; merge the others again",
            ids.join(", ")
        ),
        Finished::FilesLeft => format!(
            "{what} after it moved your files and before it moved the branch, and your changes since are in the way \
             of putting them back: its files are staged in {}, none of it is merged (`git -C {} status`; `git -C {} \
             restore --staged --worktree` on its files)",
            set.repo, set.repo, set.repo
        ),
    }
}
