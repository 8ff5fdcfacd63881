//! Git's metadata inside a sandbox: read-only wherever the sandbox writes,
//! but for a run's own worktree, index and branch; the objects an agent
//! makes kept in the worktree's own store; and which git folders a run's
//! sandbox held, so a run launched from inside gets a worktree only of
//! one of them. Its own room: one rule of the sandbox, with its reasons.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::args::{Args, RunView};

/// Whether `path` (as on disk) lies inside a repository's git folder: a
/// `.git` folder, or a bare repository's (a folder holding `HEAD`,
/// `objects` and `refs`).
pub fn inside_git(path: &Path) -> bool {
    path.ancestors().any(|dir| {
        dir.file_name().is_some_and(|n| n == ".git")
            || (dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir())
    })
}

/// The variables of a sandboxed process's git: the objects it writes go
/// to its worktree's own store, the repository's read through (see
/// [`protect_git`]). Empty for a run without a worktree.
pub fn git_env(view: &RunView<'_>) -> Vec<(OsString, OsString)> {
    let Some(own) = view.worktree.and_then(own_git_dir) else { return Vec::new() };
    let Some(common) = common_of(&own) else { return Vec::new() };
    vec![
        ("GIT_OBJECT_DIRECTORY".into(), crate::worktree::agent_objects(&own).into()),
        ("GIT_ALTERNATE_OBJECT_DIRECTORIES".into(), common.join("objects").into()),
    ]
}

/// The repository whose `.git` (a folder, or a linked worktree's file)
/// holds `place`: the nearest `.git` at or above it.
fn dot_git_of(place: &Path) -> Option<PathBuf> {
    place.ancestors().map(|dir| dir.join(".git")).find(|git| git.symlink_metadata().is_ok())
}

/// The administrative folder a linked worktree's `.git` file names.
fn own_git_dir(worktree: &Path) -> Option<PathBuf> {
    let text = crate::process::read_regular(&worktree.join(".git"), 64 << 10).ok()?;
    let dir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    std::fs::canonicalize(dir).ok()
}

/// The repository's `.git` a linked worktree's administrative folder
/// belongs to: `<repo>/.git/worktrees/<name>`.
fn common_of(own: &Path) -> Option<PathBuf> {
    let worktrees = own.parent()?;
    (worktrees.file_name()? == "worktrees").then(|| worktrees.parent().map(Path::to_path_buf)).flatten()
}

/// Git's metadata, read-only wherever the sandbox writes: code the user's
/// next `git` runs (hooks, config, a `commondir` or `.git` file pointing at
/// a repository the agent made), other branches and existing objects are
/// not the agent's to change. A run's own worktree writes its index, its
/// HEAD and its branch; the objects it makes go to its own store (see
/// [`git_env`]), which Corral copies into the repository, checked, when it
/// merges.
///
/// Returns the git folders held read-only: a run launched from inside
/// this sandbox gets a worktree only of a repository among them, or of one
/// this sandbox cannot write ([`held_by`]).
pub(super) fn protect_git(args: &mut Args, view: &RunView<'_>, written: &[PathBuf]) -> Vec<PathBuf> {
    // Every repository (or `.git` file) a written place is in or holds at
    // its top: read-only.
    let mut dots: Vec<PathBuf> = written.iter().filter_map(|p| dot_git_of(p)).collect();
    dots.sort();
    dots.dedup();
    let mut held = Vec::new();
    for dot in dots.iter().filter(|d| written.iter().any(|w| d.starts_with(w) || w.starts_with(d))) {
        args.bind("--ro-bind", dot);
        held.push(dot.clone());
    }
    let Some(worktree) = view.worktree else { return held };
    let Some(own) = own_git_dir(worktree) else { return held };
    let Some(common) = common_of(&own) else { return held };
    args.bind("--ro-bind", &worktree.join(".git"));
    args.bind("--ro-bind", &common);
    held.push(common.clone());
    // Its own folder: its index, HEAD, logs and object store; what points
    // elsewhere (`commondir`, `gitdir`) and settings (`config.worktree`,
    // which git reads where `extensions.worktreeConfig` is on) stay as
    // Corral made them.
    let _ = std::fs::create_dir_all(crate::worktree::agent_objects(&own));
    // Settings git reads there once `extensions.worktreeConfig` is on (a
    // sparse checkout sets it): made empty now, so they are held read-only
    // rather than left for the agent to make.
    let settings = own.join("config.worktree");
    if settings.symlink_metadata().is_err() {
        let _ = std::fs::File::create(&settings);
    }
    args.bind("--bind", &own);
    for file in ["commondir", "gitdir", "config.worktree", "hooks", crate::worktree::carry::IN_GIT_FOLDER] {
        args.bind("--ro-bind-try", &own.join(file));
    }
    // Its branch: the folder its ref is written in (a lock file, then a
    // rename), every other ref there held as it is.
    let Some(branch) = view.branch else { return held };
    for base in ["refs/heads", "logs/refs/heads"] {
        let own_ref = common.join(base).join(branch);
        let Some(folder) = own_ref.parent() else { continue };
        // A branch packed away (`git gc`) has no folder of loose refs: it
        // gets one, for its next commit's.
        if std::fs::create_dir_all(folder).is_err() {
            continue;
        }
        args.bind("--bind", folder);
        for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
            if entry.path() != own_ref {
                args.bind("--ro-bind", &entry.path());
            }
        }
    }
    held
}

/// The file in a run's folder naming the git folders its sandbox holds
/// read-only this turn, by device and inode (a name can be replaced).
fn held_file(run_dir: &Path) -> PathBuf {
    run_dir.join("git-held")
}

pub(super) fn write_held(run_dir: &Path, held: &[PathBuf]) -> std::io::Result<()> {
    let lines: String = held.iter().filter_map(|dir| identity(dir)).map(|id| format!("{id}\n")).collect();
    std::fs::write(held_file(run_dir), lines)
}

/// A folder's identity: device, inode and, where the file system keeps
/// it, birth time. (A held folder is a read-only mount in the sandbox, so
/// the agent cannot remove it to free its inode number; the birth time
/// is one more guard.)
fn identity(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).ok()?;
    let born = meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    Some(format!("{} {} {}", meta.dev(), meta.ino(), born.map_or(0, |b| b.as_nanos())))
}

/// Whether git folder `dir` is one run (folder `run_dir`)'s sandbox held
/// read-only at its turn's start, as the folder is now.
pub fn held_by(run_dir: &Path, dir: &Path) -> bool {
    let Some(wanted) = identity(dir) else { return false };
    let held = std::fs::read_to_string(held_file(run_dir)).unwrap_or_default();
    held.lines().any(|line| line == wanted)
}
