//! A sandbox as bubblewrap's arguments: the file system read-only (or only
//! what may be read), what may be written bound writable over it, secrets
//! masked unreadable, the repository's hooks and config read-only even
//! where its worktree is written, no capabilities, and a network of its own
//! unless any host may be reached.
//!
//! Later mounts cover earlier ones, so the order is the rule: what is
//! readable, then what is writable, then what stays the user's alone.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{expand, Network, Place, Read, Sandbox};

/// Where one run's sandbox sits in the machine.
#[derive(Debug, Clone)]
pub struct RunView<'a> {
    /// The user's home, as the run's environment says.
    pub user_home: &'a Path,
    /// The folder the agent starts in.
    pub cwd: &'a Path,
    /// The run's worktree, when it has one.
    pub worktree: Option<&'a Path>,
    /// Corral's data: the store and run folders, read-only (an agent's
    /// `corral` is carried out by its shepherd: see `broker`).
    pub corral_home: &'a Path,
    /// The run's folder its agent writes (its session, its temporary
    /// files where /tmp is not written): writable.
    pub scratch: &'a Path,
    /// The shepherd's broker's socket, named to the sandbox's `corral`.
    pub broker: Option<&'a Path>,
    /// Where Corral keeps runs' worktrees: every other run's is read-only.
    pub worktrees: &'a Path,
    /// Places under the user's home the agent itself writes (its config,
    /// sessions, credentials): its adapter's; a folder ends with `/` and is
    /// made if missing (an agent's first run makes its own).
    pub agent_files: &'a [&'a str],
    /// A file no one may read, bound over each denied file.
    pub unreadable: &'a Path,
    /// The programs the sandbox starts (the agent's, Corral's helper):
    /// readable under `read: only`, with the package each belongs to.
    pub programs: &'a [&'a Path],
}

/// Whether the sandbox writes /tmp; where it does not, the run's own
/// temporary folder is its `TMPDIR` (the host's /tmp stays as it is, and
/// folders under it stay visible).
pub fn writes_tmp(sandbox: &Sandbox) -> bool {
    sandbox.write.iter().any(|p| matches!(p, Place::Path(p) if p == "/tmp"))
}

/// The system's programs, libraries and settings: readable under `read:
/// only`, as an agent cannot start without them.
const SYSTEM: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/run", "/var/lib"];

/// Bubblewrap's arguments for `sandbox` around a run (the agent's program
/// and arguments follow them), and what could not be granted, said.
pub fn arguments(sandbox: &Sandbox, view: &RunView<'_>) -> (Vec<OsString>, Vec<String>) {
    let mut args = Args::default();
    let mut notes = Vec::new();
    let home = view.user_home;
    match &sandbox.read {
        Read::Deny(_) => args.push(["--ro-bind", "/", "/"]),
        Read::Only(places) => {
            for dir in SYSTEM {
                args.bind("--ro-bind-try", Path::new(dir));
            }
            for place in places {
                args.bind("--ro-bind-try", &expand(place, home));
            }
            for program in view.programs {
                // A CLI from npm is a link into its package (`bin/x.js`
                // beside `node_modules/`): the link's folder, and the
                // package's (the target's folder and the one above) —
                // never a folder holding the user's home.
                let target = std::fs::canonicalize(program).unwrap_or_default();
                let dirs = program.parent().into_iter().chain(target.ancestors().skip(1).take(2));
                for dir in dirs.filter(|d| d.parent().is_some() && !home.starts_with(d)) {
                    args.bind("--ro-bind-try", dir);
                }
            }
            args.bind("--ro-bind-try", view.cwd);
        }
    }
    args.push(["--dev", "/dev", "--proc", "/proc"]);
    // Corral's data is read, never written, from inside: what is written
    // below (the run's own worktree is there) is bound over it.
    args.bind("--ro-bind", view.corral_home);
    let mut written: Vec<PathBuf> = Vec::new();
    for place in &sandbox.write {
        let path = match place {
            Place::Worktree => view.worktree.unwrap_or(view.cwd).to_path_buf(),
            Place::Path(path) => expand(path, home),
        };
        // Bubblewrap mounts on no link: what a link points at is bound.
        if let Ok(path) = std::fs::canonicalize(&path) {
            args.bind("--bind", &path);
            written.push(path);
        } else {
            notes.push(super::not_writable(&path));
        }
    }
    // What the agent needs to work: its own files, its temporary folder;
    // other runs' worktrees stay out of reach.
    for file in view.agent_files {
        let path = expand(file.trim_end_matches('/'), home);
        if file.ends_with('/') {
            let _ = std::fs::create_dir_all(&path);
        }
        args.bind("--bind-try", &std::fs::canonicalize(&path).unwrap_or(path));
    }
    args.bind("--bind-try", view.scratch);
    if let Some(socket) = view.broker {
        args.push_os(["--setenv".into(), super::broker::SOCKET_ENV.into(), socket.into()]);
    }
    if let Ok(entries) = std::fs::read_dir(view.worktrees) {
        for entry in entries.flatten() {
            if view.worktree.is_none_or(|own| own != entry.path()) {
                args.bind("--ro-bind", &entry.path());
            }
        }
    }
    for repo in git_dirs(view, &written) {
        protect_git(&mut args, &repo, view.worktree);
    }
    if let Read::Deny(places) = &sandbox.read {
        for place in places {
            // Through a link (a dotfiles repository's ~/.ssh), what it
            // points at is masked: bubblewrap mounts on no link.
            let Ok(path) = std::fs::canonicalize(expand(place, home)) else { continue };
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    args.push_os(["--perms".into(), "0000".into(), "--tmpfs".into(), path.into()])
                }
                Ok(_) => args.push_os(["--ro-bind".into(), view.unreadable.into(), path.into()]),
                Err(_) => {}
            }
        }
    }
    if sandbox.network != Network::All {
        args.push(["--unshare-net"]);
    }
    args.push(["--cap-drop", "ALL", "--die-with-parent"]);
    args.push_os(["--chdir".into(), view.cwd.into()]);
    args.push(["--"]);
    (args.0, notes)
}

