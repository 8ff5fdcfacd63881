//! Taking or dropping what a run with a worktree changed: the checks and
//! messages the CLI, the MCP server and the app share (the git work is in
//! `worktree`).

use std::path::Path;

use crate::run::Run;
use crate::store::{Store, StoreError};
use crate::worktree::{self, Changes, Worktree, WorktreeError};

/// Why a run's changes cannot be reviewed, taken or dropped.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The store failed, or no such run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The worktree is missing, or git said no.
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// The run was launched on a detached HEAD.
    #[error(
        "run {run} was launched on a detached HEAD, so there is no branch to merge into: merge by hand with `git -C {repo} merge {branch}`"
    )]
    NoBranch { run: String, repo: String, branch: String },
    /// Asked from inside a sandboxed run: a merge writes the user's
    /// repository, outside its sandbox.
    #[error("a merge writes your repository, outside the sandbox of run {0}: merge in your own terminal")]
    Sandboxed(String),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    /// The agent committed files Corral carried in from the user's
    /// checkout (`.worktreeinclude`): a merge would put them in the
    /// repository (a `.env`, `node_modules/`).
    #[error(
        "run {run} committed {} that Corral carried into its worktree from your checkout (.worktreeinclude), so merging would put them in your repository: remove them from the branch (`git -C {worktree} rm -r --cached {}` and commit), then try again",
        paths.join(", "), paths.join(" ")
    )]
    CarriedFiles { run: String, worktree: String, paths: Vec<String> },
    /// Two of the runs merged together change the same lines, or the
    /// second makes only the change the first makes.
    #[error(
        "{}; nothing was merged",
        if .0.same {
            format!("run {} makes only the change run {} makes ({}): merge one of them, discard the other", .0.second, .0.first, .0.files.join(", "))
        } else {
            format!("runs {} and {} both change {}: merge one, then reply to the other to redo its change on top (or merge it by hand)", .0.first, .0.second, .0.files.join(", "))
        }
    )]
    RunsConflict(worktree::Conflict),
    /// A run of several merged together was refused for its own reasons
    /// (a conflict with the branch or with the runs before it, the user's
    /// uncommitted changes in its files, a hook): the set lands whole or
    /// not at all, so nothing was merged.
    #[error(
        "run {run} cannot be merged after {}: {why} — so none of them is merged (a set lands whole or not at all); merge {} without it, or one at a time",
        before.join(", "), before.join(" ")
    )]
    NotTogether { before: Vec<String>, run: String, why: Box<ReviewError> },
    /// Runs judged or shown together must be of one repository.
    #[error("runs {first} and {second} are in different repositories ({first_repo}, {second_repo}): name the runs of one repository at a time")]
    OtherRepositories { first: String, second: String, first_repo: String, second_repo: String },
    /// Runs merged together must go into one branch of one repository.
    #[error(
        "runs {first} and {second} start from different branches or repositories ({why}): merge them one at a time"
    )]
    Apart { first: String, second: String, why: String },
}

/// The run's worktree, there on disk, or why it is not (none, discarded,
/// never made or removed by hand: said in words, never as git's failure
/// to enter a missing folder).
pub fn worktree_of(run: &Run) -> Result<&Worktree, WorktreeError> {
    let worktree = recorded_worktree_of(run)?;
    if !worktree::is_there(Path::new(&worktree.path)) {
        return Err(WorktreeError::Missing {
            run: run.id.clone(),
            path: worktree.path.clone(),
            branch: worktree.branch.clone(),
        });
    }
    Ok(worktree)
}

/// The run's worktree as recorded, on disk or not: what a discard removes
/// (its branch, and its folder if it is there).
pub fn recorded_worktree_of(run: &Run) -> Result<&Worktree, WorktreeError> {
    match (&run.worktree, &run.worktree_repo) {
        (Some(worktree), _) => Ok(worktree),
        (None, Some(_)) => Err(WorktreeError::Discarded(run.id.clone())),
        (None, None) => Err(WorktreeError::NoWorktree(run.id.clone())),
    }
}

