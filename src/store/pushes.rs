//! The pushes to the user's phone (see `push`): each kept under its key,
//! sent once by whichever process claims it, and answered once.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::text::time;

impl Store {
    /// Keeps a push to send under `key`, unless one is kept already: true
    /// if it is new.
    pub fn queue_push(&mut self, key: &str, body: &str) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("keeping a push to send", |tx| {
            let n = tx.execute(
                "INSERT OR IGNORE INTO pushes (key, body, created_at) VALUES (?1, ?2, ?3)",
                params![key, body, now],
            )?;
            Ok(n == 1)
        })
    }

    /// Claims every push not sent yet whose next try is due (oldest
    /// first): this process's to send, until it says it was sent
    /// ([`Store::push_sent`]) or gives it back ([`Store::push_not_sent`]).
    /// A claim stands while the very process that made it lives, and
    /// [`CLAIM_STANDS`] at most (a sender hung for good): one a sender
    /// left when it stopped mid-send is taken at once.
    pub fn claim_unsent_pushes(&mut self) -> Result<Vec<UnsentPush>, StoreError> {
        let now = time::now();
        let (at, stale) = (time::format(now), time::format(now - chrono::Duration::seconds(CLAIM_STANDS)));
        let me = crate::process::ProcessId::of(std::process::id() as i32);
        self.write("claiming pushes to send", |tx| {
            let due = "sent_at IS NULL AND (next_try_at IS NULL OR next_try_at <= ?1)";
            let rows: Vec<(UnsentPush, Claim)> = tx
                .prepare(&format!(
                    "SELECT key, body, webhook_only, claimed_at, claimer_pid, claimer_start FROM pushes
                     WHERE {due} ORDER BY created_at"
                ))?
                .query_map(params![at], |r| {
                    let push = UnsentPush { key: r.get(0)?, body: r.get(1)?, webhook_only: r.get(2)? };
                    Ok((push, (r.get(3)?, r.get(4)?, r.get(5)?)))
                })?
                .collect::<Result<_, _>>()?;
            let mut claimed = Vec::new();
            for (push, claim) in rows {
                let stands = match claim {
                    (None, _, _) => false,
                    (Some(at), _, _) if at < stale => false,
                    (Some(_), Some(pid), Some(start)) => {
                        crate::process::ProcessId { pid, start: start as u64 }.is_alive()
                    }
                    // Claimed by a sender of before owners were kept.
                    (Some(_), _, _) => true,
                };
                if stands {
                    continue;
                }
                tx.execute(
                    "UPDATE pushes SET claimed_at = ?2, claimer_pid = ?3, claimer_start = ?4 WHERE key = ?1",
                    params![push.key, at, me.map(|p| p.pid), me.map(|p| p.start as i64)],
                )?;
                claimed.push(push);
            }
            Ok(claimed)
        })
    }

    /// A claimed push the server took.
    pub fn push_sent(&mut self, key: &str) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("recording a push sent", |tx| {
            tx.execute("UPDATE pushes SET sent_at = ?2, claimed_at = NULL WHERE key = ?1", params![key, now])?;
            Ok(())
        })
    }

    /// A claimed push the server did not take (or, `webhook_only`, that the
    /// phone took and the webhook did not): tried again later, a little
    /// longer after each failure (1 s, 2 s, 4 s, … at most 10 min).
    pub fn push_not_sent(&mut self, key: &str, trouble: &str, webhook_only: bool) -> Result<(), StoreError> {
        let now = time::now();
        self.write("giving back a push", |tx| {
            let tries: i64 = tx.query_row("SELECT tries FROM pushes WHERE key = ?1", [key], |r| r.get(0))?;
            let wait = (1i64 << tries.clamp(0, 10)).min(MOST_BETWEEN_TRIES);
            let next = time::format(now + chrono::Duration::seconds(wait));
            tx.execute(
                "UPDATE pushes SET claimed_at = NULL, tries = tries + 1, trouble = ?2, next_try_at = ?3, \
                 webhook_only = ?4 WHERE key = ?1",
                params![key, trouble, next, webhook_only],
            )?;
            Ok(())
        })
    }

    /// When the next push given back is due, if one is; one claimed and
    /// not sent is due now (its sender is looked at again: a sender that
    /// stopped mid-send leaves it to the next).
    pub fn next_push_try(&self) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row(
                "SELECT min(coalesce(claimed_at, next_try_at)) FROM pushes
                 WHERE sent_at IS NULL AND (claimed_at IS NOT NULL OR next_try_at IS NOT NULL)",
                [],
                |r| r.get(0),
            )
            .doing("reading when a push is tried again")
    }

    /// Records the answer to push `key`: true if this is the first, false
    /// if it was answered already (or is unknown): an answer acts once.
    pub fn answer_push(&mut self, key: &str) -> Result<bool, StoreError> {
        let now = time::format(time::now());
        self.write("recording a push's answer", |tx| {
            let n = tx.execute(
                "UPDATE pushes SET answered_at = ?2 WHERE key = ?1 AND answered_at IS NULL",
                params![key, now],
            )?;
            Ok(n == 1)
        })
    }

    /// Why the last send of a push failed, for those still not sent.
    pub fn push_trouble(&self) -> Result<Option<(u64, String)>, StoreError> {
        self.conn()
            .query_row(
                "SELECT count(*), max(trouble) FROM pushes WHERE sent_at IS NULL AND trouble IS NOT NULL",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)),
            )
            .optional()
            .doing("reading what pushes wait")
            .map(|row| match row {
                Some((n, Some(trouble))) if n > 0 => Some((n as u64, trouble)),
                _ => None,
            })
    }
}

/// The longest a sender's claim on a push stands, however alive the
/// sender (one hung for good).
const CLAIM_STANDS: i64 = 600;

/// The longest wait between two tries of a push, in seconds.
const MOST_BETWEEN_TRIES: i64 = 600;

/// A push's claim as kept: when, and by which process (pid, start).
type Claim = (Option<String>, Option<i32>, Option<i64>);

/// A push claimed to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsentPush {
    /// Its key.
    pub key: String,
    /// The message, as JSON.
    pub body: String,
    /// The phone took it: the webhook alone is left.
    pub webhook_only: bool,
}
