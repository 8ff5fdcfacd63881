//! Running git for a worktree: an argv, never a shell line, with the
//! user's settings that would change what Corral reads or writes fixed for
//! every call (`diff.noprefix`, an external diff, `merge.autoStash`, …), and
//! objects Corral only reads written where they leave nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::WorktreeError;

/// Settings of the user's that change what a command of Corral's reads or
/// writes, set to git's defaults on every call. Textconv drivers and
/// external diffs are turned off by the commands that diff
/// (`--no-textconv --no-ext-diff`); hooks stay the repository's.
const NEUTRAL: [&str; 14] = [
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "merge.autoStash=false",
    "-c",
    "core.quotePath=false",
    "-c",
    "apply.whitespace=nowarn",
    "-c",
    "color.ui=false",
];

/// What git is asked to run with, besides its arguments.
#[derive(Default)]
pub(super) struct Env<'a> {
    pub vars: Vec<(&'static str, std::ffi::OsString)>,
    pub objects: Option<&'a ScratchObjects>,
}

impl<'a> Env<'a> {
    /// A private index file.
    pub fn index(path: &Path) -> Env<'a> {
        Env { vars: vec![("GIT_INDEX_FILE", path.into())], objects: None }
    }

    /// With objects written to `objects` instead of the repository.
    pub fn scratch(mut self, objects: &'a ScratchObjects) -> Env<'a> {
        self.objects = Some(objects);
        self
    }
}

/// Runs git with `args` in `dir`; its stdout on success.
pub(super) fn git(dir: &Path, args: &[&str], doing: &'static str) -> Result<String, WorktreeError> {
    git_in(dir, args, &Env::default(), doing)
}

/// Runs git with `args` in `dir` and `env`; its stdout on success.
pub(super) fn git_in(dir: &Path, args: &[&str], env: &Env<'_>, doing: &'static str) -> Result<String, WorktreeError> {
    let out = output(dir, args, env, doing)?;
    if !out.status.success() {
        return Err(WorktreeError::Git { doing, detail: stderr_of(&out) });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs git with `args` in `dir` and `env`, whatever it answers.
pub(super) fn output(dir: &Path, args: &[&str], env: &Env<'_>, doing: &'static str) -> Result<Output, WorktreeError> {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(NEUTRAL).args(args).env("GIT_TERMINAL_PROMPT", "0");
    for (key, value) in &env.vars {
        command.env(key, value);
    }
    if let Some(objects) = env.objects {
        command
            .env("GIT_OBJECT_DIRECTORY", objects.dir.path())
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects.repository);
    }
    command.output().map_err(|source| WorktreeError::NoGit { doing, source })
}

/// The last line git wrote to stderr (else to stdout): what it said.
pub(super) fn stderr_of(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let text = if text.trim().is_empty() { String::from_utf8_lossy(&out.stdout) } else { text };
    text.trim().lines().last().unwrap_or("").to_string()
}

/// All git wrote, trimmed (a hook's own words).
pub(super) fn said(out: &Output) -> String {
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.trim().is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(err.trim());
    }
    text
}

/// A folder of objects of Corral's own beside a repository's: what Corral
/// writes only to read (a snapshot to diff, a merge to try) goes here and
/// is gone with it, so nothing of a run is left in the user's `.git`. What
/// a merge keeps is copied into the repository ([`ScratchObjects::keep`]).
pub(super) struct ScratchObjects {
    dir: tempfile::TempDir,
    /// The repository's own object folder, read through.
    repository: PathBuf,
}

impl ScratchObjects {
    /// Scratch objects for the repository of `dir` (a worktree or its
    /// repository: they share one object folder).
    pub fn for_repository(dir: &Path) -> Result<ScratchObjects, WorktreeError> {
        let common = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"], "finding the repository")?;
        let repository = PathBuf::from(common.trim()).join("objects");
        let dir = tempfile::Builder::new()
            .prefix("corral-objects-")
            .tempdir()
            .map_err(|e| WorktreeError::Git { doing: "making a scratch object folder", detail: e.to_string() })?;
        Ok(ScratchObjects { dir, repository })
    }

    /// Copies every object written here into the repository, for a merge
    /// that is made (objects are files named by their content: one that is
    /// there already is the same).
    pub fn keep(&self) -> Result<(), WorktreeError> {
        let fail =
            |e: std::io::Error| WorktreeError::Git { doing: "writing the merge's objects", detail: e.to_string() };
        for fan in std::fs::read_dir(self.dir.path()).map_err(fail)?.flatten() {
            if !fan.file_type().map_err(fail)?.is_dir() {
                continue;
            }
            let into = self.repository.join(fan.file_name());
            std::fs::create_dir_all(&into).map_err(fail)?;
            for object in std::fs::read_dir(fan.path()).map_err(fail)?.flatten() {
                let target = into.join(object.file_name());
                if target.exists() {
                    continue;
                }
                // A hard link where the folders share a disk, else a copy.
                if std::fs::hard_link(object.path(), &target).is_err() {
                    let temporary = into.join(format!(".corral-{}", std::process::id()));
                    std::fs::copy(object.path(), &temporary).map_err(fail)?;
                    std::fs::rename(&temporary, &target).map_err(fail)?;
                }
            }
        }
        Ok(())
    }
}

/// A private temporary file holding `bytes`.
pub(super) fn temp_file_with(bytes: &[u8], doing: &'static str) -> Result<tempfile::NamedTempFile, WorktreeError> {
    tempfile::NamedTempFile::new()
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes).map(|()| f))
        .map_err(|e| WorktreeError::Git { doing, detail: e.to_string() })
}

/// The git arguments that make a commit in `dir` as the user if git knows
/// who that is, else as Corral.
pub(super) fn committer(dir: &Path) -> Result<&'static [&'static str], WorktreeError> {
    let known = output(dir, &["config", "user.email"], &Env::default(), "reading the committer")?.status.success();
    Ok(if known { &[] } else { &["-c", "user.name=Corral", "-c", "user.email=corral@localhost"] })
}