/// What run `id` (or a unique prefix) changed; the numbers are kept with
/// the run (the window's `+N −M`). Files carried in from the user's
/// checkout are never the run's work, committed by its agent or not: left
/// out (a merge refuses them, and says which).
pub fn changes(store: &mut Store, id: &str) -> Result<(Run, Changes), ReviewError> {
    let run = store.find_run(id)?;
    let mut changes = worktree::changes(worktree_of(&run)?)?;
    let carried = carried_of(store, &run, &changes.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>());
    if !carried.is_empty() {
        changes.files.retain(|f| !carried.contains(&f.path));
        changes.added = changes.files.iter().map(|f| f.added).sum();
        changes.removed = changes.files.iter().map(|f| f.removed).sum();
    }
    store.record_changes(&run.id, changes.count())?;
    Ok((run, changes))
}

/// Run `id`'s unified diff, without the files carried in from the user's
/// checkout: each of those said on one line, its content (a `.env`'s
/// secret) never shown.
pub fn patch(store: &Store, run: &Run) -> Result<String, ReviewError> {
    let worktree = worktree_of(run)?;
    let by_file = worktree::patch_by_file(worktree)?;
    let paths: Vec<String> = by_file.iter().map(|(path, _)| path.clone()).collect();
    let carried = carried_of(store, run, &paths);
    if carried.is_empty() {
        return Ok(worktree::patch(worktree)?);
    }
    let mut patch = String::new();
    for (path, diff) in by_file {
        match carried.contains(&path) {
            true => patch.push_str(&format!(
                "# {path}: carried in from your checkout and committed by the agent; not shown, never merged\n"
            )),
            false => patch.push_str(&diff),
        }
    }
    Ok(patch)
}

/// Which of `changed` were carried into run `run`'s worktree.
fn carried_of(store: &Store, run: &Run, changed: &[String]) -> Vec<String> {
    let list = std::fs::read_to_string(worktree::carry::list_file(&store.home().run_dir(&run.id))).unwrap_or_default();
    match list.trim().is_empty() {
        true => Vec::new(),
        false => worktree::carry::committed(&list, changed),
    }
}

/// Measures what run `id` changed, if it has a worktree, and keeps the
/// numbers with it: done by its shepherd when the run ends.
pub fn measure(store: &mut Store, id: &str) -> Result<(), ReviewError> {
    if store.run(id)?.worktree.is_some() {
        changes(store, id)?;
    }
    Ok(())
}

/// A merge that happened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Merged {
    /// The run's id.
    pub id: String,
    /// The branch its changes went into.
    pub branch: String,
    /// The new commit there.
    pub commit: String,
}

/// Brings run `id`'s changes into the branch it started from: one commit
/// whose message is the preset and task, or with `keep_commits` a merge of
/// the agent's commits. Refused while the run is active; with a conflict or
/// uncommitted changes of the user's in the files it touches, it changes
/// nothing and says why.
pub fn merge(store: &mut Store, id: &str, keep_commits: bool) -> Result<Merged, ReviewError> {
    let run = store.find_run(id)?;
    let merged = merge_in_order(store, std::slice::from_ref(&run), keep_commits)?;
    Ok(merged.into_iter().next().expect("one run merged"))
}

/// Prepares run `id`'s merge (see `worktree::merge`) on `onto` (the merge
/// before it in a set) or on its branch's HEAD, under the repository's
/// merge lock: the run as it is now, refused while it or another run
/// working in its worktree is active.
fn prepare(
    store: &mut Store,
    id: &str,
    keep_commits: bool,
    onto: Option<&str>,
) -> Result<(Run, worktree::Prepared), ReviewError> {
    let run = once_exited(store, store.find_run(id)?)?;
    let worktree = worktree_of(&run)?;
    refuse_still_writing(&run)?;
    // Never what another run is still writing there (a helper launched
    // in it): `discard` and `rm` refuse the same.
    if let Some(other) = working_in(store, worktree)? {
        return Err(WorktreeError::WouldConflict(format!(
            "run {} works in the worktree of run {} now: merging would take its files half written; nothing was \
             changed. Wait for it (`corral wait {}`), or abort it, then merge again",
            other.id, run.id, other.id
        ))
        .into());
    }
    let repo = run.worktree_repo.clone().unwrap_or_default();
    refuse_carried(store, &run, worktree)?;
    let Some(branch) = run.worktree_from_branch.clone() else {
        return Err(ReviewError::NoBranch { run: run.id.clone(), repo, branch: worktree.branch.clone() });
    };
    let prepared = if keep_commits {
        worktree::prepare_merge_commits(Path::new(&repo), &branch, worktree, &run.id, onto)?
    } else {
        worktree::prepare_squashed(Path::new(&repo), &branch, worktree, &run.id, &commit_message(&run), onto)?
    };
    Ok((run, prepared))
}

