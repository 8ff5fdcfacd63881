//! Every state transition of a run, in one place: each is guarded in SQL
//! (`WHERE status IN (...)`), so whoever commits a terminal status first
//! wins and a run's outcome is written once.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::adapter::Report;
use crate::cost::resources::{Containment, Resources};
use crate::run::{ChangeCount, Run, RunStatus, StopReason};
use crate::text::time;

/// What committing the outcome of a turn did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// The run ended with this outcome.
    Applied,
    /// It had ended already (someone else decided first): nothing changed.
    AlreadyDecided,
    /// A reply waits for the agent: nothing changed, the run goes on.
    ReplyWaits,
}

/// How a run ended, as committed once by whoever ends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// A terminal status.
    pub status: RunStatus,
    /// Why.
    pub stop_reason: StopReason,
    /// The agent's exit code, if it exited before the commit.
    pub exit_code: Option<i32>,
    /// The signal that killed the agent, if one did before the commit.
    pub exit_signal: Option<i32>,
    /// What went wrong.
    pub error: Option<String>,
    /// What the stream said.
    pub report: Report,
}

/// The result of asking a run to stop.
#[derive(Debug, Clone, PartialEq)]
pub enum AbortRequest {
    /// The run was already over; nothing was changed.
    AlreadyOver(Run),
    /// The run had not started; it is now aborted.
    AbortedBeforeStart(Run),
    /// The request is recorded; its shepherd must act on it.
    Requested(Run),
}

/// A merge recorded (`?1` the run, `?2` its branch's commit that went in,
/// `?3` squashed): what it changed is measured from there, so nothing is
/// left unmerged — the list's counts and "review together" follow at once,
/// not at the next `corral diff`.
pub(super) const RECORD_MERGE_SQL: &str = "UPDATE runs SET worktree_merged = ?2, worktree_merged_squashed = ?3, \
     changes_files = 0, changes_added = 0, changes_removed = 0 WHERE id = ?1";

