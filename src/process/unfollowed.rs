//! Opening what an agent may have written, as Corral reads or binds it
//! outside the agent's sandbox: never through a link the agent left, never
//! blocking on a FIFO it made, only a regular file, to a bound; and a
//! place pinned by its descriptor, so a later swap of a name for a link
//! changes nothing of what was opened.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` to read if it is a regular file and its last name is no
/// link: a FIFO or device is refused at once (`InvalidInput`), never
/// waited on.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", path.display())));
    }
    Ok(file)
}

/// The first `max` bytes of regular file `path` as text (see
/// [`open_regular`]); what is not UTF-8 is replaced.
pub fn read_regular(path: &Path, max: u64) -> io::Result<String> {
    let mut bytes = Vec::new();
    open_regular(path)?.take(max).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A place (folder or file) opened as it is now, by a path that holds no
/// link at all (`openat2` with `RESOLVE_NO_SYMLINKS`): `ELOOP` where any
/// part of it is a link. The descriptor names that place whatever is later
/// renamed or linked in its stead.
pub fn pin(path: &Path) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    // SAFETY: a zeroed open_how is "no flags"; the fields set are integers.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    // No O_NOFOLLOW: with it, a link as the last name would be opened
    // itself rather than refused.
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with a NUL-terminated path and a valid open_how of
    // its size; the descriptor returned is owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `relative` opened to read from under the folder `root` is open on,
/// never leaving it and following no link on the way or at the end
/// (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): `ELOOP`
/// where any part is a link, whatever was swapped in since `root` was
/// opened. Never blocks on a FIFO.
pub fn open_beneath(root: &File, relative: &Path) -> io::Result<File> {
    let name = std::ffi::CString::new(relative.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    // SAFETY: a zeroed open_how is "no flags"; the fields set are integers.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 on a live folder descriptor with a NUL-terminated
    // path and a valid open_how of its size; the descriptor returned is
    // owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by no one else.
    Ok(unsafe { File::from_raw_fd(fd as RawFd) })
}

/// The names in the folder `dir` is open on (that folder, whatever its
/// path names now).
pub fn names_in(dir: &File) -> io::Result<Vec<std::ffi::OsString>> {
    let listed = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    listed.map(|entry| entry.map(|e| e.file_name())).collect()
}

/// Whether `error` is [`pin`]'s refusal of a path that holds a link.
pub fn is_a_link(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

/// `fds` moved to descriptors `first`, `first + 1`, … of a child that is
/// about to exec, open across the exec: made ready before the fork (each
/// copied above where they go, so none is overwritten by another's move).
#[derive(Debug)]
pub struct Handed {
    /// Copies at or above `first + fds.len()`, in order.
    above: Vec<OwnedFd>,
    first: RawFd,
}

impl Handed {
    /// Prepares `fds` to be handed at `first`, `first + 1`, ….
    pub fn new(fds: &[OwnedFd], first: RawFd) -> io::Result<Handed> {
        let floor = first + fds.len() as RawFd;
        let above = fds
            .iter()
            .map(|fd| {
                // SAFETY: F_DUPFD_CLOEXEC on a live descriptor returns a new one owned here.
                let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
                if copy < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    // SAFETY: just made, owned by no one else.
                    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
                }
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Handed { above, first })
    }

    /// How many descriptors are handed.
    pub fn len(&self) -> usize {
        self.above.len()
    }

    /// True if none is.
    pub fn is_empty(&self) -> bool {
        self.above.is_empty()
    }

    /// In the child, between fork and exec: each put in its place, open
    /// across the exec. Returns false if one could not be.
    ///
    /// # Safety
    /// Only between fork and exec: `dup2` is async-signal-safe.
    pub unsafe fn put_in_place(&self) -> bool {
        self.above.iter().enumerate().all(|(i, fd)| {
            // SAFETY: dup2 of a live descriptor; the copy is open across exec.
            unsafe { libc::dup2(fd.as_raw_fd(), self.first + i as RawFd) != -1 }
        })
    }
}

/// Hands `handed` to `command`'s child at their places (see [`Handed`]).
pub fn hand_to(command: &mut std::process::Command, handed: Handed) {
    use std::os::unix::process::CommandExt;
    if handed.is_empty() {
        return;
    }
    // SAFETY: only dup2, async-signal-safe, runs between fork and exec.
    unsafe {
        command.pre_exec(move || if handed.put_in_place() { Ok(()) } else { Err(io::Error::last_os_error()) });
    }
}