/// The message of the commit that brings run `run`'s work in (a merge, or
/// the commit a pull request pushes): its preset and the task's first line,
/// the whole task, and the run.
pub fn commit_message(run: &Run) -> String {
    // A task can hold escape sequences: never into a commit (a log, a
    // forge's page).
    let task: String = run.task.chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
    let task_line = task.lines().next().unwrap_or_default();
    format!("{}: {task_line}\n\n{task}\n\nCorral run {}", run.preset, run.id)
}

/// The pairs of runs `ids` whose unmerged work conflicts (git's
/// `merge-tree` of each pair). With no ids: every run the caller may see
/// with work not merged yet in a worktree of the repository holding `cwd`.
pub fn conflicts(
    store: &Store,
    ids: &[String],
    cwd: &Path,
) -> Result<(Vec<Run>, Vec<worktree::Conflict>), ReviewError> {
    let every = ids.is_empty();
    let runs: Vec<Run> = if every { conflicts_candidates(store, cwd)? } else { distinct_runs(store, ids)? };
    one_repository(&runs)?;
    let pairs: Vec<(String, Worktree)> =
        runs.iter().map(|r| Ok((r.id.clone(), worktree_of(r)?.clone()))).collect::<Result<_, WorktreeError>>()?;
    // Judged onto the branch they merge into, as the merge would.
    let onto = runs.first().and_then(|r| {
        let repo = r.worktree_repo.as_deref()?;
        worktree::branch_tip(Path::new(repo), r.worktree_from_branch.as_deref()?).ok()
    });
    let judged = worktree::conflicts(onto.as_deref(), &pairs)?;
    let runs = if every { runs.into_iter().filter(|r| judged.with_work.contains(&r.id)).collect() } else { runs };
    Ok((runs, judged.conflicts))
}

/// Refuses runs of different repositories, named together.
fn one_repository(runs: &[Run]) -> Result<(), ReviewError> {
    let Some(first) = runs.first() else { return Ok(()) };
    match runs.iter().find(|r| r.worktree_repo != first.worktree_repo) {
        None => Ok(()),
        Some(other) => Err(ReviewError::OtherRepositories {
            first: first.id.clone(),
            second: other.id.clone(),
            first_repo: first.worktree_repo.clone().unwrap_or_else(|| first.cwd.clone()),
            second_repo: other.worktree_repo.clone().unwrap_or_else(|| other.cwd.clone()),
        }),
    }
}

/// One file as several runs changed it: each run's diff of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileAcross {
    /// Its path in the repository.
    pub path: String,
    /// Each run that changed it, in the order given.
    pub runs: Vec<RunDiff>,
}

/// One run's diff of one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunDiff {
    /// The run.
    pub run: String,
    /// Its preset.
    pub preset: String,
    /// Its unified diff of the file.
    pub diff: String,
}

/// Runs `ids`' unmerged changes together: grouped by file, the files more
/// than one run changed first (then by path), each file's diff under the
/// run that made it.
pub fn diff_together(store: &Store, ids: &[String]) -> Result<Vec<FileAcross>, ReviewError> {
    let mut files: std::collections::BTreeMap<String, Vec<RunDiff>> = Default::default();
    let runs = distinct_runs(store, ids)?;
    one_repository(&runs)?;
    for run in runs {
        for (path, diff) in worktree::patch_by_file(worktree_of(&run)?)? {
            files.entry(path).or_default().push(RunDiff { run: run.id.clone(), preset: run.preset.clone(), diff });
        }
    }
    let mut files: Vec<FileAcross> = files.into_iter().map(|(path, runs)| FileAcross { path, runs }).collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.runs.len()));
    Ok(files)
}

