//! A `corral wait` asleep in a small program, `corral-wake`.
//!
//! A thousand `corral wait`s on one run are a thousand processes of a
//! 20 MB program, each with what its start and its first look touched
//! mapped (15 MB resident each, measured). When the run ends, most of what
//! each one costs is the kernel unmapping all that as it exits. A wait
//! with nothing left to do but be told of its runs' ends hands itself over
//! to `corral-wake`: the same process, its program replaced by one that
//! only polls the store's bell and the pidfds it was handed, reads the
//! ends written beside the runs (`store::ended_file`) and prints them.
//!
//! It hands over only when nothing but those ends can end it well: every
//! run waited on is at work under a shepherd it follows, none has ended,
//! no slot is to be taken back and nothing can cancel it (see
//! [`super::Watcher::hand_over`]). Asleep, it follows those shepherds'
//! exits only (one gone after its runs' ends were written is let go).
//! Anything else (one of them gone without its run's end, the
//! deadline, a bell it cannot listen to again) replaces it with the
//! `corral wait` it came from, given the time left, which heals and looks
//! as every wait does. It heals nothing else, by time or by another
//! process's exit: the shepherds it follows heal the store while their
//! agents work, as do launches, the tray and every wait awake, and a
//! thousand waits must not come back to heal at every run's end.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::process::{self, Bell};
use crate::run::Run;
use crate::store::read_ended;

/// The program a wait sleeps in, installed beside `corral`.
pub const PROGRAM: &str = "corral-wake";

/// What a `corral wait` needs to hand itself over: set by the command
/// line, which knows where its programs are and what it prints.
#[derive(Debug, Clone)]
pub struct HandOver {
    /// `corral-wake`.
    pub wake: PathBuf,
    /// `corral`, to come back to.
    pub corral: PathBuf,
    /// The runs are printed as JSON.
    pub json: bool,
}

impl HandOver {
    /// `corral-wake` beside the running `corral`, if it is there.
    pub fn beside_this_program(json: bool) -> Option<HandOver> {
        let corral = std::env::current_exe().ok()?;
        let wake = corral.with_file_name(PROGRAM);
        wake.is_file().then_some(HandOver { wake, corral, json })
    }
}

/// A wait handed over: what `corral-wake` is given, as its one argument
/// (JSON).
#[derive(Debug, Serialize, Deserialize)]
pub struct Asleep {
    /// The store's bell.
    pub bell: PathBuf,
    /// The descriptor listening to it, kept open across the `exec`.
    pub bell_fd: RawFd,
    /// The runs' shepherds, followed by pidfds kept open across the `exec`.
    pub shepherds: Vec<Shepherd>,
    /// The folders of the runs waited on, in the order asked.
    pub runs: Vec<PathBuf>,
    /// When the wait gives up, as the monotonic clock reads (nanoseconds).
    pub deadline_ns: Option<u64>,
    /// The wait to come back to, program first (`corral wait IDS
    /// [--json]`); the time left is added as `--timeout`.
    pub back: Vec<String>,
    /// The runs are printed as JSON.
    pub json: bool,
}

/// A shepherd of runs waited on, followed by its pidfd: its exit sends the
/// wait back unless each of its runs' ends is written (it exits just after
/// them).
#[derive(Debug, Serialize, Deserialize)]
pub struct Shepherd {
    /// The pidfd.
    pub fd: RawFd,
    /// Its runs, as indexes into [`Asleep::runs`].
    pub runs: Vec<usize>,
}

/// What woke a wait asleep.
#[derive(Debug)]
pub enum Woken {
    /// Every run waited on ended, as their ends say, in the order asked.
    Ended(Vec<Run>),
    /// Anything else: the wait goes back to `corral wait`.
    Back,
}

/// Why `corral-wake` cannot sleep: it was not started by a `corral wait`.
#[derive(Debug, thiserror::Error)]
pub enum AsleepError {
    /// Its argument is not what a `corral wait` hands over.
    #[error("corral-wake is started by `corral wait` as it hands its wait over, not by hand: {0}")]
    NotHandedOver(String),
}

impl Asleep {
    /// The wait `corral-wake` was handed, from its one argument.
    pub fn from_arg(arg: Option<&OsStr>) -> Result<Asleep, AsleepError> {
        let arg = arg.ok_or_else(|| AsleepError::NotHandedOver("no wait given".into()))?;
        let text = arg.to_str().ok_or_else(|| AsleepError::NotHandedOver("its argument is not UTF-8".into()))?;
        serde_json::from_str(text).map_err(|e| AsleepError::NotHandedOver(e.to_string()))
    }

