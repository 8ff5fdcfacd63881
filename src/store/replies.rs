//! The `replies` table: what a user or an agent said to a run after it
//! started (`corral reply`), kept until the run's agent gets it in a turn of
//! its own session.
//!
//! A reply to an active run waits for the run's turn to end; its shepherd
//! then delivers it instead of ending the run (see `commit_turn_end`). A
//! reply to an ended run reopens it: back to `queued`, keeping its session,
//! transcript, usage and worktree, so it takes a slot like any turn. A run
//! whose processes are still being reaped reopens the moment the last one
//! is (`mark_exited`), never while a process of its last turn lives.

use rusqlite::{params, OptionalExtension, Transaction};

use super::{Doing, Store, StoreError};
use crate::run::RunStatus;
use crate::text::time;

/// One reply, as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reply {
    /// Its row id, in the order replies were made.
    pub id: i64,
    /// The run it was said to.
    pub run_id: String,
    /// What was said.
    pub text: String,
    /// Tools allowed for the turn that delivers it (`Bash(npm test)`).
    pub allow: Vec<String>,
    /// When it was made.
    pub created_at: String,
    /// When a turn of the agent got it; `None` while it waits.
    pub delivered_at: Option<String>,
}

/// Where a reply went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyPlaced {
    /// The run is active: its agent gets the reply when its turn ends.
    Kept,
    /// The run had ended: it is queued again for a turn with the reply
    /// (or will be, the moment the last process of its last turn is reaped).
    Reopened,
}

impl Store {
    /// Records a reply to run `id` (a full id), and reopens the run if it
    /// had ended. Replies still waiting from before it ended (an aborted run
    /// does not take them) go with this one. `by_user`: said by a person,
    /// not by another run's agent (the run is then announced on its own).
    pub fn add_reply(
        &mut self,
        id: &str,
        text: &str,
        allow: &[String],
        by_user: bool,
    ) -> Result<ReplyPlaced, StoreError> {
        let now = time::format(time::now());
        let allow = (!allow.is_empty()).then(|| serde_json::to_string(allow).expect("strings serialize"));
        self.write("recording a reply", |tx| {
            let (status, exited): (String, bool) = tx
                .query_row("SELECT status, exited_at IS NOT NULL FROM runs WHERE id = ?1", [id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?
                .ok_or(rusqlite::Error::QueryReturnedNoRows)?;
            let ended = status.parse::<RunStatus>().is_ok_and(|s| s.is_terminal());
            if ended {
                tx.execute("UPDATE replies SET reopens = 1 WHERE run_id = ?1 AND delivered_at IS NULL", [id])?;
            }
            tx.execute(
                "INSERT INTO replies (run_id, text, allow, created_at, reopens) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, text, allow, now, ended],
            )?;
            if by_user {
                tx.execute("UPDATE runs SET replied_at = ?2 WHERE id = ?1", params![id, now])?;
            }
            if ended && exited {
                reopen_in(tx, id, true)?;
            }
            Ok(if ended { ReplyPlaced::Reopened } else { ReplyPlaced::Kept })
        })
    }

    /// Replies to run `id` its agent has not had yet, oldest first.
    pub fn pending_replies(&self, id: &str) -> Result<Vec<Reply>, StoreError> {
        self.replies_where(id, "AND delivered_at IS NULL")
    }

    /// Every reply to run `id`, oldest first.
    pub fn replies(&self, id: &str) -> Result<Vec<Reply>, StoreError> {
        self.replies_where(id, "")
    }

    fn replies_where(&self, id: &str, filter: &str) -> Result<Vec<Reply>, StoreError> {
        let doing = "reading replies";
        let sql = format!(
            "SELECT id, run_id, text, allow, created_at, delivered_at FROM replies WHERE run_id = ?1 {filter} ORDER BY id"
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing(doing)?;
        let rows = stmt.query_map([id], |r| {
            Ok(Reply {
                id: r.get(0)?,
                run_id: r.get(1)?,
                text: r.get(2)?,
                allow: r
                    .get::<_, Option<String>>(3)?
                    .and_then(|json| serde_json::from_str(&json).ok())
                    .unwrap_or_default(),
                created_at: r.get(4)?,
                delivered_at: r.get(5)?,
            })
        });
        let replies: Vec<Reply> = rows.doing(doing)?.collect::<Result<_, _>>().doing(doing)?;
        Ok(replies)
    }

    /// True if run `id` ended but starts again once the last process of its
    /// last turn is reaped: a reply said to it waits. Waiting for it goes on.
    pub fn reopens_soon(&self, id: &str) -> Result<bool, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM replies WHERE run_id = ?1 AND delivered_at IS NULL AND reopens = 1)",
            )
            .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)))
            .doing("reading replies")
    }

    /// Marks replies as delivered: a turn of the agent has them.
    pub fn mark_replies_delivered(&mut self, ids: &[i64]) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("marking replies delivered", |tx| {
            for id in ids {
                tx.execute("UPDATE replies SET delivered_at = ?2 WHERE id = ?1", params![id, now])?;
            }
            Ok(())
        })
    }
}

/// True if run `id` has a reply its agent has not had yet.
pub(super) fn has_pending_in(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<bool> {
    tx.query_row("SELECT EXISTS (SELECT 1 FROM replies WHERE run_id = ?1 AND delivered_at IS NULL)", [id], |r| r.get(0))
}

/// Reopens run `id` if it ended, every process of it is reaped, and a reply
/// said to it since it ended waits: it goes back to the queue as it was
/// before its first start, with its session, transcript, usage and worktree
/// kept, and its end to be announced again. A run that ended `lost` (its
/// shepherd died, perhaps before delivering the reply) reopens only when
/// someone replies to it again (`even_lost`): a shepherd that keeps dying
/// must not make a loop.
pub(super) fn reopen_in(tx: &Transaction<'_>, id: &str, even_lost: bool) -> rusqlite::Result<bool> {
    let lost_ok = if even_lost { String::new() } else { format!("AND status <> '{}'", RunStatus::Lost) };
    let n = tx.execute(
        &format!(
            "UPDATE runs SET status = '{queued}', stop_reason = NULL, exit_code = NULL, exit_signal = NULL,
               error = NULL, completed_at = NULL, exited_at = NULL, abort_requested_at = NULL,
               notified_at = NULL, seen_at = NULL, dismissed_at = NULL, collected_at = NULL,
               shepherd_pid = NULL, shepherd_start = NULL, agent_pid = NULL, agent_start = NULL,
               promoted_at = NULL, promoter_pid = NULL, promoter_start = NULL, waiting_at = NULL,
               slot_wanted_at = NULL
             WHERE id = ?1 AND status IN {terminal} AND exited_at IS NOT NULL {lost_ok}
               AND EXISTS (SELECT 1 FROM replies WHERE run_id = ?1 AND delivered_at IS NULL AND reopens = 1)",
            queued = RunStatus::Queued,
            terminal = RunStatus::terminal_sql(),
        ),
        [id],
    )?;
    if n == 1 {
        super::ports::renew(tx, id)?;
    }
    Ok(n == 1)
}