/// The runs `ids` name (ids or prefixes), each once, in the order given.
fn distinct_runs(store: &Store, ids: &[String]) -> Result<Vec<Run>, ReviewError> {
    let mut runs: Vec<Run> = Vec::new();
    for id in ids {
        let run = store.find_run(id)?;
        if !runs.iter().any(|r| r.id == run.id) {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Every run with a worktree of the repository holding `cwd` that the
/// caller may see (an agent: its own tree), oldest first.
fn conflicts_candidates(store: &Store, cwd: &Path) -> Result<Vec<Run>, ReviewError> {
    let repo = worktree::plan(cwd, None)?.repo.to_string_lossy().into_owned();
    let filter = crate::store::RunFilter { include_dismissed: true, ..Default::default() };
    let mut runs: Vec<Run> = store
        .runs(&filter)?
        .into_iter()
        .filter(|r| r.worktree.is_some() && r.worktree_repo.as_deref() == Some(repo.as_str()))
        // A worktree removed by hand has no work to judge: it is left out,
        // not made every other run's failure.
        .filter(|r| r.worktree.as_ref().is_some_and(|w| Path::new(&w.path).is_dir()))
        .filter(|r| crate::run::scope::run_for(store, &r.id, crate::run::scope::Access::Read).is_ok())
        .collect();
    runs.reverse();
    Ok(runs)
}

/// Brings several runs' changes into the branch they started from, in the
/// order given, one commit each: refused before any is merged if two of
/// them change the same lines (that pair named), if they start from
/// different branches, or if one cannot be merged for its own reasons.
pub fn merge_together(store: &mut Store, ids: &[String], keep_commits: bool) -> Result<Vec<Merged>, ReviewError> {
    let runs = distinct_runs(store, ids)?;
    for run in &runs {
        let worktree = worktree_of(run)?;
        refuse_still_writing(run)?;
        refuse_carried(store, run, worktree)?;
        // Nothing to merge is said before anything is merged.
        if worktree::changes(worktree)?.files.is_empty() {
            return Err(WorktreeError::WouldConflict(format!(
                "run {} has nothing to merge (merged already, or it changed nothing); nothing was merged",
                run.id
            ))
            .into());
        }
    }
    let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
    let ids = ids.as_slice();
    if let Some(first) = runs.first() {
        for other in &runs[1..] {
            let apart =
                |why: &str| ReviewError::Apart { first: first.id.clone(), second: other.id.clone(), why: why.into() };
            if other.worktree_repo != first.worktree_repo {
                return Err(apart("another repository"));
            }
            if other.worktree_from_branch != first.worktree_from_branch {
                return Err(apart("another branch"));
            }
        }
    }
    let (_, found) = conflicts(store, ids, Path::new("/"))?;
    if let Some(pair) = found.into_iter().next() {
        return Err(ReviewError::RunsConflict(pair));
    }
    merge_in_order(store, &runs, keep_commits)
}

/// Merges `runs` (of one branch) in order as one step, all or nothing,
/// holding the repository's merge lock throughout: each merge is prepared
/// on the one before, so whatever cannot merge is refused before anything
/// of the user's moves, then all land at once (see `worktree::land`).
/// Journaled (`merge_sets`) from before the first is prepared until it is
/// recorded, so a process killed mid-way (a closed terminal, SIGKILL
/// during a slow hook) leaves the next heal to finish it (see
/// `merge_set`), never merges made and unrecorded.
fn merge_in_order(store: &mut Store, runs: &[Run], keep_commits: bool) -> Result<Vec<Merged>, ReviewError> {
    let Some(first) = runs.first() else { return Ok(Vec::new()) };
    if let Some(caller) =
        crate::run::caller::sandboxed_caller(store, &crate::home::config::Config::load(store.home())?)?
    {
        return Err(ReviewError::Sandboxed(caller));
    }
    let repo = first.worktree_repo.clone().unwrap_or_default();
    let repo = Path::new(&repo);
    // (A repository that cannot be read is said by the first merge.)
    let _lock = if repo.is_dir() { Some(worktree::MergeLock::take(repo)?) } else { None };
    let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
    let set = match (worktree::head_of(repo), &first.worktree_from_branch) {
        (Ok(before), Some(branch)) => Some(store.begin_merge_set(&crate::store::NewMergeSet {
            repo: &repo.to_string_lossy(),
            branch,
            before: &before,
            squashed: !keep_commits,
            runs: &ids,
        })?),
        _ => None,
    };
    let (mut made, mut steps): (Vec<Run>, Vec<worktree::Prepared>) = (Vec::new(), Vec::new());
    for run in runs {
        let onto = steps.last().map(|prepared| prepared.commit.clone());
        match prepare(store, &run.id, keep_commits, onto.as_deref()) {
            Ok((run, prepared)) => {
                // Journaled before anything of the user's moves: the
                // commit is the set's by its hash.
                if let Some(set) = set {
                    store.note_merge_commit(set, &run.id, &prepared.commit)?;
                }
                made.push(run);
                steps.push(prepared);
            }
            Err(e) => {
                close_merge_set(store, set, &[], keep_commits)?;
                if made.is_empty() {
                    return Err(e);
                }
                let before = made.iter().map(|r| r.id.clone()).collect();
                return Err(ReviewError::NotTogether { before, run: run.id.clone(), why: Box::new(e) });
            }
        }
    }
    if let Err(e) = worktree::land(repo, &steps) {
        close_merge_set(store, set, &[], keep_commits)?;
        return Err(e.into());
    }
    // The next merge, `diff` and `rm` start from what was merged.
    let all: Vec<(String, String)> = made.iter().zip(&steps).map(|(r, p)| (r.id.clone(), p.merged.clone())).collect();
    close_merge_set(store, set, &all, keep_commits)?;
    Ok(made
        .into_iter()
        .zip(steps)
        .map(|(run, p)| Merged { id: run.id, branch: run.worktree_from_branch.unwrap_or_default(), commit: p.commit })
        .collect())
}

/// Records `merged` (each run and its branch's commit that went in) and
/// leaves the journal, in one write.
fn close_merge_set(
    store: &mut Store,
    set: Option<i64>,
    merged: &[(String, String)],
    keep_commits: bool,
) -> Result<(), StoreError> {
    match set {
        Some(set) => store.end_merge_set(set, merged, !keep_commits),
        None => merged.iter().try_for_each(|(id, commit)| store.record_merge(id, commit, !keep_commits)),
    }
}

/// Runs run `id`'s preset's `teardown` (if it has one) before its worktree
/// goes: in a process of its own (`corral teardown ID`), which needs no
/// shepherd of the caller's. What went wrong, if anything: the worktree
/// goes all the same (it was asked for), and the transcript says why.
pub fn tear_down(store: &Store, id: &str) -> Option<String> {
    match store.run_preset(id) {
        Ok(preset) if !preset.teardown.is_empty() => {}
        _ => return None,
    }
    let program = match crate::upkeep::queue::ShepherdCommand::lightest() {
        Ok(command) => command.program,
        Err(e) => return Some(format!("cannot run the teardown of run {id}: {e}")),
    };
    let mut command = std::process::Command::new(program);
    command.args(["teardown", id]).stdin(std::process::Stdio::null());
    if let Some(home) = store.home().env_value() {
        command.env(crate::home::HOME_ENV, home);
    }
    match command.output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Some(format!("cannot run the teardown of run {id}: {e}")),
    }
}

/// Refuses a merge that would bring files carried in from the user's
/// checkout (see `worktree::carry`).
pub(crate) fn refuse_carried(store: &Store, run: &Run, worktree: &Worktree) -> Result<(), ReviewError> {
    let list = std::fs::read_to_string(worktree::carry::list_file(&store.home().run_dir(&run.id))).unwrap_or_default();
    if list.trim().is_empty() {
        return Ok(());
    }
    let changed: Vec<String> = worktree::changes(worktree)?.files.into_iter().map(|f| f.path).collect();
    let paths = worktree::carry::committed(&list, &changed);
    if paths.is_empty() {
        return Ok(());
    }
    Err(ReviewError::CarriedFiles { run: run.id.clone(), worktree: worktree.path.clone(), paths })
}

/// The run working in `worktree`'s folder, if one does (a child launched
/// in it, or a run relaunched there; through a link to it too): active,
/// or ended with processes of it still being stopped.
pub fn working_in(store: &Store, worktree: &Worktree) -> Result<Option<Run>, StoreError> {
    let folder = std::fs::canonicalize(&worktree.path).unwrap_or_else(|_| worktree.path.clone().into());
    let inside = |r: &Run| {
        let cwd = std::fs::canonicalize(&r.cwd).unwrap_or_else(|_| r.cwd.clone().into());
        cwd.starts_with(&folder) || Path::new(&r.cwd).starts_with(&worktree.path)
    };
    let mut working = store.active_runs()?;
    working.extend(store.unreaped_runs()?);
    Ok(working.into_iter().find(inside))
}

/// Refuses what would take run `run`'s work while it, or a process of it
/// still being stopped after its end, may write there.
pub(crate) fn refuse_still_writing(run: &Run) -> Result<(), WorktreeError> {
    if run.status.is_active() {
        return Err(WorktreeError::Active(run.id.clone()));
    }
    if run.exited_at.is_none() && run.started_at.is_some() {
        return Err(WorktreeError::WouldConflict(format!(
            "run {} has ended, but processes of it are still being stopped and may still write in its worktree; \
             nothing was changed. Try again once they are gone (`corral show {}` says `exited` then)",
            run.id, run.id
        )));
    }
    Ok(())
}

/// Run `run` once its last processes are gone, if it ended and they go
/// within its stop sequence's graces (and a second): `corral wait` returns
/// at a run's end, and a merge, a discard or a pull request typed right
/// after it waits the moment its processes take to go, told by the store,
/// rather than refuse.
pub(crate) fn once_exited(store: &Store, run: Run) -> Result<Run, ReviewError> {
    if run.status.is_active() || run.exited_at.is_some() || run.started_at.is_none() {
        return Ok(run);
    }
    let config = crate::home::config::Config::load(store.home())?;
    let deadline =
        std::time::Instant::now() + config.exit_grace + config.stop_grace + std::time::Duration::from_secs(1);
    let mut watcher = crate::watch::Watcher::new(store)?;
    loop {
        let now = store.run(&run.id)?;
        if now.exited_at.is_some() || !watcher.changed_before(store, Some(deadline))? {
            return Ok(store.run(&run.id)?);
        }
    }
}

/// Removes run `id`'s worktree and branch; refused while it, or any run
/// working in its worktree, is active.
pub fn discard(store: &mut Store, id: &str) -> Result<Run, ReviewError> {
    let run = once_exited(store, store.find_run(id)?)?;
    let worktree = recorded_worktree_of(&run)?;
    refuse_still_writing(&run)?;
    if let Some(other) = working_in(store, worktree)? {
        return Err(WorktreeError::InUse { run: other.id, path: worktree.path.clone() }.into());
    }
    if let Some(failed) = tear_down(store, &run.id) {
        tracing::warn!("{failed}");
    }
    let repo = Path::new(run.worktree_repo.as_deref().unwrap_or_default());
    worktree::remove(repo, worktree)?;
    store.mark_worktree_removed(&run.id)?;
    forget_merges_of_its_pull_request(store, repo, &run.id)?;
    Ok(store.run(&run.id)?)
}

/// Once no run of a pull request of several keeps a worktree, the merges
/// of their work kept for it (`refs/corral/together/RUN`) are let go:
/// nothing is left to push to it from here.
fn forget_merges_of_its_pull_request(store: &Store, repo: &Path, id: &str) -> Result<(), StoreError> {
    let Some(pr) = store.pull_request(id)?.filter(|pr| pr.together) else { return Ok(()) };
    let runs = store.runs_together(&pr.url)?;
    for other in &runs {
        if store.run(other).is_ok_and(|r| r.worktree.is_some()) {
            return Ok(());
        }
    }
    for other in &runs {
        // One that is not there is nothing to let go.
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["update-ref", "-d", &format!("refs/corral/together/{other}")])
            .output();
    }
    Ok(())
}