/// The repositories whose `.git` an agent could reach through what it
/// writes: the one its worktree belongs to, and any inside a written place.
fn git_dirs(view: &RunView<'_>, written: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(common) = view.worktree.and_then(common_git_dir) {
        dirs.push(common);
    }
    for place in written {
        // The repository a written folder is in, or the one it is.
        let mut at = Some(place.as_path());
        while let Some(dir) = at {
            let git = dir.join(".git");
            if git.is_dir() {
                dirs.push(git);
                break;
            }
            at = dir.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The repository's `.git` a linked worktree's `.git` file points into.
fn common_git_dir(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let gitdir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    // `<repo>/.git/worktrees/<name>`
    Some(gitdir.parent()?.parent()?.to_path_buf())
}

/// A worktree writes its commits into the repository's objects, refs and
/// logs and its own folder under `worktrees/`; nothing else of `.git` —
/// hooks (code run at the user's next commit), config, other worktrees'
/// folders — is writable, whatever else the sandbox lets it write.
fn protect_git(args: &mut Args, git: &Path, worktree: Option<&Path>) {
    let own = worktree.and_then(|w| {
        let text = std::fs::read_to_string(w.join(".git")).ok()?;
        Some(PathBuf::from(text.strip_prefix("gitdir:")?.trim()))
    });
    if own.as_deref().is_some_and(|own| own.starts_with(git)) {
        for dir in ["objects", "refs", "logs"] {
            args.bind("--bind-try", &git.join(dir));
        }
        if let Some(own) = &own {
            args.bind("--bind", own);
        }
    }
    for part in ["hooks", "config", "info"] {
        args.bind("--ro-bind-try", &git.join(part));
    }
    if let Ok(entries) = std::fs::read_dir(git.join("worktrees")) {
        for entry in entries.flatten() {
            if own.as_deref() != Some(entry.path().as_path()) {
                args.bind("--ro-bind", &entry.path());
            }
        }
    }
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn push<const N: usize>(&mut self, words: [&str; N]) {
        self.0.extend(words.iter().map(OsString::from));
    }
    fn push_os<const N: usize>(&mut self, words: [OsString; N]) {
        self.0.extend(words);
    }
    /// `how SRC DEST` with the same path.
    fn bind(&mut self, how: &str, path: &Path) {
        self.push_os([how.into(), path.into(), path.into()]);
    }
}
