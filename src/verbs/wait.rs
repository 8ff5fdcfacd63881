//! Waiting for runs to end, as `corral wait`, `launch --wait` and the MCP
//! server do: by watching the store, healing it as it goes (see `heal`).
//!
//! A process of a run that waits gives up the run's slot while its wait
//! blocks the run's agent (see `blocking`: the agent is blocked, not
//! working), and returns once everything it waited on has ended and the run
//! has a slot again, before any queued run gets one. A wait that does not
//! block the agent (yet) is looked at again as it goes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::home::config::Config;
use crate::process::{ProcessId, Waker};
use crate::run::blocking::{self, Waiter};
use crate::run::{Run, RunStatus};
use crate::store::{Store, StoreError, WaitBlocks, WaitId};
use crate::upkeep::heal::HealError;
use crate::upkeep::queue::ShepherdCommand;
use crate::watch::asleep::HandOver;
use crate::watch::Watcher;

/// Why a wait cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The store failed, or could not be healed.
    #[error(transparent)]
    Heal(#[from] HealError),
    /// A run would wait on itself, or on a run it belongs to: that run ends
    /// only after this wait returns, so the wait could never end.
    #[error("run {caller} cannot wait on {target}: {why}, so the wait could never end; wait only on runs it launched")]
    Deadlock {
        /// The run this process works for.
        caller: String,
        /// The run it asked to wait on.
        target: String,
        /// How the two are related.
        why: &'static str,
    },
}

impl From<StoreError> for WaitError {
    fn from(e: StoreError) -> Self {
        WaitError::Heal(e.into())
    }
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitResult {
    /// The runs as they were when the wait ended, in the order asked.
    pub runs: Vec<Run>,
    /// True if the deadline passed with some run still active.
    pub timed_out: bool,
    /// True if whoever asked stopped waiting first (a cancelled MCP call).
    pub cancelled: bool,
    /// The runs not over at that moment: still at work, or ended and about
    /// to start again for a reply (a status of the moment would say done).
    pub still: Vec<String>,
}

/// Exit code of a wait whose timeout passed first (as timeout(1) uses).
pub const EXIT_TIMEOUT: i32 = 124;

impl WaitResult {
    /// How `corral wait` exits: 0 if every run completed, [`EXIT_TIMEOUT`]
    /// if the deadline passed first, 1 for any other end.
    pub fn exit_code(&self) -> i32 {
        if self.timed_out {
            EXIT_TIMEOUT
        } else if self.all_completed() {
            0
        } else {
            1
        }
    }

    /// True if every run completed and none is about to work again.
    pub fn all_completed(&self) -> bool {
        self.still.is_empty() && self.runs.iter().all(|r| r.status == RunStatus::Completed)
    }
}

/// A way to end a wait from another thread: a flag, and a waker so the
/// wait sees it at once.
pub struct Cancel {
    flag: AtomicBool,
    waker: Waker,
}

impl Cancel {
    /// Not cancelled yet.
    pub fn new() -> std::io::Result<Cancel> {
        Ok(Cancel { flag: AtomicBool::new(false), waker: Waker::new()? })
    }

