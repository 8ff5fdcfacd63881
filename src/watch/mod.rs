//! Waiting for the store to change, told by the kernel.
//!
//! Readers (`wait`, `tail --follow`, a waiting parent's shepherd, the app,
//! the MCP server) sleep in `poll(2)` until something happens: another
//! process commits (every commit rings the store's bell, a FIFO: see
//! `process::Bell`; where there is none, inotify on the database's folder
//! tells of writes to `corral.db-wal`), a process whose death leaves the
//! store untrue exits (a pidfd for each shepherd, promoter and waiter of
//! the active runs), or another thread wakes them. Then `PRAGMA
//! data_version` on their own connection says whether another connection
//! committed. A process that sleeps on a store where nothing happens makes
//! no wakeups.
//! Healing stays, as a safety net every [`HEAL_EVERY`] while anything is
//! at work (a run not ended, a merge being made; none when nothing is: no
//! wakeups at all), and at once when a followed process dies.
//!
//! The desktop processes (the tray, the window) follow the store with a
//! [`Follower`] (in `follower`): it heals as every waiting process must,
//! and tells which runs changed status and whose transcripts grew, so each
//! process redraws only what changed.

pub mod asleep;
mod follower;
pub mod limit_wake;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::process::{self, Bell, FolderWatch, PidFd, Waker};
use crate::run::Run;
use crate::store::{read_ended, Store, StoreError};
use crate::upkeep::heal::{heal, HealError, HEAL_EVERY, HEAL_EVERY_UNTOLD};
use crate::upkeep::queue::ShepherdCommand;

pub use follower::{Change, Follower, LOOK_AT_MOST_EVERY};

/// How often the data version is read where the kernel cannot tell of
/// commits (no bell, and no inotify instance could be made).
pub const POLL_UNTOLD: Duration = Duration::from_millis(50);

/// Why a [`Watcher::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The store changed, a followed process exited, a heal is due, or the
    /// waker woke: look again.
    Changed,
    /// The extra descriptor at this index is readable.
    Extra(usize),
    /// The deadline passed.
    Deadline,
}

/// Watches one connection's view of the database for commits by others,
/// and the processes whose death must be healed. Runtime state only.
pub struct Watcher {
    last: i64,
    /// How commits are told.
    told: Told,
    /// Exits to be told of.
    followed: Vec<PidFd>,
    /// Nothing is at work in the store (no run not ended, no merge being
    /// made: see `Store::anything_at_work`), as of the last look.
    at_rest: bool,
    /// The kernel cannot tell of exits here (no pidfds): heal often.
    untold: bool,
    /// A followed process exited since the last heal.
    died: bool,
    healed_at: Option<Instant>,
    waker: Option<Waker>,
    /// The store's files were written at this moment and no commit was seen
    /// since: look again after each of [`RECHECKS`] (the index).
    recheck: Option<(Instant, usize)>,
    /// The folders of the runs whose ends, written beside them, end this
    /// watch (see [`Watcher::until_ended`]); empty: none.
    ends_of: Vec<std::path::PathBuf>,
    /// Those runs, once every one's end was read.
    ended: Option<Vec<Run>>,
}

/// How a [`Watcher`] is told of other processes' commits.
enum Told {
    /// The store's bell, rung after each commit: what it tells is visible.
    Bell(Bell),
    /// Writes to the database's files (inotify), which come just before
    /// the commit shows.
    Files(FolderWatch),
    /// Neither: the data version is read every [`POLL_UNTOLD`].
    Untold,
}

impl Told {
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Told::Bell(bell) => Some(bell.as_fd()),
            Told::Files(files) => Some(files.as_fd()),
            Told::Untold => None,
        }
    }
}

/// When to look again after the store's files were written without a
/// commit showing yet, counted from the write: the commit shows within
/// microseconds; a checkpoint, or a process opening the database, writes
/// the files without committing, and is let go after these.
const RECHECKS: [Duration; 5] = [
    Duration::from_millis(1),
    Duration::from_millis(3),
    Duration::from_millis(10),
    Duration::from_millis(30),
    Duration::from_millis(100),
];

impl Watcher {
    /// Starts watching from the store's current state.
    pub fn new(store: &Store) -> Result<Watcher, StoreError> {
        // Listening starts before the version is read: a commit in between
        // is told, never missed.
        let told = match Bell::listen(&store.home().bell()) {
            Ok(bell) => Told::Bell(bell),
            Err(bell) => match FolderWatch::new(store.home().data_dir(), "corral.db") {
                Ok(files) => Told::Files(files),
                Err(e) => {
                    tracing::info!(
                        "cannot be told of the store's commits (no bell: {bell}; no inotify: {e}); reading it every {POLL_UNTOLD:?}"
                    );
                    Told::Untold
                }
            },
        };
        let mut watcher = Watcher {
            last: store.data_version()?,
            told,
            followed: Vec::new(),
            at_rest: false,
            untold: false,
            died: false,
            healed_at: None,
            waker: None,
            recheck: None,
            ends_of: Vec::new(),
            ended: None,
        };
        watcher.follow(store)?;
        Ok(watcher)
    }

