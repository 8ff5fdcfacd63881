//! What the desktop app asks of the `runs` table: the tray's counts,
//! notifications claimed exactly once, "Clear finished", and the day's
//! usage. Kept apart from the lifecycle queries in `runs.rs`.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::run::{Run, RunStatus};
use crate::text::time;

/// The tray's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Queued, starting, running or waiting: working, or about to.
    pub running: u64,
    /// Runs not cleared.
    pub total: u64,
    /// Runs that failed or were lost whose transcript the user has not
    /// opened yet, and not cleared: the tray looks different while any are.
    pub unseen_failures: u64,
    /// Paused: not working, holding no slot.
    pub paused: u64,
}

/// The one rule of which of `runs`' rows need the user: `attention`'s
/// list (behind the tray's icon, the window, `needs` and `top`) reads it
/// here.
/// The most ended runs that need the user the list holds.
pub const ENDED_LISTED: usize = 200;

fn needs_you() -> String {
    format!(
        "((status = '{paused}' AND pause_reason IS NOT NULL)
          OR (status = '{queued}' AND agent IN (SELECT agent FROM usage_limits
                WHERE resets_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
          OR ({ended_badly} AND seen_at IS NULL)
          OR (denied IS NOT NULL AND seen_at IS NULL AND status IN {ended})
          OR (retrying IS NOT NULL AND status IN {active}))",
        paused = RunStatus::Paused,
        queued = RunStatus::Queued,
        ended_badly = crate::run::Run::ENDED_BADLY_SQL,
        ended = RunStatus::terminal_sql(),
        active = RunStatus::active_sql(),
    )
}

/// Tokens and cost of the runs created since a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Spend {
    /// All tokens.
    pub tokens: u64,
    /// Cost in USD, of runs that report one.
    pub cost_usd: f64,
    /// CPU seconds of the runs' whole process trees, as last measured.
    pub cpu_seconds: f64,
}

/// What one preset's runs spent on one day: a bar of the Timeline's chart.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DaySpend {
    /// The local day the runs were created on, `2026-11-27`.
    pub day: String,
    /// Their preset.
    pub preset: String,
    /// How many runs.
    pub runs: u64,
    /// All their tokens.
    pub tokens: u64,
    /// Their cost in USD (reported or estimated), of runs that have one.
    pub cost_usd: f64,
}

impl Store {
    /// A counter that moves when a run is added, changes status, or is
    /// cleared or seen — not on transcript lines: what the tray and the
    /// notifications watch.
    pub fn status_version(&self) -> Result<i64, StoreError> {
        self.conn()
            .prepare_cached("SELECT version FROM status_version WHERE id = 1")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .doing("reading the status version")
    }

