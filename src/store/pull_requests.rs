//! The `pull_requests` table: the pull request (or merge request) opened
//! from a run's branch, as Corral opened it and last pushed to it.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::{Doing, Store, StoreError};

/// A run's pull request, as recorded (`Default` for what a look fills in
/// later: a new one is written with its opening facts and the rest unset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
    /// `passing`, `failing` or `pending`, as last looked at.
    pub checks: Option<String>,
    /// `approved`, `changes_requested` or `commented`.
    pub review: Option<String>,
    /// What the forge asks of the run, in its words (failed checks,
    /// reviews, line comments), and when that last changed.
    pub feedback: Option<String>,
    pub feedback_at: Option<String>,
    /// When the feedback was last sent to the run.
    pub sent_at: Option<String>,
    /// When the forge was last asked.
    pub looked_at: Option<String>,
    /// Its end on the forge (merged, closed) looked at.
    pub dismissed_at: Option<String>,
    /// One pull request of several runs' work (`corral pr A B C`).
    pub together: bool,
}

/// What the forge said of a pull request at a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestLook {
    pub state: String,
    pub checks: Option<String>,
    pub review: Option<String>,
    pub feedback: Option<String>,
}

impl PullRequestRow {
    /// What its forge calls it: `pull request`, or `merge request` (GitLab).
    pub fn kind(&self) -> &'static str {
        if self.forge == "gitlab" {
            "merge request"
        } else {
            "pull request"
        }
    }

    /// `#42` (GitHub) or `!42` (GitLab), else its page.
    pub fn name(&self) -> String {
        match (self.number, self.forge.as_str()) {
            (Some(n), "gitlab") => format!("!{n}"),
            (Some(n), _) => format!("#{n}"),
            (None, _) => self.url.clone(),
        }
    }

    /// True while the forge asks something of the run that was neither
    /// sent to it, answered by a push, nor dismissed since.
    pub fn asks(&self) -> bool {
        let before = |at: &str, other: Option<&str>| other.is_none_or(|other| other < at);
        match (&self.feedback, self.feedback_at.as_deref()) {
            (Some(_), Some(at)) if self.state == "open" => {
                before(at, self.sent_at.as_deref())
                    && before(at, Some(&self.pushed_at))
                    && before(at, self.dismissed_at.as_deref())
            }
            _ => false,
        }
    }

    /// True once it was merged or closed on the forge, and that was not
    /// looked at yet.
    pub fn ended_unseen(&self) -> bool {
        self.state != "open" && self.dismissed_at.is_none()
    }
}

/// The rows of run `?1`'s pull request: what the forge says of it, its
/// feedback sent, its end looked at, are the pull request's, whichever of
/// its runs (a pull request of several, or runs launched on one) asks.
const SAME: &str = "url = (SELECT url FROM pull_requests WHERE run_id = ?1)";

/// The columns every read takes, in [`row`]'s order.
const COLUMNS: &str = "run_id, forge, url, number, remote, head, base, draft, state, pushed, opened_at, pushed_at, \
     checks, review, feedback, feedback_at, sent_at, looked_at, dismissed_at, together";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PullRequestRow> {
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
        checks: r.get(12)?,
        review: r.get(13)?,
        feedback: r.get(14)?,
        feedback_at: r.get(15)?,
        sent_at: r.get(16)?,
        looked_at: r.get(17)?,
        dismissed_at: r.get(18)?,
        together: r.get(19)?,
    })
}

impl Store {
    /// Records the pull request `pr` (opened, or pushed to again).
    pub fn record_pull_request(&mut self, pr: &PullRequestRow) -> Result<(), StoreError> {
        self.write("recording a pull request", |tx| {
            tx.execute(
                "INSERT INTO pull_requests
                   (run_id, forge, url, number, remote, head, base, draft, state, pushed, opened_at, pushed_at,
                    together)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
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
                    pr.pushed_at,
                    pr.together
                ],
            )
            .map(drop)
        })
    }

    /// Run `run_id`'s pull request, if one was opened.
    pub fn pull_request(&self, run_id: &str) -> Result<Option<PullRequestRow>, StoreError> {
        self.conn()
            .prepare_cached(&format!("SELECT {COLUMNS} FROM pull_requests WHERE run_id = ?1"))
            .and_then(|mut stmt| stmt.query_row([run_id], row).optional())
            .doing("reading a pull request")
    }

    /// The runs of the pull request of several runs at `url`, in the order
    /// their work is merged in.
    pub fn runs_together(&self, url: &str) -> Result<Vec<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT run_id FROM pull_requests WHERE url = ?1 AND together ORDER BY rowid")
            .and_then(|mut stmt| stmt.query_map([url], |r| r.get(0))?.collect())
            .doing("reading a pull request's runs")
    }

    /// Every pull request Corral follows: open ones, and ended ones whose
    /// end was not looked at.
    pub fn pull_requests(&self) -> Result<Vec<PullRequestRow>, StoreError> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM pull_requests WHERE state = 'open' OR dismissed_at IS NULL ORDER BY opened_at"
            ))
            .and_then(|mut stmt| stmt.query_map([], row)?.collect())
            .doing("listing pull requests")
    }

    /// Records a look at run `run_id`'s pull request: what changed, with
    /// its feedback's time moved only when its words did; a look that found
    /// nothing new writes its time alone.
    pub fn record_look(&mut self, run_id: &str, look: &PullRequestLook) -> Result<(), StoreError> {
        let now = crate::text::time::format(crate::text::time::now());
        self.write("recording a look at a pull request", |tx| {
            let before: Option<PullRequestLook> = tx
                .query_row(
                    "SELECT state, checks, review, feedback FROM pull_requests WHERE run_id = ?1",
                    [run_id],
                    |r| {
                        Ok(PullRequestLook {
                            state: r.get(0)?,
                            checks: r.get(1)?,
                            review: r.get(2)?,
                            feedback: r.get(3)?,
                        })
                    },
                )
                .optional()?;
            let Some(before) = before else { return Ok(()) };
            if &before == look {
                return tx
                    .execute(&format!("UPDATE pull_requests SET looked_at = ?2 WHERE {SAME}"), params![run_id, now])
                    .map(drop);
            }
            let feedback = before.feedback;
            let feedback_at = if feedback != look.feedback && look.feedback.is_some() { Some(&now) } else { None };
            tx.execute(
                &format!(
                    "UPDATE pull_requests SET state = ?2, checks = ?3, review = ?4, feedback = ?5,
                       feedback_at = coalesce(?6, feedback_at), looked_at = ?7 WHERE {SAME}"
                ),
                params![run_id, look.state, look.checks, look.review, look.feedback, feedback_at, now],
            )
            .map(drop)
        })
    }

    /// Records that run `run_id`'s feedback was sent to it.
    pub fn mark_feedback_sent(&mut self, run_id: &str) -> Result<(), StoreError> {
        let now = crate::text::time::format(crate::text::time::now());
        self.write("recording feedback sent", |tx| {
            tx.execute(&format!("UPDATE pull_requests SET sent_at = ?2 WHERE {SAME}"), params![run_id, now]).map(drop)
        })
    }

    /// Records that what run `run_id`'s pull request asks, or its end on
    /// the forge, was looked at: it needs the user no more.
    pub fn dismiss_pull_request(&mut self, run_id: &str) -> Result<(), StoreError> {
        let now = crate::text::time::format(crate::text::time::now());
        self.write("dismissing a pull request", |tx| {
            tx.execute(&format!("UPDATE pull_requests SET dismissed_at = ?2 WHERE {SAME}"), params![run_id, now])
                .map(drop)
        })
    }
}