    /// Lets `waker` (from another thread) end a wait early.
    pub fn with_waker(mut self, waker: Waker) -> Watcher {
        self.waker = Some(waker);
        self
    }

    /// Also ends a wait when every one of runs `ids` ended, as told by the
    /// ends written beside them (`store::ended_file`) before the bell
    /// rang: read from those files, without a read of the store. Each ring
    /// costs a look at the files; a run that ended without one is found
    /// by the store, as before.
    pub fn until_ended(mut self, store: &Store, ids: &[String]) -> Watcher {
        self.watch_ends_of(store, ids);
        self
    }

    /// As [`Watcher::until_ended`], from now on: the runs still to end.
    pub fn watch_ends_of(&mut self, store: &Store, ids: &[String]) {
        self.ends_of = ids.iter().map(|id| store.home().run_dir(id)).collect();
        self.ended = None;
    }

    /// The runs of [`Watcher::until_ended`], once a wait found them all
    /// ended (and said [`Wake::Changed`]).
    pub fn take_ended(&mut self) -> Option<Vec<Run>> {
        self.ended.take()
    }

    /// Every followed run's end, if each is written.
    fn read_ends(&self) -> Option<Vec<Run>> {
        if self.ends_of.is_empty() {
            return None;
        }
        self.ends_of.iter().map(|dir| read_ended(dir)).collect()
    }

    /// Heals the store if a followed process exited, or the safety net is
    /// due (or this is the first time); true if healing committed anything
    /// (which this connection's data version does not show).
    pub fn heal_if_due(&mut self, store: &mut Store, shepherd: &ShepherdCommand) -> Result<bool, HealError> {
        if !(self.died || self.healed_at.is_none_or(|at| at.elapsed() >= self.heal_every())) {
            return Ok(false);
        }
        self.heal_now(store, shepherd)
    }

    /// Heals the store now, whatever is due (a waiter that just freed its
    /// run's slot hands it on); true if healing committed anything.
    pub fn heal_now(&mut self, store: &mut Store, shepherd: &ShepherdCommand) -> Result<bool, HealError> {
        self.died = false;
        self.healed_at = Some(Instant::now());
        let changed = heal(store, shepherd)?.changed();
        self.follow(store)?;
        Ok(changed)
    }

    /// Counts a heal done elsewhere (opening the store healed it).
    pub fn healed_now(&mut self) {
        self.healed_at = Some(Instant::now());
    }

    /// When the next heal by time is due: never while the store is at
    /// rest (nothing can turn untrue unseen: every change commits).
    fn heal_at(&self) -> Option<Instant> {
        self.healed_at.filter(|_| !self.at_rest).map(|at| at + self.heal_every())
    }

    fn heal_every(&self) -> Duration {
        if self.untold {
            HEAL_EVERY_UNTOLD
        } else {
            HEAL_EVERY
        }
    }

    /// Blocks until another connection commits, a followed process exits,
    /// the waker wakes, a heal is due, or `deadline` passes. Returns false
    /// only for the deadline.
    pub fn changed_before(&mut self, store: &Store, deadline: Option<Instant>) -> Result<bool, StoreError> {
        Ok(self.wait(store, deadline, &[])? != Wake::Deadline)
    }

