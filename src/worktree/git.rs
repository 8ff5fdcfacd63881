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
/// `core.fsmonitor` is off too: it names a program git runs, and a run's
/// worktree is the agent's.
const NEUTRAL: [&str; 16] = [
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
    "-c",
    "core.fsmonitor=false",
];

/// What git is asked to run with, besides its arguments.
#[derive(Default)]
pub(super) struct Env<'a> {
    pub vars: Vec<(&'static str, std::ffi::OsString)>,
    pub objects: Option<&'a ScratchObjects>,
    /// Other worktrees' scratch objects read through too (several runs'
    /// work judged together).
    pub others: Vec<&'a ScratchObjects>,
}

impl<'a> Env<'a> {
    /// A private index file.
    pub fn index(path: &Path) -> Env<'a> {
        Env { vars: vec![("GIT_INDEX_FILE", path.into())], objects: None, others: Vec::new() }
    }

    /// With objects written to `objects` instead of the repository.
    pub fn scratch(mut self, objects: &'a ScratchObjects) -> Env<'a> {
        self.objects = Some(objects);
        self
    }
}

/// `git commit-tree` with a fixed identity, for scratch commits Corral
/// makes to try merges and never keeps.
pub(super) const SCRATCH_COMMIT: [&str; 5] =
    ["-c", "user.name=Corral", "-c", "user.email=corral@localhost", "commit-tree"];

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
    let linked = linked_worktree(dir).map_err(|detail| WorktreeError::Git { doing, detail })?;
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).args(NEUTRAL);
    // In a run's worktree (one with an object store of Corral's) the files
    // are the agent's: a relative `core.hooksPath` (husky's `.husky`)
    // would run what it wrote. No hook runs there; the user's hooks judge
    // a merge in the user's checkout.
    if linked.as_ref().is_some_and(|l| super::agent_objects(&l.own).is_dir()) {
        command.args(["-c", "core.hooksPath=/dev/null"]);
    }
    command.args(args).env("GIT_TERMINAL_PROMPT", "0");
    for (key, value) in &env.vars {
        command.env(key, value);
    }
    if let Some(linked) = &linked {
        // The folders as checked, not as a file in the worktree says.
        command.env("GIT_DIR", &linked.own).env("GIT_COMMON_DIR", &linked.common).env("GIT_WORK_TREE", dir);
    }
    if let Some(objects) = env.objects {
        let mut alternates = std::ffi::OsString::from(&objects.repository);
        for other in &env.others {
            alternates.push(":");
            alternates.push(&other.dir);
        }
        command.env("GIT_OBJECT_DIRECTORY", &objects.dir).env("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates);
    } else if let Some(linked) = &linked {
        // What a sandboxed agent committed is in the worktree's own store.
        command.env("GIT_ALTERNATE_OBJECT_DIRECTORIES", super::agent_objects(&linked.own));
    }
    // A git left running after Corral died (a merge whose process was
    // killed during a hook) would finish a merge no journal knows of:
    // it ends with its caller (SIGTERM: git takes its locks away).
    crate::process::die_with_parent(&mut command);
    command.output().map_err(|source| WorktreeError::NoGit { doing, source })
}

/// The links in `dir` and its folders, `depth` deep, but for the object
/// store of its own (whose objects are checked one by one when kept).
fn links_in(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_symlink() => found.push(path),
            Ok(kind) if kind.is_dir() && depth > 1 && entry.file_name() != "corral-objects" => {
                found.extend(links_in(&path, depth - 1))
            }
            _ => {}
        }
    }
    found
}

/// A linked worktree's administrative folders, checked.
struct Linked {
    /// `<repo>/.git/worktrees/<name>`.
    own: PathBuf,
    /// `<repo>/.git`.
    common: PathBuf,
}

