//! The agent's own folders, as the run's: a copy per run.
//!
//! An agent writes its config folder (`~/.claude`, `~/.codex`, `~/.pi`, …)
//! to work: sessions, settings it updates, caches. Bound writable, that
//! folder would be a door out of the sandbox: what the agent wrote there is
//! read by the user's next unsandboxed agent (a hook in Claude Code's
//! settings, an MCP server in `~/.claude.json`, a provider in Codex's
//! config, a package in opencode's cache) and by Corral itself (the
//! presets in `~/.claude/agents`, the API hosts a sandbox reaches). So a
//! sandboxed run gets its own copy of each, made at its first turn and kept
//! for its next ones (its sessions go on), and the user's stay as they
//! were. What is the agent's history — other sessions' transcripts, which
//! are neither needed nor the run's to read — is not carried over.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Where the copies of a run's agent folders are, in its scratch folder.
pub fn copies_in(scratch: &Path) -> PathBuf {
    scratch.join("own")
}

/// The run's copy of the agent's `real` (a folder or a file under the
/// user's `home`), made from it unless made at an earlier turn, without
/// what `history` lists (full paths). `None` where `real` is neither.
pub fn copy_of(real: &Path, home: &Path, copies: &Path, history: &[PathBuf]) -> io::Result<Option<PathBuf>> {
    let Ok(meta) = std::fs::metadata(real) else { return Ok(None) };
    let relative = real.strip_prefix(home).unwrap_or(real);
    let relative = relative.strip_prefix("/").unwrap_or(relative);
    // The agent writes its copies, and the folder they are in: a link it
    // left there (to your own folder, say) would be bound writable at its
    // next turn, or copied into. Every folder on the way is made here as a
    // folder, and any link on it refused.
    let Some(parent) = real_folders(copies, relative.parent().unwrap_or(Path::new("")))? else {
        return Err(io::Error::other(format!(
            "a link the agent made lies on the way to its copy of {}: the copy is not used",
            real.display()
        )));
    };
    let Some(name) = relative.file_name() else { return Ok(None) };
    let copy = parent.join(name);
    if let Ok(kind) = copy.symlink_metadata() {
        if kind.file_type().is_symlink() {
            return Err(io::Error::other(format!("{} is a link the agent made: it is not used", copy.display())));
        }
        return Ok(Some(copy));
    }
    // Made beside, then renamed: a copy cut short by a crash is never
    // taken for a whole one.
    let partial = copy.with_extension("corral-partial");
    let _ = std::fs::remove_dir_all(&partial);
    let _ = std::fs::remove_file(&partial);
    if meta.is_dir() {
        copy_folder(real, &partial, history)?;
    } else if meta.is_file() {
        std::fs::copy(real, &partial)?;
    } else {
        return Ok(None);
    }
    std::fs::rename(&partial, &copy)?;
    Ok(Some(copy))
}

/// `base` and `relative` under it made as real folders (0700), none of
/// them a link: the folder, or `None` where a link is on the way.
fn real_folders(base: &Path, relative: &Path) -> io::Result<Option<PathBuf>> {
    let mut at = base.to_path_buf();
    let mut parts = vec![base.to_path_buf()];
    for part in relative.components() {
        at.push(part);
        parts.push(at.clone());
    }
    for folder in parts {
        match folder.symlink_metadata() {
            Ok(kind) if kind.file_type().is_symlink() || !kind.is_dir() => return Ok(None),
            Ok(_) => {}
            Err(_) => {
                let made = std::fs::DirBuilder::new().mode(crate::home::DIR_MODE).create(&folder);
                match made {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ if folder.symlink_metadata().is_ok_and(|k| k.file_type().is_symlink()) => return Ok(None),
                    _ => {}
                }
            }
        }
    }
    Ok(Some(at))
}

/// Whether `path`, every link in it followed, is still under `folder`
/// (also followed): none of the agent's links leads out of it.
pub fn within(path: &Path, folder: &Path) -> bool {
    match (std::fs::canonicalize(path), std::fs::canonicalize(folder)) {
        (Ok(path), Ok(folder)) => path.starts_with(&folder) && path != folder,
        _ => false,
    }
}

/// Copies folder `from` to `to`: its files, folders and links (as links),
/// not what `history` lists, nor sockets and pipes.
fn copy_folder(from: &Path, to: &Path, history: &[PathBuf]) -> io::Result<()> {
    std::fs::create_dir(to)?;
    std::fs::set_permissions(to, std::fs::metadata(from)?.permissions())?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        if history.contains(&path) {
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&path)?, &target)?;
        } else if kind.is_dir() {
            copy_folder(&path, &target, history)?;
        } else if kind.is_file() {
            // A file the agent cannot read (another's, 0000) is left out.
            match std::fs::copy(&path, &target) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
                result => {
                    result?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_made_once_without_history_and_the_users_folder_is_not_touched() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let real = home.join(".agent");
        std::fs::create_dir_all(real.join("sessions")).unwrap();
        std::fs::create_dir_all(real.join("agents")).unwrap();
        std::fs::write(real.join("settings.json"), "{}").unwrap();
        std::fs::write(real.join("sessions/old.jsonl"), "secret").unwrap();
        std::fs::write(real.join("agents/a.md"), "a").unwrap();
        let copies = root.path().join("copies");
        let history = [real.join("sessions")];
        let copy = copy_of(&real, &home, &copies, &history).unwrap().unwrap();
        assert_eq!(copy, copies.join(".agent"));
        assert_eq!(std::fs::read_to_string(copy.join("agents/a.md")).unwrap(), "a");
        assert!(!copy.join("sessions").exists(), "history is not carried");
        std::fs::write(copy.join("settings.json"), "{\"hooks\":1}").unwrap();
        // A later turn keeps the run's copy, as it is.
        let again = copy_of(&real, &home, &copies, &history).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(again.join("settings.json")).unwrap(), "{\"hooks\":1}");
        assert_eq!(std::fs::read_to_string(real.join("settings.json")).unwrap(), "{}");
        assert!(copy_of(&home.join("missing"), &home, &copies, &history).unwrap().is_none());
        // A copy the agent made a link to the user's folder is refused,
        // and so is one under a folder of copies it made a link.
        std::fs::remove_dir_all(&copy).unwrap();
        std::os::unix::fs::symlink(&home, &copy).unwrap();
        assert!(copy_of(&real, &home, &copies, &history).is_err());
        std::fs::remove_file(&copy).unwrap();
        std::fs::remove_dir(&copies).unwrap();
        std::os::unix::fs::symlink(&home, &copies).unwrap();
        assert!(copy_of(&real, &home, &copies, &history).is_err());
        assert!(!home.join(".agent/.agent").exists(), "nothing was copied through the link");
    }
}
