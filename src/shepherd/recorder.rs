//! What the shepherd writes to the store while the run lives: transcript
//! events in batches (within the transcript's budget), the live flags the
//! tray and the window show (in a tool call, retrying), the outcome, once,
//! and the run's resource use.
//!
//! Batching is the point: an agent streaming thousands of lines costs a
//! commit every [`FLUSH_INTERVAL`] or [`FLUSH_BATCH`] events, not one per
//! line. The state here is runtime state; the store holds what was written.

use std::time::{Duration, Instant};

use super::cleanup::Cleanup;
use super::transcript::TranscriptBudget;
use crate::adapter::{Adapter, EventKind, TranscriptEvent};
use crate::cost::resources::Resources;
use crate::store::{Committed, Outcome, Store, StoreError};

/// Events are committed at least this often while output flows.
const FLUSH_INTERVAL: Duration = Duration::from_millis(25);
/// ...or as soon as this many are pending.
const FLUSH_BATCH: usize = 512;
/// How often the resource use of a working run is recorded.
const MEASURE_EVERY: Duration = Duration::from_secs(5);

/// The run's writes in flight, and what was last written of its flags.
pub(super) struct Recorder {
    pending: Vec<TranscriptEvent>,
    pending_since: Option<Instant>,
    /// The sequence number of the next event.
    next_seq: i64,
    /// How much more of the transcript may be kept.
    budget: TranscriptBudget,
    /// The agent's stream says a tool call is open, as last recorded.
    tool_open: bool,
    /// What the agent's last retry said, while it has not worked since
    /// (kept in the store for the tray and the window).
    retrying: Option<String>,
    /// The outcome is in the store (here or by another writer).
    committed: bool,
    /// What the run used before this shepherd (a run reopened by a reply).
    used_before: Resources,
    /// When the run's resource use was last measured.
    measured_at: Instant,
    /// What was last recorded of it: the same figures are not written
    /// again (a paused run's frozen processes use nothing, and a commit
    /// wakes every window, tray and `corral top` watching the store).
    recorded: Option<Resources>,
}

impl Recorder {
    /// The recorder of run `run_id`, whose transcript goes on after what is
    /// stored; `max_bytes` is the transcript's cap.
    pub fn new(
        store: &mut Store,
        run_id: &str,
        max_bytes: Option<u64>,
        used_before: Resources,
    ) -> Result<Recorder, StoreError> {
        let next_seq = store.last_event_seq(run_id)? + 1;
        let size = store.run(run_id)?.transcript;
        Ok(Recorder {
            pending: Vec::new(),
            pending_since: None,
            next_seq,
            budget: TranscriptBudget::new(max_bytes, size.bytes, size.dropped_events > 0),
            tool_open: false,
            retrying: None,
            committed: false,
            used_before,
            measured_at: Instant::now(),
            recorded: None,
        })
    }

    /// The events waiting to be written, to add to: from now on they are
    /// pending (the flush clock starts).
    pub fn pending(&mut self) -> &mut Vec<TranscriptEvent> {
        self.pending_since.get_or_insert_with(Instant::now);
        &mut self.pending
    }

    /// Adds one event, written with the next flush.
    pub fn push(&mut self, kind: EventKind, text: String) {
        self.pending().push(TranscriptEvent::text(kind, text));
    }

    /// True if enough events wait that they are written now.
    pub fn batch_is_full(&self) -> bool {
        self.pending.len() >= FLUSH_BATCH
    }

    /// When the events waiting must be written at the latest.
    pub fn flush_deadline(&self) -> Option<Instant> {
        self.pending_since.map(|since| since + FLUSH_INTERVAL)
    }

    /// True once the outcome is in the store.
    pub fn is_committed(&self) -> bool {
        self.committed
    }

    /// Writes the pending events in one transaction, with the flags they
    /// change: whether the agent is in a tool call (a wait that tool runs
    /// frees the run's slot only meanwhile, see `blocking`; never once its
    /// turn is over) and whether it is retrying (until it shows work again).
    pub fn flush(
        &mut self,
        store: &mut Store,
        run_id: &str,
        adapter: &dyn Adapter,
        turn_over: bool,
    ) -> Result<(), StoreError> {
        // What the adapter held back came in through `Session::flush_output`
        // first (read for the sandbox's refusals).
        self.pending_since = None;
        let tool_open = !turn_over && adapter.busy();
        if tool_open != self.tool_open {
            store.set_tool_open(run_id, tool_open)?;
            self.tool_open = tool_open;
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut retrying = self.retrying.clone();
        for event in &self.pending {
            match event.kind {
                EventKind::Retry => retrying = Some(event.text.clone()),
                // Neither its usage nor Corral's notes are the agent working.
                EventKind::Usage | EventKind::System | EventKind::Stderr => {}
                _ => retrying = None,
            }
        }
        if retrying != self.retrying && !self.committed {
            store.set_retrying(run_id, retrying.as_deref())?;
            self.retrying = retrying;
        }
        self.budget.admit(&mut self.pending);
        let dropped = self.budget.take_dropped();
        store.append_transcript(run_id, self.next_seq, &self.pending, dropped)?;
        self.next_seq += self.pending.len() as i64;
        self.pending.clear();
        Ok(())
    }

    /// Commits `outcome` (after a [`Recorder::flush`]). With
    /// `replies_first`, a reply waiting for the agent holds it instead
    /// ([`Committed::ReplyWaits`]). An outcome already decided elsewhere is
    /// kept.
    pub fn commit(
        &mut self,
        store: &mut Store,
        run_id: &str,
        outcome: &Outcome,
        replies_first: bool,
    ) -> Result<Committed, StoreError> {
        let committed = if replies_first {
            store.commit_turn_end(run_id, outcome)?
        } else if store.commit_outcome(run_id, outcome)? {
            Committed::Applied
        } else {
            Committed::AlreadyDecided
        };
        self.committed = committed != Committed::ReplyWaits;
        Ok(committed)
    }

    /// When the run's resource use is next recorded.
    pub fn measure_deadline(&self) -> Instant {
        self.measured_at + MEASURE_EVERY
    }

    /// True when the run's resource use is due to be recorded again.
    pub fn measure_due(&self) -> bool {
        self.measured_at.elapsed() >= MEASURE_EVERY
    }

    /// Records what the run's processes used so far (live figures for
    /// `show` and the window), if it changed.
    pub fn measure(&mut self, store: &mut Store, run_id: &str, cleanup: &Cleanup) -> Result<(), StoreError> {
        self.measured_at = Instant::now();
        let used = self.used(cleanup);
        if self.recorded == Some(used) {
            return Ok(());
        }
        store.record_resources(run_id, &used)?;
        self.recorded = Some(used);
        Ok(())
    }

    /// What the run's processes used, over every shepherd's life.
    pub fn used(&self, cleanup: &Cleanup) -> Resources {
        let now = cleanup.resources();
        Resources {
            cpu_seconds: self.used_before.cpu_seconds + now.cpu_seconds,
            memory_peak_bytes: match (self.used_before.memory_peak_bytes, now.memory_peak_bytes) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }
}
