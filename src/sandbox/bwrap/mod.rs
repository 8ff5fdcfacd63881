//! A sandbox as bubblewrap's arguments: the file system read-only (or only
//! what may be read), what may be written bound writable over it, the
//! host's `/tmp`, `/run`, processes and IPC replaced by the run's own,
//! Corral's data unseen, git's metadata read-only but for the run's own
//! branch, secrets masked unreadable, no capabilities, and a network of its
//! own unless any host may be reached.
//!
//! Later mounts cover earlier ones, so the order is the rule: what is
//! readable, then what is writable, then what stays the user's alone.
//! Git's part of that rule has its own room (`git`), as has what the
//! arguments are built in (`args`).

use std::path::{Path, PathBuf};

mod args;
mod git;

use super::{expand, Network, Place, Read, Sandbox};
use args::Args;
pub use args::{Arguments, RunView, FIRST_HANDED_FD};
pub use git::{git_env, held_by, inside_git};
use git::{protect_git, write_held};

/// The run's own `/tmp`, in its scratch folder: every sandbox has one, so
/// nothing of the host's `/tmp` (another program's socket, a file another
/// user left) is seen, and a `write: [/tmp]` writes only the run's.
pub fn own_tmp(scratch: &Path) -> PathBuf {
    scratch.join("tmp")
}

/// The system's programs, libraries and settings: readable under `read:
/// only`, as an agent cannot start without them.
const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/var/lib"];

/// What of the host's `/run` a sandbox sees: name resolution (where
/// `/etc/resolv.conf` points) and a NixOS system's programs. Nothing else:
/// `/run/user/<uid>` holds the session bus, the keyring, the ssh and gpg
/// agents; `/run/docker.sock` is root on the machine.
const RUN_KEPT: &[&str] = &["/run/systemd/resolve", "/run/resolvconf", "/run/current-system", "/run/wrappers"];

/// The host's places a sandbox shows only as its own (or, for `/sys`, as
/// the kernel's): no run launched from inside a sandbox works in them.
pub const SYSTEM_SHARED: &[&str] = &["/tmp", "/run", "/dev", "/proc", "/sys", "/var/run"];

/// The host's places every sandbox replaces with its own: what lies under
/// them and is readable or written is shown again afterwards.
const REPLACED: &[&str] = &["/tmp", "/run", "/dev", "/proc"];

