//! The pushes to the user's phone (see `push`): each kept under its key,
//! sent once by whichever process claims it, and answered once.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::time;

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

    /// Claims every push not sent yet (oldest first): they are this
    /// process's to send, and [`Store::push_not_sent`] gives one back.
    pub fn claim_unsent_pushes(&mut self) -> Result<Vec<(String, String)>, StoreError> {
        let now = time::format(time::now());
        self.write("claiming pushes to send", |tx| {
            let claimed: Vec<(String, String)> = tx
                .prepare("SELECT key, body FROM pushes WHERE sent_at IS NULL ORDER BY created_at")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            tx.execute("UPDATE pushes SET sent_at = ?1 WHERE sent_at IS NULL", [now])?;
            Ok(claimed)
        })
    }

    /// A claimed push the server did not take: sent again later.
    pub fn push_not_sent(&mut self, key: &str, trouble: &str) -> Result<(), StoreError> {
        self.write("giving back a push", |tx| {
            tx.execute(
                "UPDATE pushes SET sent_at = NULL, tries = tries + 1, trouble = ?2 WHERE key = ?1",
                params![key, trouble],
            )?;
            Ok(())
        })
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
