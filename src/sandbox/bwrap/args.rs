//! What bubblewrap is given: the run's place in the machine it reads
//! ([`RunView`]), and the arguments as they are built, with the places
//! pinned by descriptor. A leaf the sandbox's rules (`mod.rs`) and git's
//! part of them (`git`) both write into.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where one run's sandbox sits in the machine.
#[derive(Debug, Clone)]
pub struct RunView<'a> {
    /// The user's home, as the run's environment says.
    pub user_home: &'a Path,
    /// The folder the agent starts in.
    pub cwd: &'a Path,
    /// The run's worktree, when it has one.
    pub worktree: Option<&'a Path>,
    /// Its worktree's branch (`corral/<id>`), as Corral recorded it.
    pub branch: Option<&'a str>,
    /// Corral's data: the store, every run's folder and worktree. Never
    /// seen inside (an agent's `corral` is carried out by its shepherd:
    /// see `broker`), but for what of the run's own is shown again.
    pub corral_home: &'a Path,
    /// Corral's settings and global presets (and the push key's
    /// neighbours): never seen inside.
    pub corral_config: &'a Path,
    /// The run's own folder: readable (its task, its system prompt, the
    /// sockets of its proxy and broker), but for the environment it keeps.
    pub run_dir: &'a Path,
    /// The run's folder its agent writes (its session, its own `/tmp`).
    pub scratch: &'a Path,
    /// The shepherd's broker's socket, named to the sandbox's `corral`.
    pub broker: Option<&'a Path>,
    /// Where Corral keeps runs' worktrees: only a written place there (the
    /// run's own worktree, its launcher's) is shown inside.
    pub worktrees: &'a Path,
    /// Places under the user's home the agent itself writes (its config,
    /// sessions, credentials): its adapter's; a folder ends with `/` and is
    /// made if missing (an agent's first run makes its own). The run gets
    /// its own copy of each (see `own`).
    pub agent_files: &'a [&'a str],
    /// What of those is the agent's history, not carried into the copies.
    pub agent_history: &'a [&'a str],
    /// A file no one may read, bound over each denied file.
    pub unreadable: &'a Path,
    /// The programs the sandbox starts (the agent's, Corral's helper),
    /// readable with the package each belongs to.
    pub programs: &'a [&'a Path],
    /// The folders of the run's `PATH`: where its programs are found
    /// (shown again where they lie in `/tmp`, under `read:` all but).
    pub search_path: &'a [PathBuf],
}

/// The first descriptor number the places a sandbox binds by descriptor
/// are handed at (`--bind-fd 100 …`): above whatever a spawn uses itself.
pub const FIRST_HANDED_FD: i32 = 100;

/// Bubblewrap's arguments for one sandbox, what could not be granted, and
/// the places pinned by descriptor that they name (handed to bubblewrap at
/// [`FIRST_HANDED_FD`] and up).
pub struct Arguments {
    /// The arguments, up to and with `--`.
    pub args: Vec<OsString>,
    /// What could not be granted, said.
    pub notes: Vec<String>,
    /// The pinned places, in the order their numbers were given.
    pub fds: Vec<std::os::fd::OwnedFd>,
}

#[derive(Default)]
pub(super) struct Args(Vec<OsString>, Vec<std::os::fd::OwnedFd>);

impl Args {
    /// `--bind-fd N path` (or `--ro-bind-fd`): the place as it is on disk
    /// now, opened by a path that holds no link, so neither a link put in
    /// its stead since launch nor one swapped in while the sandbox is made
    /// is followed. Fails (`ELOOP`) where the path is a link now.
    pub(super) fn pinned(&mut self, writable: bool, path: &Path) -> std::io::Result<()> {
        let fd = crate::process::pin(path)?;
        let number = FIRST_HANDED_FD + self.1.len() as i32;
        self.1.push(fd);
        let how = if writable { "--bind-fd" } else { "--ro-bind-fd" };
        self.push_os([how.into(), number.to_string().into(), path.into()]);
        Ok(())
    }

    pub(super) fn push<const N: usize>(&mut self, words: [&str; N]) {
        self.0.extend(words.iter().map(OsString::from));
    }
    pub(super) fn push_os<const N: usize>(&mut self, words: [OsString; N]) {
        self.0.extend(words);
    }
    /// The arguments made, with what could not be granted.
    pub(super) fn finish(self, notes: Vec<String>) -> Arguments {
        Arguments { args: self.0, notes, fds: self.1 }
    }

    /// `how SRC DEST` with the same path.
    pub(super) fn bind(&mut self, how: &str, path: &Path) {
        self.push_os([how.into(), path.into(), path.into()]);
    }
}
