//! The sandbox a run is launched from inside of: its launcher's (or an
//! ancestor's), read once per launch. A run launched there gets at most
//! what it allows: a folder it shows, places it writes, nothing it hides,
//! and no worktree of a repository whose git folder it could write.

use std::path::{Path, PathBuf};

use super::LaunchError;
use crate::home::config::Config;
use crate::preset::Preset;
use crate::sandbox::{on_disk, Asked, Folders, Place, Read, Sandbox};
use crate::store::{Store, StoreError};

/// Run `id`'s sandbox, as widened by `corral allow`, with `worktree` made
/// the run's own folder: what a run launched from inside it may touch.
pub(super) struct Launcher {
    /// The sandboxed run.
    pub id: String,
    /// Its rules; its `worktree` written as its folder.
    rules: Sandbox,
    /// Its folder (its worktree when it has one), as on disk.
    own: PathBuf,
    /// `~` of the run launched.
    home: PathBuf,
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Launcher {
    /// Run `id`'s sandbox, `None` if it runs unsandboxed; `home` is `~`.
    pub fn load(store: &Store, config: &Config, id: &str, home: &Path) -> Result<Option<Launcher>, StoreError> {
        let Some(rules) = config.sandbox_for(&store.run_preset(id)?) else { return Ok(None) };
        let mut rules = rules.widened(&store.sandbox_allows(id)?);
        let run = store.run(id)?;
        let folder = run.worktree.map(|w| w.path).unwrap_or(run.cwd);
        for place in &mut rules.write {
            if *place == Place::Worktree {
                *place = Place::Path(folder.clone());
            }
        }
        // Its folder is shown whether or not it writes it.
        rules.home.push(folder.clone());
        let own = canonical(Path::new(&folder));
        Ok(Some(Launcher { id: id.to_string(), rules, own, home: home.to_path_buf() }))
    }

    /// A place of its rules as on disk.
    fn place(&self, place: &str) -> PathBuf {
        on_disk(place, &self.home)
    }

    /// The places it writes, as on disk.
    fn written(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.rules.write.iter().filter_map(|p| match p {
            Place::Path(p) => Some(self.place(p)),
            Place::Worktree => None,
        })
    }

    /// `cwd` as it is on disk, if this sandbox shows it, it is not in
    /// Corral's own folders (but the launcher's own folder), not a system
    /// folder the sandbox replaces (`/tmp`, `/run`, `/proc`, `/dev`) or the
    /// kernel's (`/sys`) unless the sandbox shows it there, and not inside
    /// a `.git`: a run launched from inside the sandbox works there.
    pub fn folder(&self, store: &Store, cwd: &Path) -> Result<PathBuf, LaunchError> {
        let real = canonical(cwd);
        let hidden = || LaunchError::FolderHidden { folder: cwd.to_path_buf(), within: self.id.clone() };
        let corral = [canonical(store.home().data_dir()), canonical(store.home().config_dir())];
        if corral.iter().any(|c| real.starts_with(c)) && !real.starts_with(&self.own) {
            return Err(hidden());
        }
        // What it shows of the replaced folders: its own folder, what it
        // writes, the home (shown again over its own `/tmp` where it lies
        // there) or what its `read: only` lists. A child elsewhere there
        // would see the host's, sockets and processes included; one inside
        // a `.git` would write what the user's next `git` runs.
        let read_there: Vec<PathBuf> = match &self.rules.read {
            Read::Deny(_) => self.rules.home_shown(&self.home),
            Read::Only(listed) => listed.iter().map(|p| self.place(p)).collect(),
        };
        let shown = std::iter::once(self.own.clone()).chain(self.written()).chain(read_there);
        let shown = shown.into_iter().any(|w| real.starts_with(&w));
        let system = crate::sandbox::bwrap::SYSTEM_SHARED.iter().any(|s| real.starts_with(s));
        if (system && !shown) || crate::sandbox::bwrap::inside_git(&real) {
            return Err(LaunchError::FolderNotForChild { folder: real, within: self.id.clone() });
        }
        let readable = match &self.rules.read {
            Read::Deny(denied) => {
                !denied.iter().any(|d| real.starts_with(self.place(d))) && self.rules.shows_of_home(&real, &self.home)
            }
            Read::Only(listed) => real.starts_with(&self.own) || listed.iter().any(|l| real.starts_with(self.place(l))),
        };
        let masked = self.rules.masked.iter().any(|m| real.starts_with(self.place(m)));
        if readable && !masked {
            Ok(real)
        } else {
            Err(hidden())
        }
    }

    /// `preset` as it runs launched from inside this sandbox: in it, and
    /// in the worktree Corral makes the run if it makes one (a copy only a
    /// merge of yours brings back), narrowed by the preset's own sandbox
    /// if it asks for one.
    pub fn confine(&self, config: &Config, preset: &Preset, at: &Folders<'_>) -> Preset {
        let mut outer = self.rules.clone();
        if at.own_worktree {
            outer.write.push(Place::Worktree);
        }
        outer.profile = Some(format!("run {}'s sandbox, where it was launched", self.id));
        let sandbox = match config.sandbox_for(preset) {
            Some(own) => own.within(&outer, at),
            None => outer,
        };
        Preset { sandbox: Some(Asked::Rules(sandbox)), ..preset.clone() }
    }

    /// Whether this sandbox reads all of `path` (a repository a worktree
    /// would copy).
    pub fn reads_all_of(&self, path: &Path) -> bool {
        self.rules.reads_all_of(path, &self.home)
    }

    /// Whether this sandbox may write git folder `git`: it lies in a place
    /// the sandbox writes, and is not one the sandbox held read-only at its
    /// turn's start (as the folder is now: one made or put in its place
    /// since is the agent's).
    pub fn writes_git(&self, store: &Store, git: &Path) -> bool {
        if crate::sandbox::bwrap::held_by(&store.home().run_dir(&self.id), git) {
            return false;
        }
        // `/tmp` in a sandbox is the run's own: its host's is not written.
        self.written().filter(|w| w != Path::new("/tmp")).any(|w| git.starts_with(&w))
    }
}
