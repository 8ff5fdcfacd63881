//! Usage limits in the store: a run paused until its agent's limit resets,
//! and each agent's limit while it stands (queued runs of that agent wait
//! for it; see `slots`).

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::run::{AgentKind, PauseReason, RunStatus};
use crate::text::time;

/// An agent's usage limit, while it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLimit {
    /// The agent.
    pub agent: AgentKind,
    /// When it resets (RFC 3339).
    pub resets_at: String,
    /// What the agent said.
    pub said: String,
}

impl Store {
    /// Run `id`'s turn ended at its agent's usage limit: it is `paused`
    /// (pause reason `usage_limit`) until `resumes_at`, holding no slot.
    /// With `limit` (the agent said when it resets), the agent's limit is
    /// kept so its queued runs wait too. False if the run is not running.
    pub fn mark_limited(
        &mut self,
        id: &str,
        resumes_at: &str,
        limit: Option<(AgentKind, &str)>,
        session: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("pausing a run at its usage limit", |tx| {
            // Its session is kept with it: a shepherd lost during an
            // hours-long wait leaves a run that can still be continued.
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', paused_at = ?2, pause_requested = 1, pause_reason = ?3,
                       resumes_at = ?4, session_id = coalesce(?5, session_id)
                     WHERE id = ?1 AND status = '{}'",
                    RunStatus::Paused,
                    RunStatus::Running
                ),
                params![id, now, PauseReason::UsageLimit.as_str(), resumes_at, session],
            )?;
            if let (1, Some((agent, said))) = (n, limit) {
                tx.execute(
                    "INSERT INTO usage_limits (agent, resets_at, said, since) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (agent) DO UPDATE SET
                       since = CASE WHEN resets_at < ?4 THEN excluded.since ELSE since END,
                       resets_at = max(resets_at, excluded.resets_at), said = excluded.said",
                    params![agent.as_str(), resumes_at, said, now],
                )?;
            }
            Ok(n == 1)
        })
    }

    /// Makes run `id`, paused at its usage limit, paused by the user: it no
    /// longer goes on at the reset, only when resumed. True if it was
    /// waiting out a limit.
    pub fn hold_limit_pause(&mut self, id: &str) -> Result<bool, StoreError> {
        let n = self.write("holding a run paused at its usage limit", |tx| {
            tx.execute(
                "UPDATE runs SET pause_reason = NULL, resumes_at = NULL, pause_requested = 1
                 WHERE id = ?1 AND pause_reason = ?2",
                params![id, PauseReason::UsageLimit.as_str()],
            )
        })?;
        Ok(n == 1)
    }
    /// Withdraws the pause a usage limit made on run `id`, now that the
    /// limit reset: false if it is no longer the limit's (the user made it
    /// theirs, or resumed it), so the user's word is never undone.
    pub fn end_limit_pause(&mut self, id: &str) -> Result<bool, StoreError> {
        let n = self.write("ending a run's usage-limit pause", |tx| {
            tx.execute(
                "UPDATE runs SET pause_requested = 0 WHERE id = ?1 AND pause_reason = ?2 AND pause_requested = 1",
                params![id, PauseReason::UsageLimit.as_str()],
            )
        })?;
        Ok(n == 1)
    }

    /// The usage limit of `agent` if it stands now.
    pub fn agent_limit(&self, agent: AgentKind) -> Result<Option<AgentLimit>, StoreError> {
        let now = time::format(time::now());
        self.conn()
            .prepare_cached("SELECT resets_at, said FROM usage_limits WHERE agent = ?1 AND resets_at > ?2")
            .and_then(|mut stmt| {
                stmt.query_row(params![agent.as_str(), now], |r| {
                    Ok(AgentLimit { agent, resets_at: r.get(0)?, said: r.get(1)? })
                })
                .optional()
            })
            .doing("reading an agent's usage limit")
    }

    /// The earliest reset of a usage limit standing now that queued runs
    /// of its agent wait for (RFC 3339), if any.
    pub fn next_reset_holding_queued(&self) -> Result<Option<String>, StoreError> {
        let now = time::format(time::now());
        self.conn()
            .prepare_cached(&format!(
                "SELECT min(l.resets_at) FROM usage_limits l WHERE l.resets_at > ?1
                   AND EXISTS (SELECT 1 FROM runs r WHERE r.status = '{}' AND r.agent = l.agent)",
                RunStatus::Queued
            ))
            .and_then(|mut stmt| stmt.query_row([now], |r| r.get(0)))
            .doing("reading the next usage-limit reset")
    }

    /// Run `id`, paused at its usage limit, lost its shepherd `was`: it is
    /// queued to go on in its session with `prompt` (delivered as a reply
    /// by its next shepherd, once the limit has reset), in one commit, so
    /// no watcher ever sees it `lost` on the way. False if it is no longer
    /// that run paused at its limit.
    pub fn requeue_at_limit(
        &mut self,
        id: &str,
        was: crate::process::ProcessId,
        prompt: &str,
    ) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("queueing a run to go on after its usage limit", |tx| {
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = '{}', pause_requested = 0, pause_reason = NULL, paused_at = NULL,
                       resumes_at = NULL, shepherd_pid = NULL, shepherd_start = NULL, agent_pid = NULL,
                       agent_start = NULL, promoted_at = NULL, promoter_pid = NULL, promoter_start = NULL,
                       waiting_at = NULL, slot_wanted_at = NULL
                     WHERE id = ?1 AND status = '{}' AND pause_reason = ?2 AND shepherd_pid = ?3
                       AND shepherd_start = ?4 AND session_id IS NOT NULL",
                    RunStatus::Queued,
                    RunStatus::Paused
                ),
                params![id, PauseReason::UsageLimit.as_str(), was.pid, was.start as i64],
            )?;
            if n == 1 {
                tx.execute(
                    "INSERT INTO replies (run_id, text, allow, created_at, reopens) VALUES (?1, ?2, NULL, ?3, 1)",
                    params![id, prompt, now],
                )?;
                super::ports::renew(tx, id)?;
            }
            Ok(n == 1)
        })
    }

    /// When run `id`, paused at a usage limit, goes on by itself.
    pub fn resumes_at(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT resumes_at FROM runs WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)))
            .doing("reading when a run resumes")
    }

    /// A turn of `agent` worked: its usage limit, if one stood, is over
    /// (its queued runs may start).
    pub fn clear_agent_limit(&mut self, agent: AgentKind) -> Result<(), StoreError> {
        if self.agent_limit(agent)?.is_none() {
            return Ok(());
        }
        self.write("ending an agent's usage limit", |tx| {
            tx.execute("DELETE FROM usage_limits WHERE agent = ?1", [agent.as_str()])?;
            Ok(())
        })
    }
}
