//! Runs of other machines, mirrored from their own stores (see `remote`),
//! and what this machine knows of each host. Persisted; the connections
//! that fill them are runtime state of their follower.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::changes::Change;
use super::{Doing, Store, StoreError};
use crate::run::{Run, RunStatus};
use crate::time;

/// What this machine knows of a host.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostState {
    /// The host's name in `config.toml`.
    pub name: String,
    /// The last change of its store read here.
    pub seq: i64,
    /// Whether its follower reaches it now.
    pub reachable: bool,
    /// Since when it is reachable or not.
    pub since: Option<String>,
    /// Why it could not be reached, last time it could not.
    pub error: Option<String>,
    /// Its `corral --version`.
    pub version: Option<String>,
    /// When it was last heard from or tried.
    pub checked_at: Option<String>,
}

impl Store {
    /// Applies changes read from `host`'s store up to `seq`, in one
    /// transaction with the new position: a follower that dies half-way
    /// reads the same changes again, and applies each once.
    pub fn apply_remote_changes(&mut self, host: &str, changes: &[Change], seq: i64) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("recording a host's changes", |tx| {
            for change in changes {
                match change {
                    Change::Run { seq, run } => upsert(tx, host, *seq, run)?,
                    Change::Removed { removed, .. } => {
                        tx.execute("DELETE FROM remote_runs WHERE host = ?1 AND id = ?2", params![host, removed])?;
                    }
                }
            }
            tx.execute(
                "INSERT INTO hosts (name, seq, checked_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET seq = max(seq, ?2), checked_at = ?3",
                params![host, seq, now],
            )?;
            Ok(())
        })
    }

    /// Records a run just launched on `host` (before its follower sees it),
    /// so it shows at once.
    pub fn record_remote_launch(&mut self, host: &str, run: &Run, launched_by: Option<&str>) -> Result<(), StoreError> {
        self.write("recording a run launched on a host", |tx| {
            upsert(tx, host, 0, run)?;
            tx.execute(
                "UPDATE remote_runs SET launched_by = ?3 WHERE host = ?1 AND id = ?2",
                params![host, run.id, launched_by],
            )?;
            Ok(())
        })
    }

    /// The runs of other hosts that local run `run_id`'s agent launched, as
    /// last seen: a parent waits for them as for its own children.
    pub fn remote_children(&self, run_id: &str) -> Result<Vec<Run>, StoreError> {
        let doing = "listing the runs a run launched on other hosts";
        let rows: Vec<(String, String, Option<String>)> = self
            .conn()
            .prepare_cached(
                "SELECT r.host, r.run, h.since FROM remote_runs r
                 LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE r.launched_by = ?1 ORDER BY r.created_at",
            )
            .doing(doing)?
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        Ok(rows.into_iter().filter_map(|(host, json, down)| parse(&host, &json, down)).collect())
    }

    /// The local run whose agent launched run `id` of another host, if one did.
    pub fn remote_launched_by(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT launched_by FROM remote_runs WHERE id = ?1")
            .doing("reading who launched a run of another host")?
            .query_row([id], |r| r.get(0))
            .optional()
            .map(Option::flatten)
            .doing("reading who launched a run of another host")
    }

    /// Runs of every host (or of one), newest first.
    pub fn remote_runs(&self, host: Option<&str>) -> Result<Vec<Run>, StoreError> {
        let doing = "listing runs of other hosts";
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT r.host, r.run, h.since FROM remote_runs r LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE ?1 IS NULL OR r.host = ?1 ORDER BY r.created_at DESC, r.id",
            )
            .doing(doing)?;
        let rows = stmt
            .query_map([host], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?)))
            .doing(doing)?
            .collect::<Result<Vec<_>, _>>()
            .doing(doing)?;
        Ok(rows.into_iter().filter_map(|(host, json, down)| parse(&host, &json, down)).collect())
    }

    /// The run of another host whose id is `id_or_prefix`, or the one run
    /// whose id starts so; `None` if no host has one.
    pub fn find_remote_run(&self, id_or_prefix: &str) -> Result<Option<Run>, StoreError> {
        let doing = "finding a run of another host";
        let pattern = format!("{}%", id_or_prefix.replace(['%', '_'], ""));
        let rows: Vec<(String, String, String, Option<String>)> = self
            .conn()
            .prepare_cached(
                "SELECT r.host, r.id, r.run, h.since FROM remote_runs r
                 LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE r.id = ?1 OR r.id LIKE ?2 ORDER BY r.id LIMIT 10",
            )
            .doing(doing)?
            .query_map(params![id_or_prefix, pattern], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        let exact: Vec<_> = rows.iter().filter(|(_, id, _, _)| id == id_or_prefix).collect();
        let chosen = match (exact.as_slice(), rows.as_slice()) {
            ([one], _) => *one,
            (_, [one]) => one,
            (_, []) => return Ok(None),
            (_, many) => {
                let matches = many.iter().map(|(h, id, _, _)| format!("{id} on {h}")).collect::<Vec<_>>().join(", ");
                return Err(StoreError::AmbiguousRun { prefix: id_or_prefix.to_string(), matches });
            }
        };
        Ok(parse(&chosen.0, &chosen.2, chosen.3.clone()))
    }

    /// Runs of other hosts that ended and were not announced yet, marked
    /// announced in the same transaction: each is announced once, by the
    /// one process that claims it.
    pub fn claim_remote_endings(&mut self, limit: usize) -> Result<Vec<Run>, StoreError> {
        let now = time::format(time::now());
        let terminal = RunStatus::sql_list(RunStatus::TERMINAL);
        let rows: Vec<(String, String)> = self.write("claiming endings of other hosts' runs", |tx| {
            let mut stmt = tx.prepare(&format!(
                "UPDATE remote_runs SET notified_at = ?1
                 WHERE rowid IN (SELECT rowid FROM remote_runs
                                 WHERE notified_at IS NULL AND status IN {terminal} LIMIT ?2)
                 RETURNING host, run"
            ))?;
            let rows = stmt.query_map(params![now, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        Ok(rows.into_iter().filter_map(|(host, json)| parse(&host, &json, None)).collect())
    }

    /// Marks the ended runs of other hosts that are already known as
    /// announced: what a host ran before it was followed is not news.
    pub fn mark_remote_endings_known(&mut self, host: &str) -> Result<(), StoreError> {
        let now = time::format(time::now());
        let terminal = RunStatus::sql_list(RunStatus::TERMINAL);
        self.write("marking a host's past endings known", |tx| {
            tx.execute(
                &format!(
                    "UPDATE remote_runs SET notified_at = ?1
                     WHERE host = ?2 AND notified_at IS NULL AND status IN {terminal}"
                ),
                params![now, host],
            )
        })?;
        Ok(())
    }

    /// Forgets the runs of `host` and how far they were read (its store
    /// was replaced, or the host removed).
    pub fn forget_host_runs(&mut self, host: &str) -> Result<(), StoreError> {
        self.write("forgetting a host's runs", |tx| {
            tx.execute("DELETE FROM remote_runs WHERE host = ?1", [host])?;
            tx.execute("UPDATE hosts SET seq = 0 WHERE name = ?1", [host])?;
            Ok(())
        })
    }

    /// What this machine knows of `host` (nothing before it was followed).
    pub fn host_state(&self, host: &str) -> Result<Option<HostState>, StoreError> {
        self.conn()
            .prepare_cached("SELECT name, seq, reachable, since, error, version, checked_at FROM hosts WHERE name = ?1")
            .doing("reading a host's state")?
            .query_row([host], |r| {
                Ok(HostState {
                    name: r.get(0)?,
                    seq: r.get(1)?,
                    reachable: r.get(2)?,
                    since: r.get(3)?,
                    error: r.get(4)?,
                    version: r.get(5)?,
                    checked_at: r.get(6)?,
                })
            })
            .optional()
            .doing("reading a host's state")
    }

    /// Records that `host` answers (its `corral` at `version`), or not and
    /// why; `since` moves only when that changes.
    pub fn record_host_reachability(
        &mut self,
        host: &str,
        reachable: bool,
        version: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("recording whether a host answers", |tx| {
            tx.execute(
                "INSERT INTO hosts (name, reachable, since, error, version, checked_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?3)
                 ON CONFLICT (name) DO UPDATE SET
                   since = CASE WHEN reachable IS ?2 AND since IS NOT NULL THEN since ELSE ?3 END,
                   reachable = ?2, error = ?4, version = coalesce(?5, version), checked_at = ?3",
                params![host, reachable, now, error, version],
            )
        })?;
        Ok(())
    }
}

/// Writes one run of `host` unless a later state of it is already here.
fn upsert(tx: &rusqlite::Transaction<'_>, host: &str, seq: i64, run: &Run) -> rusqlite::Result<()> {
    let json = serde_json::to_string(run).expect("a run always serializes");
    tx.execute(
        "INSERT INTO remote_runs (host, id, seq, status, created_at, run) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (host, id) DO UPDATE SET seq = ?3, status = ?4, run = ?6 WHERE ?3 >= seq",
        params![host, run.id, seq, run.status.to_string(), run.created_at, json],
    )?;
    Ok(())
}

/// A mirrored run, with its host, and since when the host cannot be
/// reached if it cannot and the run was active; `None` for a row this
/// Corral cannot read (written by a newer one: skipped, not fatal).
fn parse(host: &str, json: &str, unreachable_since: Option<String>) -> Option<Run> {
    let mut run: Run = serde_json::from_str(json).ok()?;
    run.host = Some(host.to_string());
    run.unreachable_since = unreachable_since.filter(|_| run.status.is_active());
    Some(run)
}