    /// The tray's counts: this machine's runs and those followed on other
    /// hosts.
    pub fn counts(&self) -> Result<Counts, StoreError> {
        let local = self.local_counts()?;
        let sql = format!(
            // A run of a host that cannot be reached is not known to be
            // running: counted in the total, not as running.
            "SELECT
               count(*) FILTER (WHERE status IN {working}
                                  AND host NOT IN (SELECT name FROM hosts WHERE NOT reachable)),
               count(*),
               count(*) FILTER (WHERE status IN {failed} AND seen_at IS NULL),
               count(*) FILTER (WHERE status = '{paused}')
             FROM remote_runs",
            working =
                RunStatus::sql_list(&[RunStatus::Queued, RunStatus::Starting, RunStatus::Running, RunStatus::Waiting]),
            failed = RunStatus::sql_list(&[RunStatus::Failed, RunStatus::Lost]),
            paused = RunStatus::Paused,
        );
        let (running, total, unseen, paused): (i64, i64, i64, i64) = self
            .conn()
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))))
            .doing("counting runs of other hosts")?;
        Ok(Counts {
            running: local.running + running as u64,
            total: local.total + total as u64,
            unseen_failures: local.unseen_failures + unseen as u64,
            paused: local.paused + paused as u64,
        })
    }

    /// This machine's runs that may need the user (see `attention`), not
    /// cleared, newest first: paused by Corral (a budget, a usage limit),
    /// failed or lost and not yet opened, ended with actions denied and
    /// not yet opened, or retrying while active.
    pub fn runs_needing_you(&self) -> Result<Vec<crate::run::Run>, StoreError> {
        // A run that waits for an answer (paused at a budget, retrying) is
        // always listed, however many ended runs came after it; of those,
        // the newest [`ENDED_LISTED`] ([`Store::needing_you_beyond`] counts
        // the rest).
        let sql = format!(
            "SELECT id FROM (SELECT id, num FROM runs WHERE dismissed_at IS NULL AND {needs} AND status IN {active}
               UNION ALL
               SELECT * FROM (SELECT id, num FROM runs WHERE dismissed_at IS NULL AND {needs} AND status IN {ended}
                 ORDER BY num DESC LIMIT {ENDED_LISTED}))
             ORDER BY num DESC",
            needs = needs_you(),
            active = RunStatus::active_sql(),
            ended = RunStatus::terminal_sql(),
        );
        let mut stmt = self.conn().prepare_cached(&sql).doing("listing what needs you")?;
        let ids: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .doing("listing what needs you")?
            .collect::<Result<_, _>>()
            .doing("listing what needs you")?;
        ids.iter().map(|id| self.run(id)).collect()
    }

    /// How many ended runs need the user beyond those
    /// [`Store::runs_needing_you`] lists: said as "and N more", never
    /// dropped in silence.
    pub fn needing_you_beyond(&self) -> Result<u64, StoreError> {
        let sql = format!(
            "SELECT max(count(*) - {ENDED_LISTED}, 0) FROM runs WHERE dismissed_at IS NULL AND {} AND status IN {}",
            needs_you(),
            RunStatus::terminal_sql()
        );
        self.conn()
            .query_row(&sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n.max(0) as u64)
            .doing("counting what needs you")
    }

    /// This machine's runs only.
    pub fn local_counts(&self) -> Result<Counts, StoreError> {
        let sql = format!(
            "SELECT
               count(*) FILTER (WHERE status IN {working}),
               count(*),
               count(*) FILTER (WHERE {ended_badly} AND seen_at IS NULL),
               count(*) FILTER (WHERE status = '{paused}')
             FROM runs WHERE dismissed_at IS NULL",
            working =
                RunStatus::sql_list(&[RunStatus::Queued, RunStatus::Starting, RunStatus::Running, RunStatus::Waiting]),
            ended_badly = crate::run::Run::ENDED_BADLY_SQL,
            paused = RunStatus::Paused,
        );
        self.conn()
            .query_row(&sql, [], |r| {
                Ok(Counts {
                    running: r.get::<_, i64>(0)? as u64,
                    total: r.get::<_, i64>(1)? as u64,
                    unseen_failures: r.get::<_, i64>(2)? as u64,
                    paused: r.get::<_, i64>(3)? as u64,
                })
            })
            .doing("counting runs")
    }

    /// Gives claims back: the notification server refused their
    /// announcement (none is running yet, at login), so a later round
    /// claims and shows them again. Never lost, never twice.
    pub fn unclaim_notifications(&mut self, ids: &[String]) -> Result<(), StoreError> {
        self.write("giving notifications back", |tx| {
            for id in ids {
                tx.execute("UPDATE runs SET notified_at = NULL WHERE id = ?1", [id])?;
                tx.execute("UPDATE remote_runs SET notified_at = NULL WHERE id = ?1", [id])?;
            }
            Ok(())
        })
    }

    /// Claims the ended runs nobody has announced yet, at most `limit`,
    /// oldest first. The claim is one transaction: of several app instances
    /// (or restarts) exactly one gets each run.
    pub fn claim_notifications(&mut self, limit: usize) -> Result<Vec<Run>, StoreError> {
        let now = time::format(time::now());
        let ids: Vec<String> = self.write("claiming notifications", |tx| {
            let mut stmt = tx.prepare(&format!(
                "UPDATE runs SET notified_at = ?1
                 WHERE num IN (SELECT num FROM runs
                               WHERE notified_at IS NULL AND status IN {}
                               ORDER BY num LIMIT ?2)
                 RETURNING id",
                RunStatus::terminal_sql()
            ))?;
            let ids = stmt.query_map(params![now, limit as i64], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
            Ok(ids)
        })?;
        let mut runs = ids.iter().map(|id| self.run(id)).collect::<Result<Vec<_>, _>>()?;
        runs.sort_by(|a, b| a.completed_at.cmp(&b.completed_at));
        Ok(runs)
    }

    /// Marks runs as seen by the user (their transcript was opened), which
    /// ends the tray's "unseen failure" look for them.
    pub fn mark_seen(&mut self, id: &str) -> Result<(), StoreError> {
        // Looked at again and again by the window: no write once it is.
        let seen: bool = self
            .conn()
            .query_row("SELECT seen_at IS NOT NULL FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .doing("reading whether a run was seen")?;
        if seen {
            return Ok(());
        }
        // Only an ended run is seen: one opened while it works and failing
        // later must still need the user, whichever door opened it (the
        // window, `show`, `top`).
        let now = time::format(time::now());
        self.write("marking a run seen", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET seen_at = coalesce(seen_at, ?2) WHERE id = ?1 AND status IN {}",
                    RunStatus::terminal_sql()
                ),
                params![id, now],
            )
        })
        .map(drop)
    }

    /// "Clear finished": ended runs leave the tray's total and the default
    /// lists (they stay in the store; `ls --all` shows them), but for what
    /// still needs the user (a failure not looked at, one click never
    /// wipes them all) and a worktree run whose work is not merged (never
    /// hidden from the review it waits for). Returns how many.
    pub fn dismiss_finished(&mut self) -> Result<usize, StoreError> {
        let now = time::format(time::now());
        self.write("clearing finished runs", |tx| {
            tx.execute(
                &format!(
                    "UPDATE runs SET dismissed_at = ?1 WHERE dismissed_at IS NULL AND status IN {} AND NOT {}
                       AND NOT (worktree_path IS NOT NULL AND worktree_removed_at IS NULL
                         AND coalesce(changes_files, 1) > 0 AND worktree_merged IS NULL)",
                    RunStatus::terminal_sql(),
                    needs_you()
                ),
                [now],
            )
        })
    }

    /// Tokens and cost of runs created at or after `since`.
    pub fn spend_since(&self, since: time::Timestamp) -> Result<Spend, StoreError> {
        self.conn()
            .query_row(
                "SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0),
                        coalesce(sum(cost_usd), 0.0), coalesce(sum(cpu_seconds), 0.0)
                 FROM runs WHERE created_at >= ?1",
                [time::format(since)],
                |r| Ok(Spend { tokens: r.get::<_, i64>(0)? as u64, cost_usd: r.get(1)?, cpu_seconds: r.get(2)? }),
            )
            .doing("summing usage")
    }

    /// What each preset's runs spent per local day (this process's time
    /// zone), for runs created at or after `since`; oldest day first.
    pub fn spend_by_day(&self, since: time::Timestamp) -> Result<Vec<DaySpend>, StoreError> {
        let doing = "summing spend per day";
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT date(created_at, 'localtime') AS day, preset, count(*),
                        coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0),
                        coalesce(sum(cost_usd), 0.0)
                 FROM runs WHERE created_at >= ?1 GROUP BY day, preset ORDER BY day, preset",
            )
            .doing(doing)?;
        let rows = stmt
            .query_map([time::format(since)], |r| {
                Ok(DaySpend {
                    day: r.get(0)?,
                    preset: r.get(1)?,
                    runs: r.get::<_, i64>(2)? as u64,
                    tokens: r.get::<_, i64>(3)? as u64,
                    cost_usd: r.get(4)?,
                })
            })
            .doing(doing)?;
        rows.collect::<Result<_, _>>().doing(doing)
    }

    /// The number of transcript events of a run.
    pub fn event_count(&self, run_id: &str) -> Result<i64, StoreError> {
        self.conn()
            .query_row("SELECT count(*) FROM events WHERE run_id = ?1", [run_id], |r| r.get(0))
            .doing("counting transcript events")
    }
}