/// Bubblewrap's arguments for `sandbox` around a run (the agent's program
/// and arguments follow them), and what could not be granted, said.
///
/// The order is the rule, as later mounts cover earlier ones: what may be
/// read; what may be written; the host's shared places replaced by the
/// sandbox's own (`/tmp`, `/run`, `/dev`, `/proc`), and what of the above
/// lay under them shown again; Corral's data and settings hidden, whatever
/// written place holds them, and the run's own part of them shown again;
/// git's metadata made read-only but for the run's own branch; what is
/// denied masked; then the namespaces.
pub fn arguments(sandbox: &Sandbox, view: &RunView<'_>) -> Arguments {
    let mut args = Args::default();
    let mut notes = Vec::new();
    let home = view.user_home;
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    // An agent's first run makes its own folder: made before anything of
    // the home is read.
    for file in view.agent_files.iter().filter(|f| f.ends_with('/')) {
        let _ = std::fs::create_dir_all(expand(file.trim_end_matches('/'), home));
    }
    // What is read, as bound; the folders shown as they are now.
    let mut read: Vec<PathBuf> = Vec::new();
    let mut holding: Vec<PathBuf> = Vec::new();
    // The home by allow-list: hidden whole, what is shown bound back.
    let real_home = canonical(home);
    // Not where the run writes the home or a folder holding it, or works
    // above it: then all of it is the run's to see.
    let holds_home = |p: &Path| real_home.starts_with(canonical(p));
    let writes_home = sandbox.write.iter().any(|place| match place {
        Place::Worktree => holds_home(view.worktree.unwrap_or(view.cwd)),
        Place::Path(path) => holds_home(&expand(path, home)),
    });
    let hides_home = matches!(sandbox.read, Read::Deny(_))
        && real_home.parent().is_some()
        && real_home.is_dir()
        && !writes_home
        && !holds_home(view.cwd);
    match &sandbox.read {
        Read::Deny(denied) => {
            args.push(["--ro-bind", "/", "/"]);
            if hides_home {
                // Where the home lies in a place replaced below (`/tmp`),
                // it is hidden there instead.
                if !is_replaced(&real_home) {
                    args.push_os(["--tmpfs".into(), real_home.clone().into()]);
                }
                read.extend(sandbox.home_shown(home).into_iter().filter(|p| p.exists()));
            }
            read.extend(view.search_path.iter().filter(|d| d.is_absolute() && d.is_dir()).map(|d| canonical(d)));
            holding = holding_missing(denied, home);
        }
        Read::Only(places) => {
            for dir in SYSTEM {
                args.bind("--ro-bind-try", Path::new(dir));
            }
            read.extend(places.iter().map(|place| canonical(&expand(place, home))));
        }
    }
    let mut program_dirs: Vec<PathBuf> = Vec::new();
    for program in view.programs {
        // A CLI from npm is a link into its package (`bin/x.js` beside
        // `node_modules/`): the link's folder, and the package's (the
        // target's folder and the one above) — never a folder holding the
        // user's home.
        let target = std::fs::canonicalize(program).unwrap_or_default();
        let dirs = program.parent().into_iter().chain(target.ancestors().skip(1).take(2));
        // Nor `/tmp`, `/run` or a folder above them: a program in
        // `/tmp/x/` shows `/tmp/x`, never the host's `/tmp`.
        let too_wide = |d: &Path| home.starts_with(d) || REPLACED.iter().any(|r| Path::new(r).starts_with(d));
        program_dirs.extend(dirs.map(canonical).filter(|d| d.parent().is_some() && !too_wide(d)));
    }
    read.extend(program_dirs.iter().cloned());
    read.push(canonical(view.cwd));
    // A home in a place every sandbox replaces (`/tmp`) is hidden after
    // the replacement, unless a folder shown again there holds it.
    let hides_home =
        hides_home && !(is_replaced(&real_home) && read.iter().any(|r| *r != real_home && real_home.starts_with(r)));
    // Shown where the home is hidden (under `read: only`, everywhere).
    let in_hidden_home = |p: &Path| hides_home && p.starts_with(&real_home);
    let shown = |p: &Path| !in_hidden_home(p) || read.iter().any(|r| p.starts_with(r));
    match sandbox.read {
        Read::Only(_) => read.iter().for_each(|place| args.bind("--ro-bind-try", place)),
        Read::Deny(_) => {
            // Once each, and not again inside one bound already (a `PATH`
            // folder in `~/.cargo`): each mount costs ~0.1 ms.
            let mut binds: Vec<&PathBuf> = read.iter().filter(|p| in_hidden_home(p)).collect();
            binds.sort();
            binds.dedup_by(|inner, outer| inner.starts_with(outer));
            binds.into_iter().for_each(|place| args.bind("--ro-bind-try", place))
        }
    }
    // A folder holding a denied place not made yet, as it was at launch:
    // only where it is shown.
    holding.retain(|folder| shown(folder));
    for folder in &holding {
        as_of_now(&mut args, folder);
    }
    // What is written, as bound: never Corral's own data or settings.
    let mut private = vec![canonical(view.corral_home), canonical(view.corral_config)];
    // One folder under CORRAL_HOME: hidden once (each mount costs ~0.1 ms).
    private.dedup();
    let worktrees = canonical(view.worktrees);
    let mut written: Vec<PathBuf> = Vec::new();
    for place in &sandbox.write {
        let path = match place {
            // A worktree of Corral's, whose folder no sandbox can replace:
            // as on disk (its data folder may be reached through a link).
            Place::Worktree => view.worktree.map(canonical).unwrap_or_else(|| view.cwd.to_path_buf()),
            Place::Path(path) => expand(path, home),
        };
        if path == Path::new("/tmp") {
            continue; // the run's own, below
        }
        // A repository's git folder runs what is written in it (hooks,
        // config) with the user's rights at the user's next `git`.
        if inside_git(&path) {
            notes.push(format!(
                "sandbox: {} is inside a repository's git folder, never writable inside a sandbox (the user's \
                 next git would run what the agent wrote there)",
                path.display()
            ));
            continue;
        }
        if private.iter().any(|p| path.starts_with(p)) && !path.starts_with(&worktrees) {
            notes.push(format!(
                "sandbox: {} is Corral's own data, never writable inside a sandbox (a run's \
                 agent that could write it could widen its own sandbox)",
                path.display()
            ));
            continue;
        }
        // As resolved at launch, never again: a place that is a link now
        // (a launcher swapped its child's folder for a link to `/`) is not
        // followed, but refused.
        match args.pinned(true, &path) {
            Ok(()) => {}
            Err(e) if crate::process::is_a_link(&e) => {
                notes.push(format!(
                    "sandbox: {} is a link now, not the folder it was at launch: it is not writable",
                    path.display()
                ));
                continue;
            }
            Err(_) => {
                notes.push(super::not_writable(&path));
                continue;
            }
        }
        written.push(path);
    }
    // What the agent needs to work: its own files, the run's copies of
    // them (the user's stay as they are), and its program where it lies
    // in them (an agent installed in its own folder).
    let copies = super::own::copies_in(view.scratch);
    let history: Vec<PathBuf> = view.agent_history.iter().map(|h| canonical(&expand(h, home))).collect();
    let mut agent_files: Vec<(PathBuf, PathBuf)> = Vec::new();
    for file in view.agent_files {
        let real = canonical(&expand(file.trim_end_matches('/'), home));
        match super::own::copy_of(&real, &canonical(home), &copies, &history) {
            Ok(Some(copy)) => {
                args.push_os(["--bind".into(), copy.clone().into(), real.clone().into()]);
                agent_files.push((copy, real));
            }
            Ok(None) => {}
            Err(e) => notes.push(format!("sandbox: cannot make the run's copy of {}: {e}", real.display())),
        }
    }
    for dir in program_dirs.iter().filter(|d| agent_files.iter().any(|(_, real)| d.starts_with(real))) {
        args.bind("--ro-bind-try", dir);
    }
    // The host's shared places replaced by the run's own, and what was
    // bound under them bound again, in the same order.
    args.push(["--dev", "/dev", "--proc", "/proc"]);
    // The host's cgroups name every run of Corral's (and what they hold).
    let cgroups = Path::new("/sys/fs/cgroup");
    let hides_cgroups = matches!(sandbox.read, Read::Deny(_)) && cgroups.is_dir();
    if hides_cgroups {
        args.push_os(["--tmpfs".into(), cgroups.into()]);
    }
    args.push_os(["--bind".into(), own_tmp(view.scratch).into(), "/tmp".into()]);
    args.push(["--tmpfs", "/run"]);
    for kept in RUN_KEPT {
        args.bind("--ro-bind-try", Path::new(kept));
    }
    if hides_home && is_replaced(&real_home) {
        args.push_os(["--tmpfs".into(), real_home.clone().into()]);
    }
    let under_replaced = |p: &Path| is_replaced(p);
    for place in read.iter().filter(|p| under_replaced(p)) {
        args.bind("--ro-bind-try", place);
        for folder in holding.iter().filter(|f| f.starts_with(place)) {
            as_of_now(&mut args, folder);
        }
    }
    for place in written.iter().filter(|p| under_replaced(p)) {
        if let Err(e) = args.pinned(true, place) {
            notes.push(format!("sandbox: {} cannot be bound: {e}", place.display()));
        }
    }
    for (copy, real) in agent_files.iter().filter(|(_, real)| under_replaced(real)) {
        args.push_os(["--bind".into(), copy.into(), real.into()]);
    }
    for dir in program_dirs.iter().filter(|d| under_replaced(d)) {
        args.bind("--ro-bind-try", dir);
    }
    // Corral's data and settings: nothing of them inside (the store, the
    // push key, every run's folder, worktree and kept environment), but
    // the run's own folder, read-only, its scratch, and the worktrees it
    // reads or writes.
    for dir in &private {
        args.push_os(["--perms".into(), "0700".into(), "--tmpfs".into(), dir.into()]);
    }
    let run_dir = canonical(view.run_dir);
    args.bind("--ro-bind", &run_dir);
    let kept_env = crate::run::env::env_file(&run_dir);
    if kept_env.exists() {
        args.push_os(["--ro-bind".into(), view.unreadable.into(), kept_env.into()]);
    }
    let scratch = canonical(view.scratch);
    args.bind("--bind", &scratch);
    let in_private = |p: &Path| private.iter().any(|d| p.starts_with(d));
    for place in read.iter().filter(|p| in_private(p) && p.starts_with(&worktrees)) {
        args.bind("--ro-bind-try", place);
    }
    for place in written.iter().filter(|p| in_private(p)) {
        if let Err(e) = args.pinned(true, place) {
            notes.push(format!("sandbox: {} cannot be bound: {e}", place.display()));
        }
    }
    if let Some(socket) = view.broker {
        // At one place in every sandbox, so a `corral` whose agent scrubbed
        // its environment (Codex does, for MCP servers) finds it too.
        let inside = Path::new(super::broker::SOCKET_INSIDE);
        args.push_os(["--bind".into(), socket.into(), inside.into()]);
        args.push_os(["--setenv".into(), super::broker::SOCKET_ENV.into(), inside.into()]);
    }
    let held = protect_git(&mut args, view, &written);
    if let Err(e) = write_held(view.run_dir, &held) {
        notes.push(format!("sandbox: cannot note which git folders are held read-only: {e}"));
    }
    let denied = match &sandbox.read {
        Read::Deny(places) => places.as_slice(),
        Read::Only(_) => &[],
    };
    for place in denied.iter().chain(&sandbox.masked) {
        // Through a link (a dotfiles repository's ~/.ssh), what it
        // points at is masked: bubblewrap mounts on no link.
        let Ok(path) = std::fs::canonicalize(expand(place, home)) else { continue };
        // Not there at all where the home is hidden and it is not shown.
        if in_hidden_home(&path) && !read.iter().chain(&written).any(|r| path.starts_with(r) || r.starts_with(&path)) {
            continue;
        }
        // The agent's own credentials: read, never written.
        if agent_files.iter().any(|(_, own)| path.starts_with(own)) {
            args.bind("--ro-bind", &path);
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => args.push_os(["--perms".into(), "0000".into(), "--tmpfs".into(), path.into()]),
            Ok(_) => args.push_os(["--ro-bind".into(), view.unreadable.into(), path.into()]),
            Err(_) => {}
        }
    }
    // Corral's folders, made for the sandbox, are read-only once all is
    // bound in them: a write there is refused, not kept in memory. (The
    // sandbox's own empty `/run` and cgroup folder may stay writable: what
    // is written there is the sandbox's, and gone with it.)
    for dir in &private {
        args.push_os(["--remount-ro".into(), dir.into()]);
    }
    if hides_home {
        // The home's own links that lead to what is shown (`~/out` →
        // a folder it writes), as they are; then the hidden home
        // read-only, so a write there is refused as one ("Read-only file
        // system": a denial to allow), not kept in memory.
        // Its other folders as empty names: a write there is refused as
        // one ("Read-only file system", a denial that can be allowed)
        // rather than "No such file", and nothing of what is in them is
        // there.
        let shown_places: Vec<&PathBuf> = read.iter().chain(&written).collect();
        for entry in std::fs::read_dir(&real_home).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_symlink() => {
                    let (Ok(target), Ok(real)) = (std::fs::read_link(&path), std::fs::canonicalize(&path)) else {
                        continue;
                    };
                    if shown_places.iter().any(|p| real.starts_with(p)) {
                        args.push_os(["--symlink".into(), target.into(), path.into()]);
                    }
                }
                Ok(kind) if kind.is_dir() && !shown_places.iter().any(|p| p.starts_with(&path)) => {
                    args.push_os(["--dir".into(), path.into()]);
                }
                _ => {}
            }
        }
        args.push_os(["--remount-ro".into(), real_home.clone().into()]);
    }
    if sandbox.network != Network::All {
        args.push(["--unshare-net"]);
    }
    // Its own processes, System V IPC, host name and cgroup view: no
    // other process of the user's is seen, signalled or traced.
    args.push(["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]);
    args.push(["--cap-drop", "ALL", "--die-with-parent"]);
    args.push_os(["--chdir".into(), view.cwd.into()]);
    args.push(["--"]);
    args.finish(notes)
}

/// Whether `path` lies in a place every sandbox replaces with its own.
fn is_replaced(path: &Path) -> bool {
    REPLACED.iter().any(|r| path.starts_with(r))
}

/// The folders holding a denied place that does not exist yet (`aws
/// configure` may make it while the run goes on): the nearest existing
/// folder above each, outermost first, never `/`.
fn holding_missing(denied: &[String], home: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = denied
        .iter()
        .map(|place| expand(place, home))
        .filter(|path| path.symlink_metadata().is_err())
        .filter_map(|path| path.ancestors().skip(1).find(|a| a.is_dir()).and_then(|a| std::fs::canonicalize(a).ok()))
        .filter(|folder| folder.parent().is_some())
        .collect();
    folders.sort();
    folders.dedup();
    folders
}

/// `folder` as it is now, read-only: what is in it is shown, and nothing
/// made in it later (a denied file made while the run goes on). What is
/// written there is bound over it afterwards, live.
fn as_of_now(args: &mut Args, folder: &Path) {
    args.push_os(["--tmpfs".into(), folder.into()]);
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        match std::fs::read_link(&path) {
            Ok(target) => args.push_os(["--symlink".into(), target.into(), path.into()]),
            Err(_) => args.bind("--ro-bind", &path),
        }
    }
    args.push_os(["--remount-ro".into(), folder.into()]);
}