/// The folders of the linked worktree at `dir` (`None`: `dir` is none),
/// refused unless they point at each other as `git worktree add` made
/// them: its `.git` file names `<common>/worktrees/<name>`, whose `gitdir`
/// names that `.git` file back and whose `commondir` is `<common>`, a
/// repository outside the worktree. An agent that rewrote one of them to
/// a repository of its own (its config naming programs git runs) would
/// have Corral's git run them as the user.
fn linked_worktree(dir: &Path) -> Result<Option<Linked>, String> {
    let dot_git = dir.join(".git");
    if !dot_git.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let refused = |what: &str| {
        format!(
            "the worktree {} does not point at its repository as git made it ({what}): something in it rewrote git's own files, so Corral runs no git there. Remove the worktree (`git worktree prune` in your repository)",
            dir.display()
        )
    };
    // Written by the agent, maybe: no link, no FIFO, a few KiB.
    let read = |path: &Path| crate::process::read_regular(path, 64 << 10).map(|t| t.trim().to_string()).ok();
    let named = read(&dot_git).ok_or_else(|| refused("its .git file cannot be read"))?;
    let named = named.strip_prefix("gitdir:").ok_or_else(|| refused("its .git file names no folder"))?.trim();
    let own = std::fs::canonicalize(dir.join(named)).map_err(|_| refused("its .git file names no folder"))?;
    let worktrees = own.parent().filter(|p| p.file_name().is_some_and(|n| n == "worktrees"));
    let common =
        worktrees.and_then(Path::parent).ok_or_else(|| refused("its .git file names no worktree of a repository"))?;
    let back = read(&own.join("gitdir")).map(|g| std::fs::canonicalize(own.join(g)));
    let here = std::fs::canonicalize(&dot_git).map_err(|_| refused("its .git file cannot be read"))?;
    if !matches!(back, Some(Ok(back)) if back == here) {
        return Err(refused("the repository does not name it back"));
    }
    let shared = read(&own.join("commondir")).map(|c| std::fs::canonicalize(own.join(c)));
    if !matches!(shared, Some(Ok(shared)) if shared == common) {
        return Err(refused("its commondir names another repository"));
    }
    let top = std::fs::canonicalize(dir).map_err(|_| refused("it cannot be read"))?;
    if common.starts_with(&top) {
        return Err(refused("its repository lies inside it"));
    }
    // What git writes through (a reflog, the index, a branch of Corral's
    // runs) is never a link an agent made to a file of the user's.
    let corral_refs = [common.join("refs/heads/corral"), common.join("logs/refs/heads/corral")];
    if let Some(link) = links_in(&own, 4).into_iter().chain(corral_refs.iter().flat_map(|d| links_in(d, 2))).next() {
        return Err(refused(&format!("{} is a link", link.display())));
    }
    Ok(Some(Linked { common: common.to_path_buf(), own }))
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
        let wanted: Vec<&str> = listed
            .lines()
            .map(str::trim)
            .filter(|id| id.len() > 2)
            .filter(|id| {
                let (fan, rest) = id.split_at(2);
                self.dir.join(fan).join(rest).exists() && !self.repository.join(fan).join(rest).exists()
            })
            .collect();
        // Written by an agent, maybe, and still writable by it: each is
        // copied (no link, no FIFO) into a folder of the repository's that
        // no sandbox writes, checked there, and only then put in place. A
        // link would let the agent rewrite a merged object in place later.
        let staging = self.repository.join(format!("corral-incoming-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        let copied = (|| -> Result<(), WorktreeError> {
            for id in &wanted {
                let (fan, rest) = id.split_at(2);
                let mut source = crate::process::open_regular(&self.dir.join(fan).join(rest)).map_err(fail)?;
                std::fs::create_dir_all(staging.join(fan)).map_err(fail)?;
                let mut copy = std::fs::File::create(staging.join(fan).join(rest)).map_err(fail)?;
                std::io::copy(&mut source, &mut copy).map_err(fail)?;
            }
            self.check(&staging, &wanted)?;
            for id in &wanted {
                let (fan, rest) = id.split_at(2);
                std::fs::create_dir_all(self.repository.join(fan)).map_err(fail)?;
                std::fs::rename(staging.join(fan).join(rest), self.repository.join(fan).join(rest)).map_err(fail)?;
            }
            Ok(())
        })();
        let _ = std::fs::remove_dir_all(&staging);
        copied
    }
}

impl ScratchObjects {
    /// Refuses unless each object `ids` names, as stored here, is the
    /// content its id is the hash of.
    fn check(&self, dir: &Path, ids: &[&str]) -> Result<(), WorktreeError> {
        use std::io::{BufRead, Read, Write};
        if ids.is_empty() {
            return Ok(());
        }
        let fail = |detail: String| WorktreeError::Git { doing: "checking the run's objects", detail };
        let mut cat = Command::new("git")
            .args(["cat-file", "--batch"])
            .current_dir(dir)
            .env("GIT_DIR", self.repository.parent().unwrap_or(dir))
            .env("GIT_OBJECT_DIRECTORY", dir)
            .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|source| WorktreeError::NoGit { doing: "checking the run's objects", source })?;
        let mut stdin = cat.stdin.take().expect("piped");
        let list: String = ids.iter().map(|id| format!("{id}\n")).collect();
        let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
        let mut out = std::io::BufReader::new(cat.stdout.take().expect("piped"));
        let mut result = Ok(());
        for id in ids {
            let mut header = String::new();
            out.read_line(&mut header).map_err(|e| fail(e.to_string()))?;
            let mut words = header.split_whitespace();
            let (Some(_), Some(kind), Some(size)) = (words.next(), words.next(), words.next()) else {
                result = Err(fail(format!("object {id} cannot be read")));
                break;
            };
            let size: usize = size.parse().map_err(|_| fail(format!("object {id} cannot be read")))?;
            let mut content = vec![0; size + 1];
            out.read_exact(&mut content).map_err(|e| fail(e.to_string()))?;
            content.truncate(size);
            if object_id(kind, &content, id.len()) != *id {
                result = Err(fail(format!(
                    "object {id} is not what its name says: the run's worktree was tampered with, so nothing is \
                     merged. Review its files by hand"
                )));
                break;
            }
        }
        drop(out);
        let _ = cat.kill();
        let _ = cat.wait();
        let _ = writer.join();
        result
    }
}

/// The id git gives an object of `kind` with `content`: SHA-1, or SHA-256
/// in a repository of 64-digit ids.
fn object_id(kind: &str, content: &[u8], digits: usize) -> String {
    let header = format!("{kind} {}\0", content.len());
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    if digits == 64 {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(header.as_bytes());
        hash.update(content);
        return hex(&hash.finalize());
    }
    let mut hash = sha1_smol::Sha1::new();
    hash.update(header.as_bytes());
    hash.update(content);
    hash.digest().to_string()
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

/// The commit `repo`'s HEAD is on: where merges made together start.
pub fn head_of(repo: &Path) -> Result<String, WorktreeError> {
    Ok(git(repo, &["rev-parse", "--verify", "HEAD"], "reading your branch")?.trim().to_string())
}