    /// As [`Watcher::changed_before`], also woken when one of `extra`
    /// becomes readable (a shepherd's signal pipes).
    pub fn wait(
        &mut self,
        store: &Store,
        deadline: Option<Instant>,
        extra: &[BorrowedFd<'_>],
    ) -> Result<Wake, StoreError> {
        loop {
            let version = store.data_version()?;
            if version != self.last {
                self.last = version;
                self.recheck = None;
                self.follow(store)?;
                return Ok(Wake::Changed);
            }
            if self.died {
                return Ok(Wake::Changed);
            }
            let heal_at = self.heal_at();
            let wake_at = [deadline, heal_at].into_iter().flatten().min();
            let mut timeout = match wake_at {
                Some(at) => match at.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ if deadline == wake_at => return Ok(Wake::Deadline),
                    _ => return Ok(Wake::Changed),
                },
                None => None,
            };
            // A file written but no commit seen yet: the writer updates the
            // WAL index (shared memory, which the kernel does not report)
            // just after its last write; look again shortly.
            if let Some((at, step)) = self.recheck {
                match RECHECKS.get(step) {
                    Some(after) => {
                        let left = (at + *after).saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            self.recheck = Some((at, step + 1));
                            continue;
                        }
                        timeout = Some(timeout.map_or(left, |t| t.min(left)));
                    }
                    None => self.recheck = None,
                }
            }
            if let Told::Untold = self.told {
                timeout = Some(timeout.map_or(POLL_UNTOLD, |t| t.min(POLL_UNTOLD)));
            }
            let mut fds = Vec::with_capacity(self.followed.len() + extra.len() + 2);
            fds.extend_from_slice(extra);
            fds.extend(self.told.fd());
            fds.extend(self.waker.as_ref().map(Waker::fd));
            let followed_from = fds.len();
            fds.extend(self.followed.iter().map(AsFd::as_fd));
            let ready = process::wait_readable(&fds, timeout).map_err(|e| StoreError::Watch(e.to_string()))?;
            drop(fds);
            if let Some(index) = ready[..extra.len()].iter().position(|&r| r) {
                return Ok(Wake::Extra(index));
            }
            let mut at = extra.len();
            let rung = self.told.fd().is_some() && ready[at];
            match &mut self.told {
                Told::Bell(bell) => {
                    if ready[at] {
                        // Rung: listen again before looking, so a ring
                        // while it looks is not missed.
                        if let Err(e) = bell.rearm() {
                            tracing::info!(
                                "cannot listen to the store's bell again ({e}); reading it every {POLL_UNTOLD:?}"
                            );
                            self.told = Told::Untold;
                        }
                    }
                    at += 1;
                }
                Told::Files(files) => {
                    if ready[at] && files.drain() {
                        self.recheck = Some((Instant::now(), 0));
                    }
                    at += 1;
                }
                Told::Untold => {}
            }
            if rung {
                if let Some(runs) = self.read_ends() {
                    self.ended = Some(runs);
                    return Ok(Wake::Changed);
                }
            }
            if let Some(waker) = &self.waker {
                if ready[at] && waker.drain() {
                    return Ok(Wake::Changed);
                }
            }
            let exited: Vec<bool> = ready[followed_from..].to_vec();
            if exited.iter().any(|&e| e) {
                let mut index = 0;
                self.followed.retain(|_| {
                    let keep = !exited[index];
                    index += 1;
                    keep
                });
                self.died = true;
            }
        }
    }

    /// Hands the wait on `runs` over to `corral-wake` (see [`asleep`]), if
    /// their ends, written beside them, are all that can end it: the bell
    /// tells of commits, every run is at work under a shepherd this
    /// watcher follows, none has ended, and nothing is left to look at
    /// again (no followed process gone, no commit being read). Returns
    /// only if the wait stays here: why it does (`None` when it was never
    /// to be handed over).
    pub fn hand_over(
        &self,
        store: &Store,
        runs: &[Run],
        deadline: Option<Instant>,
        over: &asleep::HandOver,
    ) -> Option<std::io::Error> {
        let Told::Bell(bell) = &self.told else { return None };
        if self.untold || self.died || self.recheck.is_some() || self.waker.is_some() {
            return None;
        }
        if runs.is_empty() || runs.iter().any(|run| run.status.is_terminal()) {
            return None;
        }
        // Only the runs' own shepherds: what else exits is healed by the
        // processes at work (each shepherd heals while its agent works),
        // not by a thousand waits coming back at every run's end.
        let shepherd_of = |run: &Run| {
            let shepherd =
                run.shepherd_pid.zip(run.shepherd_start).map(|(pid, start)| process::ProcessId { pid, start });
            self.followed.iter().find(|f| Some(f.process) == shepherd)
        };
        let mut shepherds: Vec<(&PidFd, Vec<usize>)> = Vec::with_capacity(runs.len());
        for (index, run) in runs.iter().enumerate() {
            let shepherd = shepherd_of(run)?;
            match shepherds.iter_mut().find(|(s, _)| s.process == shepherd.process) {
                Some((_, of)) => of.push(index),
                None => shepherds.push((shepherd, vec![index])),
            }
        }
        // A process that exited since it was followed is healed here first.
        let pidfds: Vec<BorrowedFd<'_>> = self.followed.iter().map(AsFd::as_fd).collect();
        if process::wait_readable(&pidfds, Some(Duration::ZERO)).map_or(true, |ready| ready.contains(&true)) {
            return None;
        }
        let pidfds: Vec<BorrowedFd<'_>> = shepherds.iter().map(|(s, _)| s.as_fd()).collect();
        // Named in JSON, so a program whose path is not UTF-8 stays here.
        let mut back = vec![over.corral.to_str()?.to_string(), "wait".into()];
        back.extend(runs.iter().map(|run| run.id.clone()));
        if over.json {
            back.push("--json".into());
        }
        let asleep = asleep::Asleep {
            bell: store.home().bell(),
            bell_fd: bell.as_fd().as_raw_fd(),
            shepherds: shepherds
                .iter()
                .map(|(s, runs)| asleep::Shepherd { fd: s.as_fd().as_raw_fd(), runs: runs.clone() })
                .collect(),
            runs: runs.iter().map(|run| store.home().run_dir(&run.id)).collect(),
            deadline_ns: deadline
                .map(|at| (process::monotonic_now() + at.saturating_duration_since(Instant::now())).as_nanos() as u64),
            back,
            json: over.json,
        };
        let keep: Vec<BorrowedFd<'_>> = [bell.as_fd()].into_iter().chain(pidfds).collect();
        Some(asleep.exec(&over.wake, &keep))
    }

    /// Follows the exits of the processes the store depends on now.
    fn follow(&mut self, store: &Store) -> Result<(), StoreError> {
        if self.untold {
            return Ok(());
        }
        let wanted = store.processes_to_follow()?;
        self.at_rest = wanted.is_empty() && !store.anything_at_work()?;
        self.followed.retain(|f| wanted.contains(&f.process));
        for process in wanted {
            if self.followed.iter().any(|f| f.process == process) {
                continue;
            }
            match PidFd::open(process) {
                Ok(Some(fd)) => self.followed.push(fd),
                // Gone already: the store needs healing now.
                Ok(None) => self.died = true,
                Err(e) => {
                    tracing::info!("cannot be told of exits ({e}); healing every {HEAL_EVERY_UNTOLD:?}");
                    self.untold = true;
                    self.followed.clear();
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::home::Home;

    /// With nothing at work a watcher heals by no clock (it sleeps until a
    /// commit, making no wakeups); once a run is not ended, or a merge is
    /// being made, its safety net is back.
    #[test]
    fn a_store_at_rest_is_healed_by_no_clock() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let mut store = Store::open(&home).unwrap();
        let mut watcher = Watcher::new(&store).unwrap();
        watcher.healed_now();
        assert_eq!(watcher.heal_at(), None, "healed by time with nothing at work");
        let text = "---\nname: w\ndescription: d\nagent: command\ncommand: [true]\n---\n";
        let preset = crate::preset::parse_preset(text, "w.md", crate::preset::PresetSource::Global).unwrap();
        let new = crate::store::NewRun::plain(&preset, "t", "/");
        store.insert_run(&new, 1_000_000, |_| Ok(())).unwrap();
        watcher.follow(&store).unwrap();
        assert!(watcher.heal_at().is_some(), "a run not ended, and no heal by time");
        let runs = ["r".to_string()];
        let set = crate::store::NewMergeSet { repo: "/", branch: "main", before: "0", squashed: true, runs: &runs };
        let mut other = Store::open(&home).unwrap();
        other.write("ending the run", |tx| tx.execute("UPDATE runs SET status = 'completed'", [])).unwrap();
        watcher.follow(&store).unwrap();
        assert_eq!(watcher.heal_at(), None);
        let id = other.begin_merge_set(&set).unwrap();
        watcher.follow(&store).unwrap();
        assert!(watcher.heal_at().is_some(), "a merge being made, and no heal by time");
        other.end_merge_set(id, &[], true).unwrap();
    }

    /// A single small commit by another connection: its WAL write comes
    /// just before the WAL index shows it, and the wait must not miss it
    /// (it used to, until the next safety heal).
    #[test]
    fn a_foreign_commit_ends_a_wait_before_its_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let store = Store::open(&home).unwrap();
        let mut watcher = Watcher::new(&store).unwrap();
        for round in 0..20 {
            // Another connection's commit, as another Corral process makes
            // it (every commit of the store rings its bell). Each round's
            // differs: a commit that changes no byte (the same host answer
            // within the same millisecond) does not move `data_version`,
            // and is rightly no change to be told of.
            let other = home.clone();
            let writer = std::thread::spawn(move || {
                let mut store = Store::open(&other).unwrap();
                store.record_host_answers("elsewhere", Some(&format!("0.{round}"))).unwrap();
            });
            let deadline = Instant::now() + Duration::from_secs(3);
            let seen = watcher.changed_before(&store, Some(deadline)).unwrap();
            // Seen when it happened, not found at the deadline.
            let before_deadline = Instant::now() < deadline;
            writer.join().unwrap();
            assert!(seen && before_deadline, "round {round}: the commit was not told, only found at the deadline");
        }
    }
}
