//! Whose words a file holds: Corral runs commands from presets and reads
//! settings, so a file another local user could have written is never
//! acted on as if it were the user's.
//!
//! A path is the user's when it, and every folder above it, is owned by the
//! user or by root and cannot be written by anyone else: not by others, and
//! by its group only if that is the user's own group. A folder above it that
//! others can write (`/tmp`) is fine when it is sticky: there nobody can
//! rename or remove what is not theirs, and what they add themselves is
//! caught by the owner check.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a path may hold another user's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} {why}: another local user could have written it, so Corral does not use it; {fix}")]
pub struct NotYours {
    /// The file or folder at fault (the path itself or a folder above it).
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
    /// What to do.
    pub fix: String,
}

/// `Ok` if `path` (which must exist) and every folder above it are the
/// user's (see the module's rule); else which one is not, and why.
pub fn check(path: &Path) -> Result<(), NotYours> {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let me = nix::unistd::geteuid().as_raw();
    let my_group = nix::unistd::getegid().as_raw();
    for (depth, at) in real.ancestors().enumerate() {
        let Ok(meta) = std::fs::metadata(at) else { continue };
        let owner = meta.uid();
        if owner != me && owner != 0 {
            return Err(NotYours {
                path: at.to_path_buf(),
                why: format!("is owned by user {} (uid {owner}), not you or root", user_name(owner)),
                fix: format!(
                    "move it somewhere of yours, or `chown` it to yourself if it is yours ({})",
                    path.display()
                ),
            });
        }
        let mode = meta.mode();
        // Folders above the path may be shared if sticky; the path may not.
        let sticky_above = depth > 0 && meta.is_dir() && mode & 0o1000 != 0;
        let others_write = mode & 0o002 != 0;
        let group_writes = mode & 0o020 != 0 && meta.gid() != my_group;
        if (others_write || group_writes) && !sticky_above {
            let who = if others_write { "every user" } else { "its group" };
            return Err(NotYours {
                path: at.to_path_buf(),
                why: format!("can be written by {who} (mode {:o})", mode & 0o7777),
                fix: format!("`chmod go-w {}` if it is yours", at.display()),
            });
        }
    }
    Ok(())
}

/// The name of user `uid`, or `?` if it has none.
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| "?".to_string(), |u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_folder_others_can_write_is_not_yours_unless_sticky_above() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.md");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(check(&file), Ok(()));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check(&file).unwrap_err();
        assert_eq!(e.path, std::fs::canonicalize(dir.path()).unwrap());
        assert!(e.to_string().contains("every user"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check(&file), Ok(()), "a sticky folder above is shared safely");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(check(&file).is_err(), "the file itself may not be writable by others");
    }
}