impl Store {
    /// Marks runs as collected by their parent (it has their results now).
    pub fn mark_collected(&mut self, ids: &[String]) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("marking results collected", |tx| {
            for id in ids {
                tx.execute(
                    &format!(
                        "UPDATE runs SET collected_at = coalesce(collected_at, ?2) WHERE id = ?1 AND status IN {}",
                        RunStatus::terminal_sql()
                    ),
                    params![id, now],
                )?;
            }
            Ok(())
        })
    }

    /// A running parent whose agent ended its turn starts waiting on its
    /// children. Returns false if the run was not running.
    pub fn mark_waiting(&mut self, id: &str) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("marking a run waiting", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', waiting_at = ?2 WHERE id = ?1 AND status = '{}'",
                    RunStatus::Waiting,
                    RunStatus::Running
                ),
                params![id, now],
            )
        })
        .map(|n| n == 1)
    }

    /// A parent resumes for a continuation turn with a new agent process.
    pub fn mark_resumed(&mut self, id: &str, pid: i32, start: u64) -> Result<bool, StoreError> {
        self.write("marking a run resumed", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', agent_pid = ?2, agent_start = ?3 WHERE id = ?1 AND status = '{}'",
                    RunStatus::Running,
                    RunStatus::Running
                ),
                params![id, pid, start as i64],
            )
        })
        .map(|n| n == 1)
    }

    /// Puts a run that got a slot but never a shepherd (whoever promoted it
    /// died before starting one) back in the queue, in its place; one that
    /// was asked to stop meanwhile is aborted instead. Returns false if a
    /// shepherd claimed it meanwhile.
    pub fn requeue_unstarted(&mut self, id: &str) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("putting a run back in the queue", |tx| {
            let unclaimed = format!("id = ?1 AND status = '{}' AND shepherd_pid IS NULL", RunStatus::Starting);
            let aborted = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', stop_reason = '{}', error = 'aborted before the agent started',
                       completed_at = ?2, exited_at = ?2
                     WHERE {unclaimed} AND abort_requested_at IS NOT NULL",
                    RunStatus::Aborted,
                    StopReason::UserAbort
                ),
                params![id, now],
            )?;
            let requeued = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', promoted_at = NULL, promoter_pid = NULL, promoter_start = NULL
                     WHERE {unclaimed}",
                    RunStatus::Queued
                ),
                [id],
            )?;
            Ok(aborted + requeued == 1)
        })
    }

    /// Claims a starting run for the shepherd `pid`: returns false if the
    /// run is not `starting` or another shepherd already owns it, so two
    /// shepherds started for one run never both supervise it.
    pub fn claim_shepherd(&mut self, id: &str, pid: i32, start: u64) -> Result<bool, StoreError> {
        self.write("recording a shepherd", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET shepherd_pid = ?2, shepherd_start = ?3
                     WHERE id = ?1 AND status = '{}' AND shepherd_pid IS NULL",
                    RunStatus::Starting
                ),
                params![id, pid, start as i64],
            )
        })
        .map(|n| n == 1)
    }

    /// Marks a starting run `running` with its agent's identity. Returns false
    /// if the run is no longer `starting` (it was aborted meanwhile).
    pub fn mark_running(&mut self, id: &str, pid: i32, start: u64) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("marking a run running", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', agent_pid = ?2, agent_start = ?3, started_at = coalesce(started_at, ?4)
                     WHERE id = ?1 AND status = '{}'",
                    RunStatus::Running,
                    RunStatus::Starting
                ),
                params![id, pid, start as i64, now],
            )
        })
        .map(|n| n == 1)
    }

    /// Commits a run's outcome, once: returns false if the run was already
    /// terminal (someone else decided first), and then changes nothing.
    /// What the report leaves out keeps what earlier turns recorded (a
    /// replied-to run that ends `lost`): texts stay, counts never go down.
    pub fn commit_outcome(&mut self, id: &str, outcome: &Outcome) -> Result<bool, StoreError> {
        self.commit_unless(id, outcome, false).map(|c| c == Committed::Applied)
    }

    /// Commits the outcome of the agent's own last turn, unless a reply to
    /// the run waits: then nothing changes, and the shepherd delivers it in
    /// a new turn instead of ending the run. Deciding both in one
    /// transaction means a reply is never left behind by an ending run.
    pub fn commit_turn_end(&mut self, id: &str, outcome: &Outcome) -> Result<Committed, StoreError> {
        self.commit_unless(id, outcome, true)
    }

    fn commit_unless(&mut self, id: &str, outcome: &Outcome, replies_first: bool) -> Result<Committed, StoreError> {
        debug_assert!(outcome.status.is_terminal());
        let now = time::format(time::now());
        let r = &outcome.report;
        let sql = format!(
            "UPDATE runs SET status = ?2, stop_reason = ?3, exit_code = ?4, exit_signal = ?5,
               error = ?6, final_text = coalesce(?7, final_text), resolved_model = coalesce(?8, resolved_model),
               input_tokens = max(input_tokens, ?9), output_tokens = max(output_tokens, ?10),
               cache_read_tokens = max(cache_read_tokens, ?11), cache_write_tokens = max(cache_write_tokens, ?12),
               cost_usd = coalesce(?13, cost_usd), session_id = coalesce(?14, session_id),
               cost_estimated = CASE WHEN ?13 IS NULL THEN cost_estimated ELSE ?17 END,
               completed_at = ?15, started_at = coalesce(started_at, ?15), denied = ?16, retrying = NULL
             WHERE id = ?1 AND status NOT IN {}",
            RunStatus::terminal_sql()
        );
        self.write_reserving("committing a run's outcome", |tx| {
            if replies_first && super::replies::has_pending_in(tx, id)? {
                return Ok(Committed::ReplyWaits);
            }
            let n = tx.execute(
                &sql,
                params![
                    id,
                    outcome.status.as_str(),
                    outcome.stop_reason.as_str(),
                    outcome.exit_code,
                    outcome.exit_signal,
                    outcome.error,
                    r.final_text,
                    r.resolved_model,
                    r.usage.input_tokens as i64,
                    r.usage.output_tokens as i64,
                    r.usage.cache_read_tokens as i64,
                    r.usage.cache_write_tokens as i64,
                    r.cost_usd,
                    r.session_id,
                    now,
                    (!r.denied.is_empty()).then(|| serde_json::to_string(&r.denied).expect("strings serialize")),
                    r.cost_estimated
                ],
            )?;
            Ok(if n == 1 { Committed::Applied } else { Committed::AlreadyDecided })
        })
    }

    /// Records how run `id`'s processes are held (its cgroup, or why none).
    pub fn record_containment(&mut self, id: &str, containment: &Containment) -> Result<(), StoreError> {
        let json = serde_json::to_string(containment).expect("a containment always serializes");
        self.write("recording a run's cgroup", |tx| {
            tx.execute("UPDATE runs SET containment = ?2 WHERE id = ?1", params![id, json])
        })
        .map(drop)
    }

    /// Records what run `id`'s processes used so far.
    pub fn record_resources(&mut self, id: &str, used: &Resources) -> Result<(), StoreError> {
        self.write_reserving("recording a run's resource use", |tx| {
            tx.execute(
                "UPDATE runs SET cpu_seconds = ?2, memory_peak_bytes = ?3 WHERE id = ?1",
                params![id, used.cpu_seconds, used.memory_peak_bytes.map(|b| b.min(i64::MAX as u64) as i64)],
            )
        })
        .map(drop)
    }

    /// Records that run `id`'s agent is retrying a failing call (`Some`:
    /// what it says), or is working again (`None`).
    pub fn set_retrying(&mut self, id: &str, retrying: Option<&str>) -> Result<(), StoreError> {
        self.write("recording a retry", |tx| {
            tx.execute("UPDATE runs SET retrying = ?2 WHERE id = ?1", params![id, retrying])
        })
        .map(drop)
    }

    /// Records what a run's worktree changed, as just measured.
    pub fn record_changes(&mut self, id: &str, count: ChangeCount) -> Result<(), StoreError> {
        self.write("recording a run's changes", |tx| {
            tx.execute(
                "UPDATE runs SET changes_files = ?2, changes_added = ?3, changes_removed = ?4 WHERE id = ?1",
                params![id, count.files as i64, count.added as i64, count.removed as i64],
            )
        })
        .map(drop)
    }

    /// Records that run `id`'s branch was merged up to commit `merged`
    /// (squashed, or with its commits).
    pub fn record_merge(&mut self, id: &str, merged: &str, squashed: bool) -> Result<(), StoreError> {
        self.write("recording a merge", |tx| tx.execute(RECORD_MERGE_SQL, params![id, merged, squashed])).map(drop)
    }

    /// Records that a run's worktree and branch were removed.
    pub fn mark_worktree_removed(&mut self, id: &str) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("recording a discarded worktree", |tx| {
            tx.execute(
                "UPDATE runs SET worktree_removed_at = coalesce(worktree_removed_at, ?2) WHERE id = ?1",
                params![id, now],
            )
        })
        .map(drop)
    }

    /// Records that run `id`'s teardown ran (its port block is free once it
    /// has ended); false if it had already.
    pub fn mark_torn_down(&mut self, id: &str) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("recording a teardown", |tx| {
            tx.execute("UPDATE runs SET torn_down_at = ?2 WHERE id = ?1 AND torn_down_at IS NULL", params![id, now])
        })
        .map(|changed| changed == 1)
    }

    /// True once run `id`'s teardown ran.
    pub fn torn_down(&self, id: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row("SELECT torn_down_at IS NOT NULL FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .doing("reading a teardown")
    }

    /// Ends a run whose agent never started (`failed` / `spawn_failed`).
    pub fn fail_unstarted(&mut self, id: &str, error: String) -> Result<(), StoreError> {
        self.end_unstarted(id, RunStatus::Failed, StopReason::SpawnFailed, error)
    }

    /// Ends a run whose agent never started, with this status and reason.
    pub fn end_unstarted(
        &mut self,
        id: &str,
        status: RunStatus,
        stop_reason: StopReason,
        error: String,
    ) -> Result<(), StoreError> {
        let outcome = Outcome {
            status,
            stop_reason,
            exit_code: None,
            exit_signal: None,
            error: Some(error),
            report: Default::default(),
        };
        self.commit_outcome(id, &outcome)?;
        self.mark_exited(id, None, None)
    }

    /// Records that the last process of a run was reaped, with the agent's
    /// exit status if it was not known when the outcome was committed.
    pub fn mark_exited(
        &mut self,
        id: &str,
        exit_code: Option<i32>,
        exit_signal: Option<i32>,
    ) -> Result<(), StoreError> {
        self.mark_exited_using(id, exit_code, exit_signal, None)
    }

    /// [`Store::mark_exited`], with what the run's processes used, in the
    /// same transaction (one commit less per run).
    pub fn mark_exited_using(
        &mut self,
        id: &str,
        exit_code: Option<i32>,
        exit_signal: Option<i32>,
        used: Option<&Resources>,
    ) -> Result<(), StoreError> {
        let now = time::format(time::now());
        let cpu = used.map(|u| u.cpu_seconds);
        let peak = used.and_then(|u| u.memory_peak_bytes).map(|b| b.min(i64::MAX as u64) as i64);
        self.write_reserving("recording a run's exit", |tx| {
            tx.execute(
                "UPDATE runs SET exited_at = coalesce(exited_at, ?2),
                   exit_code = coalesce(exit_code, ?3), exit_signal = coalesce(exit_signal, ?4),
                   cpu_seconds = coalesce(?5, cpu_seconds), memory_peak_bytes = coalesce(?6, memory_peak_bytes)
                 WHERE id = ?1",
                params![id, now, exit_code, exit_signal, cpu, peak],
            )?;
            // A reply said to it while its last processes were reaped.
            super::replies::reopen_in(tx, id, false)
        })
        .map(drop)
    }

    /// Asks a run to stop. A run that has not started is aborted at once; a
    /// running one gets the request recorded for its shepherd to act on.
    /// Replies waiting for it stay, undelivered, until the next reply.
    pub fn request_abort(&mut self, id: &str) -> Result<AbortRequest, StoreError> {
        let now = time::format(time::now());
        let before_start = self.write("recording an abort", |tx| {
            // Replies not delivered yet no longer reopen it: the user said stop.
            tx.execute("UPDATE replies SET reopens = 0 WHERE run_id = ?1 AND delivered_at IS NULL", [id])?;
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', stop_reason = '{}',
                       abort_requested_at = coalesce(abort_requested_at, ?2),
                       completed_at = ?2, exited_at = ?2
                     WHERE id = ?1 AND status = '{}'",
                    RunStatus::Aborted,
                    StopReason::UserAbort,
                    RunStatus::Queued
                ),
                params![id, now],
            )?;
            if n == 0 {
                tx.execute(
                    &format!(
                        "UPDATE runs SET abort_requested_at = coalesce(abort_requested_at, ?2)
                         WHERE id = ?1 AND status NOT IN {}",
                        RunStatus::terminal_sql()
                    ),
                    params![id, now],
                )?;
            }
            Ok(n == 1)
        })?;
        let run = self.run(id)?;
        Ok(if before_start {
            AbortRequest::AbortedBeforeStart(run)
        } else if run.status.is_terminal() {
            AbortRequest::AlreadyOver(run)
        } else {
            AbortRequest::Requested(run)
        })
    }
}