    /// Ends the wait (now, if one blocks).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
        self.waker.wake();
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

/// Blocks until every run in `ids` (ids or unique prefixes) is terminal, or
/// `deadline` passes, or `cancelled` is cancelled (which wakes it at once).
/// `caller` is the run this process works for (see `caller`): it holds no
/// slot while blocked here. A run cannot wait on itself or on a run it
/// belongs to (its ancestors): such a wait is refused. With `hand_over`, a
/// wait left with nothing to do but be told of its runs' ends goes on in
/// `corral-wake`, which prints them and exits as `corral wait` does (see
/// `watch::asleep`): this returns only for a wait that stayed.
#[allow(clippy::too_many_arguments)]
pub fn wait_for(
    store: &mut Store,
    ids: &[String],
    deadline: Option<Instant>,
    caller: Option<&str>,
    shepherd: &ShepherdCommand,
    cancelled: Option<&Cancel>,
    waiter: Waiter,
    hand_over: Option<&HandOver>,
) -> Result<WaitResult, WaitError> {
    let ids: Vec<String> = ids.iter().map(|id| store.find_run(id).map(|r| r.id)).collect::<Result<_, _>>()?;
    if let Some(caller) = caller {
        refuse_deadlock(store, caller, &ids)?;
    }
    let mut blocked = block(store, caller, &ids, waiter)?;
    let mut waiting = Waiting::new(store, shepherd, cancelled)?;
    // A blocked wait has a slot to take back when it ends: it stays.
    waiting.hand_over = hand_over.filter(|_| blocked.is_none());
    let result = waiting.until_over(&ids, deadline, blocked.as_mut());
    if let Some(Blocked { wait, .. }) = blocked {
        match &result {
            // Over, or timed out: the agent is blocked in this call until its
            // run has a slot again, so it never works beside `max_parallel`
            // runs (a timeout bounds the wait on the runs, not this).
            Ok(done) if !done.cancelled => waiting.take_slot_back(wait)?,
            // Cancelled (the caller went on without it) or failed: the wait
            // goes at once; the agent already works again.
            _ => waiting.store.remove_wait(wait)?,
        }
    }
    Ok(result?)
}

/// One wait, from its first look to its return: the watcher tells of
/// changes (another process's commit, a followed process's exit), the
/// wait decides what they mean, and [`Waiting::heal`] is the one place it
/// heals the store. Runtime state only.
struct Waiting<'a> {
    store: &'a mut Store,
    shepherd: &'a ShepherdCommand,
    watcher: Watcher,
    cancelled: Option<&'a Cancel>,
    /// Where a wait with nothing left but its runs' ends may go on.
    hand_over: Option<&'a HandOver>,
}

impl<'a> Waiting<'a> {
    /// Starts watching: a change from now on is told, never missed.
    fn new(
        store: &'a mut Store,
        shepherd: &'a ShepherdCommand,
        cancelled: Option<&'a Cancel>,
    ) -> Result<Waiting<'a>, StoreError> {
        let mut watcher = Watcher::new(store)?;
        if let Some(cancel) = cancelled {
            watcher = watcher.with_waker(cancel.waker.clone());
        }
        Ok(Waiting { store, shepherd, watcher, cancelled, hand_over: None })
    }

    /// Heals the store when the watcher says it is due (a shepherd that
    /// died must not leave the wait, or the queue, hanging; and the safety
    /// net), or at once with `now` (this wait freed its run's slot: hand it
    /// on). True if healing committed anything, which this process's
    /// watcher does not see.
    fn heal(&mut self, now: bool) -> Result<bool, HealError> {
        if now {
            self.watcher.heal_now(self.store, self.shepherd)
        } else {
            self.watcher.heal_if_due(self.store, self.shepherd)
        }
    }

    /// Sleeps until the store may have changed, or `until`; the runs waited
    /// on if the bell told that every one ended (their ends written beside
    /// them: no read of the store).
    fn sleep(&mut self, until: Option<Instant>) -> Result<Option<Vec<Run>>, StoreError> {
        self.watcher.changed_before(self.store, until)?;
        Ok(self.watcher.take_ended())
    }

