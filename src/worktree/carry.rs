//! Carrying the checkout's ignored files into a run's worktree: a
//! worktree has only what git tracks, so `.env`, `node_modules/` and
//! `target/` are missing there (`DATABASE_URL is not defined`, a rebuild
//! from nothing). The files that git ignores in the user's checkout and
//! that match `.worktreeinclude` at its root (gitignore syntax, the
//! convention Claude Code, Codex and Conductor follow) or a preset's
//! `worktree_include:` are carried in before `setup`.
//!
//! What is carried is the checkout's own: regular files (cloned with
//! `FICLONE` where the file system shares blocks, copied otherwise),
//! folders, and links that stay inside the checkout. Never a link out of
//! it, never through a link in the worktree, never over a file the
//! worktree already has (a tracked file of its branch).

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use super::git::{git, output, Env};
use super::WorktreeError;

/// The file at a checkout's root naming what to carry.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// What was carried into a worktree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// What matched, as git names it (`.env`, `node_modules/`).
    pub entries: Vec<String>,
    /// Regular files carried.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files cloned (sharing blocks) rather than copied.
    pub cloned: u64,
    /// What was left behind, and why.
    pub skipped: Vec<(String, &'static str)>,
    /// How long it took.
    pub took: Duration,
}

impl Carried {
    /// "carried in: .env, node_modules/ (reflinked, 1.2 GB in 0.3 s)",
    /// and what was left behind.
    pub fn words(&self) -> String {
        let how = match (self.cloned, self.files) {
            (_, 0) => "nothing to copy",
            (c, f) if c == f => "reflinked",
            (0, _) => "copied",
            _ => "partly reflinked, partly copied",
        };
        let mut names: Vec<&str> = self.entries.iter().map(String::as_str).take(8).collect();
        let more = self.entries.len().saturating_sub(names.len());
        let more_words = format!("and {more} more");
        if more > 0 {
            names.push(&more_words);
        }
        let mut words = format!(
            "carried in: {} ({how}, {} files, {} in {:.2} s)",
            names.join(", "),
            self.files,
            crate::cost::resources::human_bytes(self.bytes),
            self.took.as_secs_f64()
        );
        for (path, why) in self.skipped.iter().take(8) {
            words.push_str(&format!("; not carried: {path} ({why})"));
        }
        if self.skipped.len() > 8 {
            words.push_str(&format!("; {} more not carried", self.skipped.len() - 8));
        }
        words
    }

    /// The carried paths' top entries, one per line: what a merge refuses
    /// (see `carried_in_merge`).
    pub fn list(&self) -> String {
        self.entries.iter().map(|e| format!("{e}\n")).collect()
    }
}

/// The patterns of `checkout`'s `.worktreeinclude` and `extra` (a
/// preset's), blank lines and comments aside.
fn patterns(checkout: &Path, extra: &[String]) -> Vec<String> {
    let file = fs::read_to_string(checkout.join(INCLUDE_FILE)).unwrap_or_default();
    file.lines()
        .chain(extra.iter().map(String::as_str))
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Carries into `worktree` what git ignores in `checkout` and the
/// patterns name, and only what `readable` says the run may read (its
/// sandbox's rules, as `checkout`'s paths); `None` when there are no
/// patterns.
pub fn carry(
    checkout: &Path,
    worktree: &Path,
    extra: &[String],
    readable: &dyn Fn(&Path) -> bool,
) -> Result<Option<Carried>, WorktreeError> {
    let patterns = patterns(checkout, extra);
    if patterns.is_empty() {
        return Ok(None);
    }
    // Every entry is opened beneath this folder, never through a link: a
    // sandboxed run writing the checkout cannot swap a folder for a link
    // to `~/.ssh` while it is carried.
    let root = File::open(checkout).map_err(|e| WorktreeError::Carry { entry: ".".into(), source: e })?;
    let from = Source { root: &root, checkout, readable };
    let started = Instant::now();
    let mut carried = Carried::default();
    // What this carry made, taken out again if a later entry fails: a
    // half-carried worktree (a disk filled by a copy) helps no one.
    let mut made: Vec<PathBuf> = Vec::new();
    let failed = |entry: &str, e: io::Error, made: &[PathBuf]| {
        for path in made {
            let _ = fs::remove_dir_all(path).or_else(|_| fs::remove_file(path));
        }
        WorktreeError::Carry { entry: entry.to_string(), source: e }
    };
    for entry in matching_ignored(checkout, &patterns)? {
        let relative = Path::new(entry.trim_end_matches('/'));
        if !is_plain(relative) {
            carried.skipped.push((entry.clone(), "not a path inside the checkout"));
            continue;
        }
        let target = worktree.join(relative);
        if let Some(why) = unsafe_destination(worktree, relative) {
            carried.skipped.push((entry.clone(), why));
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| failed(&entry, e, &made))?;
        }
        made.push(target.clone());
        from.carry(relative, &target, &mut carried).map_err(|e| failed(&entry, e, &made))?;
        carried.entries.push(entry);
    }
    carried.took = started.elapsed();
    Ok(Some(carried))
}

