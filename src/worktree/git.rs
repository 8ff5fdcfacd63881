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
        command.env("GIT_OBJECT_DIRECTORY", &objects.dir).env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &objects.repository);
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
/// writes only to read (a snapshot to diff, a merge to try) goes into the
/// worktree's own administrative folder (`.git/worktrees/<id>/corral-objects`),
/// never into the repository's objects, and is gone with the worktree; a
/// later diff finds what an earlier one wrote. What a merge keeps is
/// copied into the repository ([`ScratchObjects::keep`]).
pub(super) struct ScratchObjects {
    dir: PathBuf,
    /// The repository's own object folder, read through.
    repository: PathBuf,
}

impl ScratchObjects {
    /// The scratch objects of the worktree at `worktree`.
    pub fn for_worktree(worktree: &Path) -> Result<ScratchObjects, WorktreeError> {
        let ask = |what: &str| {
            git(worktree, &["rev-parse", "--path-format=absolute", what], "finding the repository")
                .map(|p| PathBuf::from(p.trim()))
        };
        let repository = ask("--git-common-dir")?.join("objects");
        let dir = ask("--git-dir")?.join("corral-objects");
        std::fs::create_dir_all(&dir)
            .map_err(|e| WorktreeError::Git { doing: "making a scratch object folder", detail: e.to_string() })?;
        Ok(ScratchObjects { dir, repository })
    }

    /// Copies into the repository the objects written here that `roots`
    /// (trees) reach and its HEAD does not: what a merge that is made
    /// needs, and nothing else (objects are files named by their content:
    /// one that is there already is the same).
    pub fn keep(&self, repo: &Path, roots: &[&str]) -> Result<(), WorktreeError> {
        let fail =
            |e: std::io::Error| WorktreeError::Git { doing: "writing the merge's objects", detail: e.to_string() };
        let mut args = vec!["rev-list", "--objects", "--no-object-names"];
        args.extend(roots);
        args.extend(["--not", "HEAD"]);
        let listed = git_in(repo, &args, &Env::default().scratch(self), "listing the merge's objects")?;
        for id in listed.lines().map(str::trim).filter(|l| l.len() > 2) {
            let (fan, rest) = id.split_at(2);
            let source = self.dir.join(fan).join(rest);
            let target = self.repository.join(fan).join(rest);
            if !source.exists() || target.exists() {
                continue;
            }
            std::fs::create_dir_all(self.repository.join(fan)).map_err(fail)?;
            // A hard link where the folders share a disk, else a copy.
            if std::fs::hard_link(&source, &target).is_err() {
                let temporary = self.repository.join(fan).join(format!(".corral-{}", std::process::id()));
                std::fs::copy(&source, &temporary).map_err(fail)?;
                std::fs::rename(&temporary, &target).map_err(fail)?;
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