    /// Looks at `ids` after each change until every one is over, the
    /// deadline passes or the wait is cancelled.
    fn until_over(
        &mut self,
        ids: &[String],
        deadline: Option<Instant>,
        mut blocked: Option<&mut Blocked>,
    ) -> Result<WaitResult, HealError> {
        // Its first look heals, as every command's does (the CLI's wait
        // opens the store without healing, so it heals once): a run whose
        // shepherd died is ended, and its survivors stopped, even when the
        // runs waited on are over already.
        self.heal(false)?;
        loop {
            // Looked at before healing: a wait whose runs ended is over
            // whatever else a heal would find (their shepherds exit right
            // after their outcome, so every waiter woken by an end would
            // otherwise heal at once, together). A heal that changes
            // anything is looked at again.
            let (runs, still) = self.store.reading(|store| {
                let runs: Vec<Run> = ids.iter().map(|id| store.run(id)).collect::<Result<_, _>>()?;
                let still = not_over(store, &runs)?;
                Ok::<_, StoreError>((runs, still))
            })?;
            if still.is_empty() {
                return Ok(WaitResult { runs, timed_out: false, cancelled: false, still });
            }
            if self.cancelled.is_some_and(Cancel::is_cancelled) {
                return Ok(WaitResult { runs, timed_out: false, cancelled: true, still });
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(WaitResult { runs, timed_out: true, cancelled: false, still });
            }
            let changed = self.heal(false)?;
            if let Some(blocked) = blocked.as_deref_mut() {
                if blocked.look_again(self.store)? {
                    self.heal(true)?;
                    continue;
                }
            }
            if changed {
                continue;
            }
            let look_again = blocked.as_deref().and_then(|b| b.look_again.map(|(at, _)| at));
            let wake = match (deadline, look_again) {
                (Some(d), Some(l)) => Some(d.min(l)),
                (d, l) => d.or(l),
            };
            // Told by their ends, written beside them: every run waited on,
            // the ones this look found ended too (a reply reopening one
            // takes its end away), so the answer is the ends as they are
            // now, never this look's for some and a later one for others.
            self.watcher.watch_ends_of(self.store, ids);
            if let Some(over) = self.hand_over.filter(|_| self.cancelled.is_none() && look_again.is_none()) {
                if let Some(e) = self.watcher.hand_over(self.store, &runs, deadline, over) {
                    tracing::info!("the wait stays in this process: cannot start {}: {e}", over.wake.display());
                }
            }
            if let Some(ended) = self.sleep(wake)? {
                // A run this look found ended and whose end is the same
                // one (not a later turn's) is as this look read it, with
                // what was recorded after its end (its exit).
                let same_end = |run: &Run, end: &Run| run.status.is_terminal() && run.completed_at == end.completed_at;
                let runs = runs.into_iter().map(|run| match ended.iter().find(|e| e.id == run.id) {
                    Some(end) if !same_end(&run, end) => end.clone(),
                    _ => run,
                });
                return Ok(WaitResult { runs: runs.collect(), timed_out: false, cancelled: false, still: Vec::new() });
            }
        }
    }

    /// Returns from a wait that is over only once its run has a slot to
    /// work in again; it goes before every queued run.
    fn take_slot_back(&mut self, wait: WaitId) -> Result<(), WaitError> {
        loop {
            let max_parallel = Config::load(self.store.home()).map_err(HealError::from)?.max_parallel;
            if self.store.end_wait(wait, max_parallel)? {
                return Ok(());
            }
            if !self.heal(false)? {
                self.watcher.changed_before(self.store, None)?;
            }
        }
    }
}

/// Refuses a wait of `caller` on itself or on one of its ancestors.
fn refuse_deadlock(store: &Store, caller: &str, ids: &[String]) -> Result<(), WaitError> {
    let mut ancestors = Vec::new();
    let mut next = store.run(caller)?.parent_id;
    // Parent links never loop, but a bound costs nothing.
    while let Some(id) = next.filter(|_| ancestors.len() < 1024) {
        next = store.run(&id)?.parent_id;
        ancestors.push(id);
    }
    for id in ids {
        let why = if id == caller {
            "it is the run itself"
        } else if ancestors.contains(id) {
            "it launched this run (directly or through its children)"
        } else {
            continue;
        };
        return Err(WaitError::Deadlock { caller: caller.to_string(), target: id.clone(), why });
    }
    Ok(())
}

/// A registered wait of the caller's run, and whether it blocks the agent.
struct Blocked {
    wait: WaitId,
    run: String,
    waiter: Waiter,
    blocks: WaitBlocks,
    /// When to look again at a wait that does not block the agent yet (a
    /// shell may call `wait` on it later), and how long after that.
    look_again: Option<(Instant, Duration)>,
    /// When a look first found the agent wholly blocked on this command,
    /// not yet recorded: a shell working in a loop of short commands
    /// sleeps in `wait(2)` for a moment with none of them left (one just
    /// ended), and one such look must not give its slot away.
    seen_blocked: Option<Instant>,
}

/// How long a command's wait must be seen blocking its agent, at two
/// looks, before the agent counts as blocked.
const CONFIRM_BLOCKED: Duration = Duration::from_millis(50);

/// The first look again at a wait that does not block the agent: soon, as
/// the shell that started it may be about to wait for it.
const FIRST_LOOK_AGAIN: Duration = Duration::from_millis(5);
/// The longest time between two looks.
const LONGEST_LOOK_AGAIN: Duration = Duration::from_secs(2);

