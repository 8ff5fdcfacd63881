//! Handing open descriptors to another process over a Unix socket
//! (`SCM_RIGHTS`): how a sandbox's listening socket, made inside its own
//! network, reaches the shepherd outside it, and how a `corral` inside a
//! sandbox hands its standard descriptors to the one run for it outside.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// Sends `fd` over `stream` (with one byte, as a message must carry some).
pub fn send_fd(stream: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    send_fds(stream, &[fd])
}

/// Sends `fds` over `stream` in one message.
pub fn send_fds(stream: &UnixStream, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let fds: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let message = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(stream.as_raw_fd(), &[IoSlice::new(b"1")], &message, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`]; `None` if the sender
/// closed without sending one.
pub fn recv_fd(stream: &UnixStream) -> io::Result<Option<OwnedFd>> {
    Ok(recv_fds(stream, 1)?.into_iter().next())
}

/// Receives the descriptors (at most `most`) of one message sent with
/// [`send_fds`]; none if the sender closed without sending any.
pub fn recv_fds(stream: &UnixStream, most: usize) -> io::Result<Vec<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut buffer = vec![0u8; nix::sys::socket::cmsg_space::<RawFd>() * most.max(1)];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let message = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut buffer), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    let mut received = Vec::new();
    for cmsg in message.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            // SAFETY: the kernel just installed these in this process;
            // nothing else owns them.
            received.extend(fds.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
        }
    }
    Ok(received)
}

/// The pid of the process at the other end of `stream`, as the kernel
/// recorded it when it connected (`SO_PEERCRED`), in this process's pid
/// namespace.
pub fn peer_pid(stream: &UnixStream) -> io::Result<i32> {
    let creds = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(creds.pid())
}