    /// Replaces this process with `corral-wake`, given this wait and the
    /// descriptors `keep` (the bell's and the followed pidfds, named in
    /// it); returns only if that fails, with every descriptor as it was.
    pub fn exec(&self, wake: &Path, keep: &[BorrowedFd<'_>]) -> io::Error {
        let arg = match serde_json::to_string(self) {
            Ok(arg) => arg,
            Err(e) => return io::Error::other(e),
        };
        let error = match keep.iter().try_for_each(|fd| process::keep_across_exec(*fd, true)) {
            Ok(()) => process::exec(wake, &[OsString::from(PROGRAM), OsString::from(arg)]),
            Err(e) => e,
        };
        for fd in keep {
            let _ = process::keep_across_exec(*fd, false);
        }
        error
    }

    /// Sleeps until every run's end is written (told by the bell), a
    /// followed process exits, or the deadline passes.
    pub fn sleep(&self) -> io::Result<Woken> {
        let mut bell = Bell::adopt(process::adopt_inherited(self.bell_fd)?, &self.bell)?;
        let mut followed: Vec<(OwnedFd, &[usize])> = self
            .shepherds
            .iter()
            .map(|s| Ok((process::adopt_inherited(s.fd)?, s.runs.as_slice())))
            .collect::<io::Result<_>>()?;
        // Closed at the next `exec`, as every descriptor of Corral's is.
        for fd in followed.iter().map(|(fd, _)| fd.as_fd()).chain([bell.as_fd()]) {
            process::keep_across_exec(fd, false)?;
        }
        // Which runs' ends were read here already.
        let mut ended = vec![false; self.runs.len()];
        loop {
            let timeout = self.time_left();
            if timeout == Some(Duration::ZERO) {
                return Ok(Woken::Back);
            }
            let fds: Vec<BorrowedFd<'_>> =
                [bell.as_fd()].into_iter().chain(followed.iter().map(|(fd, _)| fd.as_fd())).collect();
            let ready = process::wait_readable(&fds, timeout)?;
            drop(fds);
            if ready[0] {
                // Ends written are the answer, whoever exited since (a
                // shepherd exits just after its run's end: a crowd of
                // waits is woken by both), with no need to listen on (a
                // thousand waits opening the bell again queue on it). Else
                // it is listened to again before the ends are read again:
                // a ring in between is not missed.
                let mut ends: Vec<Option<Run>> = self.runs.iter().map(|dir| read_ended(dir)).collect();
                if ends.iter().any(Option::is_none) {
                    if bell.rearm().is_err() {
                        return Ok(Woken::Back);
                    }
                    ends = self.runs.iter().map(|dir| read_ended(dir)).collect();
                }
                // A run brought back (a reply) after its end was read here
                // works under a shepherd this does not follow.
                if ends.iter().zip(&ended).any(|(end, &was)| was && end.is_none()) {
                    return Ok(Woken::Back);
                }
                if let Some(runs) = ends.iter().cloned().collect::<Option<Vec<Run>>>() {
                    return Ok(Woken::Ended(runs));
                }
                ended = ends.iter().map(Option::is_some).collect();
            }
            // A shepherd gone after its runs' ends were written is done
            // with; one gone without them leaves a run to heal.
            let mut exited = ready[1..].iter();
            let mut lost = false;
            followed.retain(|(_, runs)| {
                let gone = exited.next().is_some_and(|&gone| gone);
                for &run in runs.iter().filter(|_| gone) {
                    let end = self.runs.get(run).and_then(|dir| read_ended(dir));
                    lost |= end.is_none();
                    if let Some(was) = ended.get_mut(run) {
                        *was |= end.is_some();
                    }
                }
                !gone
            });
            if lost {
                return Ok(Woken::Back);
            }
        }
    }

    /// Replaces this process with the `corral wait` it came from, given
    /// the time left; returns only if that fails.
    pub fn go_back(&self) -> io::Error {
        let Some(program) = self.back.first() else {
            return io::Error::new(io::ErrorKind::InvalidInput, "no wait to go back to");
        };
        let mut args: Vec<OsString> = self.back.iter().map(OsString::from).collect();
        if let Some(left) = self.time_left() {
            args.extend([OsString::from("--timeout"), OsString::from(format!("{:.3}", left.as_secs_f64()))]);
        }
        process::exec(Path::new(program), &args)
    }

    /// The time left before the deadline; `None` without one.
    fn time_left(&self) -> Option<Duration> {
        self.deadline_ns.map(|at| Duration::from_nanos(at).saturating_sub(process::monotonic_now()))
    }
}