impl Blocked {
    /// Looks again if it is time; records a change. True if the wait now
    /// blocks the agent (its slot is free for a queued run).
    fn look_again(&mut self, store: &mut Store) -> Result<bool, StoreError> {
        let Some((at, pause)) = self.look_again else { return Ok(false) };
        if Instant::now() < at {
            return Ok(false);
        }
        let run = store.run(&self.run)?;
        let judged = blocking::judge(store, &run, std::process::id() as i32, self.waiter)?;
        let blocks = self.confirmed(judged);
        let changed = blocks != self.blocks;
        if changed {
            store.set_wait_blocks(self.wait, blocks)?;
            self.blocks = blocks;
        }
        self.look_again = (self.may_block_more() && run.status.is_active()).then(|| match self.seen_blocked {
            Some(_) => (Instant::now() + CONFIRM_BLOCKED, pause),
            None => (Instant::now() + pause, (pause * 2).min(LONGEST_LOOK_AGAIN)),
        });
        Ok(changed && blocks != WaitBlocks::No)
    }

    /// What to record of a look that judged `judged`: a command's wait
    /// blocks its agent wholly only once two looks `CONFIRM_BLOCKED` apart
    /// found it so (until then, it blocks as a tool call's would).
    fn confirmed(&mut self, judged: WaitBlocks) -> WaitBlocks {
        if self.waiter != Waiter::Command || judged != WaitBlocks::Always || self.blocks == WaitBlocks::Always {
            self.seen_blocked = None;
            return judged;
        }
        match self.seen_blocked {
            Some(at) if at.elapsed() >= CONFIRM_BLOCKED => {
                self.seen_blocked = None;
                WaitBlocks::Always
            }
            Some(_) => WaitBlocks::WhileToolOpen,
            None => {
                self.seen_blocked = Some(Instant::now());
                WaitBlocks::WhileToolOpen
            }
        }
    }

    /// True while what this wait does to the agent may change: a
    /// command's wait for as long as it waits (a shell may wait on it
    /// later, or go back to work while it still waits: a sample that found
    /// the agent blocked is not kept for ever); a tool call's wait until it
    /// blocks the agent while the call is open, and no more.
    fn may_block_more(&self) -> bool {
        match self.waiter {
            Waiter::Command => true,
            Waiter::ToolCall => self.blocks == WaitBlocks::No,
        }
    }
}

/// Records that the caller's run waits on `ids` (not on itself), blocking
/// its agent or not (see `blocking`).
fn block(
    store: &mut Store,
    caller: Option<&str>,
    ids: &[String],
    waiter: Waiter,
) -> Result<Option<Blocked>, StoreError> {
    let Some(caller) = caller else { return Ok(None) };
    let targets: Vec<String> = ids.iter().filter(|id| id.as_str() != caller).cloned().collect();
    let Some(me) = ProcessId::of(std::process::id() as i32) else { return Ok(None) };
    let run = store.run(caller)?;
    if targets.is_empty() || !run.status.is_active() {
        return Ok(None);
    }
    let judged = blocking::judge(store, &run, me.pid, waiter)?;
    let mut blocked =
        Blocked { wait: WaitId(0), run: run.id, waiter, blocks: WaitBlocks::No, look_again: None, seen_blocked: None };
    let blocks = blocked.confirmed(judged);
    blocked.wait = store.register_wait(caller, me, &targets, blocks)?;
    blocked.blocks = blocks;
    if blocked.may_block_more() {
        let first = if blocked.seen_blocked.is_some() { CONFIRM_BLOCKED } else { FIRST_LOOK_AGAIN };
        blocked.look_again = Some((Instant::now() + first, FIRST_LOOK_AGAIN * 2));
    }
    Ok(Some(blocked))
}

/// The runs of `runs` not over: not ended, or about to start again for a
/// reply.
fn not_over(store: &Store, runs: &[Run]) -> Result<Vec<String>, StoreError> {
    let mut still = Vec::new();
    for run in runs {
        if !run.status.is_terminal() || store.reopens_soon(&run.id)? {
            still.push(run.id.clone());
        }
    }
    Ok(still)
}

/// Records that the run `caller` now has the results of those of `runs`
/// that are its ended children: a parent that waited on its children, or
/// read their results, needs no continuation turn to be handed them.
pub fn collected_by(store: &mut Store, caller: Option<&str>, runs: &[Run]) -> Result<(), StoreError> {
    let Some(caller) = caller else { return Ok(()) };
    let ids: Vec<String> = runs
        .iter()
        .filter(|r| r.status.is_terminal() && r.parent_id.as_deref() == Some(caller) && r.collected_at.is_none())
        .map(|r| r.id.clone())
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    store.mark_collected(&ids)
}
