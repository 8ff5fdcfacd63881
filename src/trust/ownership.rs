//! Whose words a file holds: Corral runs commands from presets and reads
//! settings, so a file another local user could have written is never
//! acted on as if it were the user's.
//!
//! A path is the user's when it, and every folder above it, is owned by the
//! user or by root and cannot be written by anyone else: not by others, by
//! its group only if no one but the user is in that group (as a member or
//! by their primary group), and by no other user or group named in a POSIX
//! ACL. A folder above it that others can write (`/tmp`) is fine when it is
//! sticky: there nobody can rename or remove what is not theirs, and what
//! they add themselves is caught by the owner check.

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
        if sticky_above {
            continue;
        }
        let others_write = mode & 0o002 != 0;
        // With an ACL, the group bits are its mask: the ACL says who.
        let acl = acl_writers(at);
        let group_writes = acl.is_none() && mode & 0o020 != 0 && !group_is_mine_alone(meta.gid(), me);
        let who = if others_write {
            Some("every user".to_string())
        } else if group_writes {
            Some(format!("its group {} (others are in it)", group_name(meta.gid())))
        } else {
            acl.and_then(|writers| writers.named(me, my_group))
        };
        if let Some(who) = who {
            return Err(NotYours {
                path: at.to_path_buf(),
                why: format!("can be written by {who} (mode {:o})", mode & 0o7777),
                fix: format!("`chmod go-w {p}` (and `setfacl -b {p}`) if it is yours", p = at.display()),
            });
        }
    }
    Ok(())
}

/// Who a POSIX ACL lets write a path besides its owner.
struct AclWriters {
    users: Vec<u32>,
    groups: Vec<u32>,
    /// The owning group's entry, when it writes.
    owning_group: bool,
}

impl AclWriters {
    /// The first writer that is not the user alone, said.
    fn named(&self, me: u32, my_group: u32) -> Option<String> {
        if let Some(uid) = self.users.iter().find(|&&u| u != me) {
            return Some(format!("user {} (uid {uid}) through an ACL", user_name(*uid)));
        }
        let group = self.groups.iter().find(|&&g| !(g == my_group && group_is_mine_alone(g, me)))?;
        Some(format!("group {} through an ACL", group_name(*group)))
    }
}

/// The writers named in `path`'s access ACL (`system.posix_acl_access`),
/// after its mask; `None` if it has no ACL beyond its mode.
fn acl_writers(path: &Path) -> Option<AclWriters> {
    use std::os::unix::ffi::OsStrExt;
    const USER: u16 = 0x02;
    const GROUP_OBJ: u16 = 0x04;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const WRITE: u16 = 0x02;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = [0u8; 4096];
    // SAFETY: a NUL-ended path and attribute name, and a buffer of the
    // length given.
    let n = unsafe {
        libc::getxattr(name.as_ptr(), c"system.posix_acl_access".as_ptr(), buf.as_mut_ptr().cast(), buf.len())
    };
    if n < 4 {
        return None;
    }
    // A 4-byte version, then entries of (tag u16, perm u16, id u32).
    let entries: Vec<(u16, u16, u32)> = buf[4..n as usize]
        .chunks_exact(8)
        .map(|e| {
            let tag = u16::from_le_bytes([e[0], e[1]]);
            let perm = u16::from_le_bytes([e[2], e[3]]);
            (tag, perm, u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
        })
        .collect();
    let mask = entries.iter().find(|e| e.0 == MASK).map_or(0o7, |e| e.1);
    let writes = |perm: u16| perm & mask & WRITE != 0;
    Some(AclWriters {
        users: entries.iter().filter(|e| e.0 == USER && writes(e.1)).map(|e| e.2).collect(),
        groups: entries.iter().filter(|e| e.0 == GROUP && writes(e.1)).map(|e| e.2).collect(),
        owning_group: entries.iter().any(|e| e.0 == GROUP_OBJ && writes(e.1)),
    })
    .map(|w| w.with_owning_group(path))
}

impl AclWriters {
    /// Counts the owning group's entry as a named group.
    fn with_owning_group(mut self, path: &Path) -> AclWriters {
        if self.owning_group {
            if let Ok(meta) = std::fs::metadata(path) {
                self.groups.push(meta.gid());
            }
        }
        self
    }
}

/// True if no one but user `me` is in group `gid`: no other member, and no
/// other user's primary group.
fn group_is_mine_alone(gid: u32, me: u32) -> bool {
    let Ok(Some(group)) = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) else { return false };
    let my_name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me)).ok().flatten().map(|u| u.name);
    if group.mem.iter().any(|m| Some(m) != my_name.as_ref()) {
        return false;
    }
    !primary_group_users(gid).iter().any(|&uid| uid != me)
}

/// The users whose primary group is `gid`, from the user database.
fn primary_group_users(gid: u32) -> Vec<u32> {
    let mut users = Vec::new();
    // SAFETY: the user database is walked from one thread at a time (the
    // lock), each entry read before the next call.
    static WALK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _walking = WALK.lock();
    unsafe {
        libc::setpwent();
        loop {
            let entry = libc::getpwent();
            if entry.is_null() {
                break;
            }
            if (*entry).pw_gid == gid {
                users.push((*entry).pw_uid);
            }
        }
        libc::endpwent();
    }
    users
}

/// The name of group `gid`, or its number.
fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name)
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