/// What in `checkout` is untracked, matches `patterns`, and is ignored by
/// the checkout's own rules: whole folders as `dir/`.
fn matching_ignored(checkout: &Path, patterns: &[String]) -> Result<Vec<String>, WorktreeError> {
    let excludes: Vec<String> = patterns.iter().map(|p| format!("--exclude={p}")).collect();
    let mut args = vec!["ls-files", "-z", "--others", "--ignored", "--directory", "--no-empty-directory"];
    args.extend(excludes.iter().map(String::as_str));
    let listed = git(checkout, &args, "listing the files .worktreeinclude names")?;
    let candidates: Vec<&str> = listed.split('\0').filter(|p| !p.is_empty()).collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    // Of those, what the checkout's own rules ignore: untracked work that
    // is not ignored is the user's, not the run's to copy.
    let mut args = vec!["check-ignore"];
    args.extend(candidates.iter().copied());
    let out = output(checkout, &args, &Env::default(), "checking what git ignores")?;
    // check-ignore answers 1 when nothing is ignored: not a failure.
    if !out.status.success() && out.status.code() != Some(1) {
        return Err(WorktreeError::Git {
            doing: "checking what git ignores",
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let ignored: std::collections::HashSet<&str> =
        std::str::from_utf8(&out.stdout).unwrap_or_default().lines().map(|l| l.trim_end_matches('/')).collect();
    Ok(candidates.into_iter().filter(|c| ignored.contains(c.trim_end_matches('/'))).map(str::to_string).collect())
}

/// True for a relative path of plain names (no `..`, no root).
fn is_plain(path: &Path) -> bool {
    path.components().all(|c| matches!(c, Component::Normal(_))) && path.components().next().is_some()
}

/// Why writing `relative` in `worktree` would be unsafe: a folder on the
/// way is a link (it may lead out of the worktree), or it is there already.
fn unsafe_destination(worktree: &Path, relative: &Path) -> Option<&'static str> {
    let mut at = worktree.to_path_buf();
    for part in relative.components() {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => return Some("a link on its way in the worktree"),
            Ok(_) if at.as_path() == worktree.join(relative) => return Some("the worktree has it already"),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Where carried files are read from: the checkout, open, and what of it
/// the run may read.
struct Source<'a> {
    root: &'a File,
    checkout: &'a Path,
    readable: &'a dyn Fn(&Path) -> bool,
}

impl Source<'_> {
    /// Carries `relative` (a file, folder or link in the checkout) to `to`.
    fn carry(&self, relative: &Path, to: &Path, carried: &mut Carried) -> io::Result<()> {
        let from = self.checkout.join(relative);
        let shown = || relative.display().to_string();
        if !(self.readable)(&from) && !from.is_dir() {
            carried.skipped.push((shown(), "the run's sandbox may not read it"));
            return Ok(());
        }
        let file = match crate::process::open_beneath(self.root, relative) {
            Ok(file) => file,
            // A link, at the end or on the way: carried as a link only if
            // it is the entry itself, relative and staying in the checkout
            // (an absolute one would lead the agent back into your files).
            Err(e) if crate::process::is_a_link(&e) => {
                let target = fs::read_link(&from).ok().filter(|t| t.is_relative());
                let inside = fs::canonicalize(&from)
                    .is_ok_and(|real| real.starts_with(fs::canonicalize(self.checkout).unwrap_or_default()));
                match target.filter(|_| inside) {
                    Some(target) => symlink(&target, to)?,
                    None => carried.skipped.push((shown(), "a link out of the checkout")),
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if meta.is_dir() {
            fs::create_dir(to)?;
            for name in crate::process::names_in(&file)? {
                self.carry(&relative.join(&name), &to.join(&name), carried)?;
            }
            // Its mode once it is filled (a read-only folder takes its
            // files first); never set-id or sticky.
            fs::set_permissions(to, fs::Permissions::from_mode(meta.permissions().mode() & 0o777))?;
        } else if meta.is_file() {
            // A copy is never set-uid or set-gid.
            if clone_or_copy(&file, to, meta.permissions().mode() & 0o777)? {
                carried.cloned += 1;
            }
            carried.files += 1;
            carried.bytes += meta.len();
        } else {
            carried.skipped.push((shown(), "not a regular file"));
        }
        Ok(())
    }
}

/// Clones `source` to a new file `to` (sharing blocks: `FICLONE`), or copies
/// it where the file system cannot; true if cloned.
fn clone_or_copy(source: &File, to: &Path, mode: u32) -> io::Result<bool> {
    let mut target = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(to)?;
    // SAFETY: both descriptors are open for the duration of the call.
    let cloned = unsafe { libc::ioctl(target.as_raw_fd(), libc::FICLONE, source.as_raw_fd()) } == 0;
    if !cloned {
        copy_data(source, &mut target)?;
    }
    Ok(cloned)
}

/// Copies the data of `source` into the empty `target`, its holes kept as
/// holes (a sparse 2 GB file stays a few blocks), refusing a copy that
/// would leave the file system with less than [`ROOM_KEPT`] free.
fn copy_data(source: &File, target: &mut File) -> io::Result<()> {
    use nix::unistd::{lseek, Whence};
    use std::io::{Read, Seek, SeekFrom};
    let len = source.metadata()?.len();
    let stored = std::os::unix::fs::MetadataExt::blocks(&source.metadata()?) * 512;
    let free = nix::sys::statvfs::fstatvfs(&*target).map_err(io::Error::from)?;
    let (free, size) = (free.blocks_available() * free.fragment_size(), free.blocks() * free.fragment_size());
    let keep = ROOM_KEPT.min(size / 20);
    if stored.min(len) + keep > free {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!("copying it ({} MiB) would leave its disk with less than {} MiB free", len >> 20, keep >> 20),
        ));
    }
    let mut at: u64 = 0;
    while at < len {
        // The next stretch of data, and the hole after it; a file system
        // without SEEK_DATA says all of it is data.
        let data = match lseek(source, at as i64, Whence::SeekData) {
            Ok(data) => data as u64,
            Err(nix::errno::Errno::ENXIO) => break,
            Err(_) => at,
        };
        let hole = lseek(source, data as i64, Whence::SeekHole).map(|h| h as u64).unwrap_or(len);
        let mut from = source;
        from.seek(SeekFrom::Start(data))?;
        target.seek(SeekFrom::Start(data))?;
        io::copy(&mut from.take(hole - data), target)?;
        at = hole.max(data + 1);
    }
    target.set_len(len)
}

/// The room a copy leaves on its file system: 1 GiB, or a twentieth of a
/// smaller one (the store, and the runs' transcripts, live there too).
const ROOM_KEPT: u64 = 1 << 30;

/// The paths of `changed` (what a merge would bring) that are under an
/// entry of `list` (what was carried in): the agent committed them.
pub fn committed(list: &str, changed: &[String]) -> Vec<String> {
    let carried: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    changed
        .iter()
        .filter(|path| {
            carried.iter().any(|c| {
                let c = c.trim_end_matches('/');
                path.as_str() == c || path.starts_with(&format!("{c}/"))
            })
        })
        .cloned()
        .collect()
}

/// The file in a worktree's own git folder listing what was carried in:
/// what Corral's snapshot of the worktree leaves out (its `diff`, `merge`
/// and `rm` never take a carried `.env` for the run's work). Corral's, and
/// read-only inside the run's sandbox.
pub const IN_GIT_FOLDER: &str = "corral-carried";

/// Keeps `carried`'s list in the worktree's own git folder (see
/// [`IN_GIT_FOLDER`]).
pub fn keep_list(worktree: &Path, carried: &Carried) -> Result<(), WorktreeError> {
    let own = git(worktree, &["rev-parse", "--absolute-git-dir"], "finding the worktree's git folder")?;
    let path = Path::new(own.trim()).join(IN_GIT_FOLDER);
    fs::write(&path, carried.list()).map_err(|e| WorktreeError::Carry { entry: IN_GIT_FOLDER.into(), source: e })
}

/// The carried entries a snapshot of the worktree whose own git folder is
/// `own` leaves out, as literal pathspecs from its top.
pub(super) fn left_out(own: &Path) -> Vec<String> {
    let list = crate::process::read_regular(&own.join(IN_GIT_FOLDER), 1 << 20).unwrap_or_default();
    list.lines()
        .map(|l| l.trim_end_matches('/'))
        .filter(|l| !l.is_empty())
        .map(|l| format!(":(top,literal){l}"))
        .collect()
}

/// The file in a run's folder listing what was carried into its worktree.
pub fn list_file(run_dir: &Path) -> PathBuf {
    run_dir.join("carried")
}

/// The values a run's carried files hold (`KEY=VALUE` lines of the small
/// files carried, `.env` and the like, whole or inside a carried folder:
/// `config/prod.env`), read from the checkout: what a push to the phone
/// never shows. Read beneath the checkout, no link followed, a bounded
/// number of files.
pub fn values(checkout: &Path, list: &str) -> Vec<String> {
    let Ok(root) = File::open(checkout) else { return Vec::new() };
    let mut found = Vec::new();
    let mut looked = 0;
    for entry in list.lines().filter(|e| !e.is_empty()) {
        values_in(&root, Path::new(entry.trim_end_matches('/')), 0, &mut looked, &mut found);
    }
    found
}

/// The most files [`values`] reads, and how deep it looks into folders
/// (a carried `node_modules/` is not read through).
const VALUE_FILES: usize = 256;
const VALUE_DEPTH: usize = 4;

fn values_in(root: &File, relative: &Path, depth: usize, looked: &mut usize, found: &mut Vec<String>) {
    use std::io::Read;
    if *looked >= VALUE_FILES {
        return;
    }
    let Ok(file) = crate::process::open_beneath(root, relative) else { return };
    let Ok(meta) = file.metadata() else { return };
    if meta.is_dir() {
        if depth >= VALUE_DEPTH || relative.file_name().is_some_and(|n| n == "node_modules") {
            return;
        }
        for name in crate::process::names_in(&file).unwrap_or_default() {
            values_in(root, &relative.join(name), depth + 1, looked, found);
        }
        return;
    }
    if !meta.is_file() || meta.len() > 64 << 10 {
        return;
    }
    *looked += 1;
    let mut text = String::new();
    if file.take(64 << 10).read_to_string(&mut text).is_err() {
        return;
    }
    for line in text.lines() {
        let line = line.trim().trim_start_matches("export ");
        let Some((_, value)) = line.split_once('=').or_else(|| line.split_once(": ")) else { continue };
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'' || c == ',');
        if value.chars().count() >= 6 && !found.iter().any(|f| f == value) {
            found.push(value.to_string());
        }
    }
}

/// `text` with every value of `values` hidden.
pub fn hide(text: &str, values: &[String]) -> String {
    values.iter().fold(text.to_string(), |text, value| text.replace(value.as_str(), "[hidden: a carried value]"))
}
