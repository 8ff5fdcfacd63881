//! The `pull_requests` table: the pull request (or merge request) opened
//! from a run's branch, as Corral opened it and last pushed to it.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::{Doing, Store, StoreError};

/// A run's pull request, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullRequestRow {
    /// The run whose branch it is.
    pub run_id: String,
    /// `github` or `gitlab`.
    pub forge: String,
    /// Its page.
    pub url: String,
    /// Its number (`#42`, `!42`), when the forge said one.
    pub number: Option<i64>,
    /// The remote its branch was pushed to.
    pub remote: String,
    /// The branch pushed there.
    pub head: String,
    /// The branch it asks to be merged into.
    pub base: String,
    /// Opened as a draft.
    pub draft: bool,
    /// `open`, `merged` or `closed`, as last known.
    pub state: String,
    /// The commit pushed last.
    pub pushed: String,
    /// When it was opened, and pushed to last.
    pub opened_at: String,
    pub pushed_at: String,
}

impl Store {
    /// Records the pull request `pr` (opened, or pushed to again).
    pub fn record_pull_request(&mut self, pr: &PullRequestRow) -> Result<(), StoreError> {
        self.write("recording a pull request", |tx| {
            tx.execute(
                "INSERT INTO pull_requests
                   (run_id, forge, url, number, remote, head, base, draft, state, pushed, opened_at, pushed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (run_id) DO UPDATE SET pushed = excluded.pushed, pushed_at = excluded.pushed_at",
                params![
                    pr.run_id,
                    pr.forge,
                    pr.url,
                    pr.number,
                    pr.remote,
                    pr.head,
                    pr.base,
                    pr.draft,
                    pr.state,
                    pr.pushed,
                    pr.opened_at,
                    pr.pushed_at
                ],
            )
            .map(drop)
        })
    }

    /// Run `run_id`'s pull request, if one was opened.
    pub fn pull_request(&self, run_id: &str) -> Result<Option<PullRequestRow>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT run_id, forge, url, number, remote, head, base, draft, state, pushed, opened_at, pushed_at
                 FROM pull_requests WHERE run_id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([run_id], |r| {
                    Ok(PullRequestRow {
                        run_id: r.get(0)?,
                        forge: r.get(1)?,
                        url: r.get(2)?,
                        number: r.get(3)?,
                        remote: r.get(4)?,
                        head: r.get(5)?,
                        base: r.get(6)?,
                        draft: r.get(7)?,
                        state: r.get(8)?,
                        pushed: r.get(9)?,
                        opened_at: r.get(10)?,
                        pushed_at: r.get(11)?,
                    })
                })
                .optional()
            })
            .doing("reading a pull request")
    }
}
