//! Handing an open descriptor to another process over a Unix socket
//! (`SCM_RIGHTS`): how a sandbox's listening socket, made inside its own
//! network, reaches the shepherd outside it.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// Sends `fd` over `stream` (with one byte, as a message must carry some).
pub fn send_fd(stream: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    let fds = [fd.as_raw_fd()];
    let message = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(stream.as_raw_fd(), &[IoSlice::new(b"1")], &message, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`]; `None` if the sender
/// closed without sending one.
pub fn recv_fd(stream: &UnixStream) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut buffer = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut byte)];
    let message = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut buffer), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    for cmsg in message.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed `fd` in this process;
                // nothing else owns it.
                return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
    }
    Ok(None)
}
