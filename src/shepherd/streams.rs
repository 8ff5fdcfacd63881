//! The agent's two output streams: stdout read into lines (for the
//! adapter), stderr into whole-line transcript events and a tail kept for
//! error messages; both copied to the raw logs when they are asked for.
//!
//! Reads never block: the supervisor polls the pipes and reads what is
//! there. The pipes are a turn's; the logs and the read buffer outlive it.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::lines::LineSplitter;
use super::spawn::RunLogs;
use crate::process::{self, Readiness, StartedAgent};

/// Most bytes of one stdout line kept in memory; the rest is counted.
pub const MAX_LINE: usize = 4 << 20;
/// Most bytes of stderr in one transcript event.
const STDERR_EVENT: usize = 16 << 10;
/// Bytes of stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// The agent's stdout and stderr, as far as they are read.
pub(super) struct Streams {
    stdout: Option<File>,
    stderr: Option<File>,
    splitter: LineSplitter,
    stderr_tail: Vec<u8>,
    /// Stderr read but not yet a whole line.
    stderr_partial: Vec<u8>,
    logs: RunLogs,
    buf: Vec<u8>,
}

/// What one look at stderr found.
#[derive(Default)]
pub(super) struct StderrRead {
    /// Anything was read (the agent is alive and talking).
    pub saw_data: bool,
    /// Whole lines, at most [`STDERR_EVENT`] bytes each: one transcript
    /// event per entry.
    pub events: Vec<String>,
}

impl Streams {
    /// The streams of `child`, the first turn's agent, copied to `logs`.
    pub fn new(child: StartedAgent, logs: RunLogs) -> io::Result<Streams> {
        let (stdout, stderr) = take_pipes(child)?;
        Ok(Streams {
            stdout: Some(stdout),
            stderr: Some(stderr),
            splitter: LineSplitter::new(MAX_LINE),
            stderr_tail: Vec::new(),
            stderr_partial: Vec::new(),
            logs,
            buf: vec![0; 64 * 1024],
        })
    }

    /// The streams of the next turn's agent: nothing of the last turn's
    /// carries over but the logs.
    pub fn next_turn(&mut self, child: StartedAgent) -> io::Result<()> {
        let (stdout, stderr) = take_pipes(child)?;
        self.stdout = Some(stdout);
        self.stderr = Some(stderr);
        self.splitter = LineSplitter::new(MAX_LINE);
        self.stderr_tail.clear();
        self.stderr_partial.clear();
        Ok(())
    }

    /// The pipes still open, to poll.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.stdout.iter().chain(&self.stderr).map(AsFd::as_fd)
    }

    /// Reads once from stdout: what it holds is logged and each line it
    /// completes goes to `on_line(bytes, dropped)`. At the end of the
    /// stream a last line without LF counts too.
    pub fn read_stdout(&mut self, mut on_line: impl FnMut(&[u8], u64)) -> io::Result<Readiness> {
        let Some(out) = self.stdout.as_mut() else { return Ok(Readiness::Closed) };
        let read = process::read_available(out, &mut self.buf)?;
        match read {
            Readiness::Data(n) => {
                self.logs.stdout.write(&self.buf[..n]);
                self.splitter.feed(&self.buf[..n], &mut on_line);
            }
            Readiness::Empty => {}
            Readiness::Closed => {
                self.stdout = None;
                self.finish_stdout(on_line);
            }
        }
        Ok(read)
    }

    /// True while stdout is open.
    pub fn stdout_open(&self) -> bool {
        self.stdout.is_some()
    }

    /// The agent is gone: its last line is complete even without a newline
    /// (though a grandchild may still hold the pipe open).
    pub fn finish_stdout(&mut self, on_line: impl FnMut(&[u8], u64)) {
        let mut splitter = std::mem::replace(&mut self.splitter, LineSplitter::new(MAX_LINE));
        splitter.finish(on_line);
    }

    /// Reads all stderr holds: its tail is kept, its whole lines returned.
    pub fn read_stderr(&mut self) -> io::Result<StderrRead> {
        let mut read = StderrRead::default();
        loop {
            let Some(err) = self.stderr.as_mut() else { return Ok(read) };
            match process::read_available(err, &mut self.buf)? {
                Readiness::Data(n) => {
                    read.saw_data = true;
                    self.logs.stderr.write(&self.buf[..n]);
                    self.stderr_tail.extend_from_slice(&self.buf[..n]);
                    let excess = self.stderr_tail.len().saturating_sub(STDERR_TAIL);
                    self.stderr_tail.drain(..excess);
                    self.stderr_partial.extend_from_slice(&self.buf[..n]);
                    self.stderr_lines(false, &mut read.events);
                }
                Readiness::Empty => return Ok(read),
                Readiness::Closed => {
                    self.stderr = None;
                    self.stderr_lines(true, &mut read.events);
                    return Ok(read);
                }
            }
        }
    }

    /// What stderr is left that is not a whole line yet: the run is over.
    pub fn finish_stderr(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        self.stderr_lines(true, &mut events);
        events
    }

    /// The last bytes the agent wrote to stderr, for its error message.
    pub fn stderr_tail(&self) -> String {
        String::from_utf8_lossy(&self.stderr_tail).into_owned()
    }

    /// Closes the raw logs: the run is over.
    pub fn close_logs(&mut self) {
        self.logs.close();
    }

    /// Whole stderr lines become transcript events; a line longer than
    /// [`STDERR_EVENT`] is cut there, and at the stream's end the rest
    /// counts as a line.
    fn stderr_lines(&mut self, at_end: bool, events: &mut Vec<String>) {
        let partial = &mut self.stderr_partial;
        let whole = match partial.iter().rposition(|&b| b == b'\n') {
            Some(at) => at + 1,
            None if at_end || partial.len() >= STDERR_EVENT => partial.len(),
            None => return,
        };
        let bytes: Vec<u8> = partial.drain(..whole).collect();
        let text = String::from_utf8_lossy(&bytes);
        for piece in text.as_bytes().chunks(STDERR_EVENT) {
            let piece = String::from_utf8_lossy(piece);
            let piece = piece.trim_end_matches('\n');
            if !piece.is_empty() {
                events.push(piece.to_string());
            }
        }
    }
}

fn take_pipes(child: StartedAgent) -> io::Result<(File, File)> {
    process::make_nonblocking(child.stdout.as_fd())?;
    process::make_nonblocking(child.stderr.as_fd())?;
    // Reaping is done with waitpid(-1), for the agent and every orphan alike.
    Ok((child.stdout, child.stderr))
}
