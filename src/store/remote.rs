//! Runs of other machines, mirrored from their own stores (see `remote`),
//! and what this machine knows of each host. Persisted; the connections
//! that fill them are runtime state of their follower.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::changes::Change;
use super::{Doing, Store, StoreError};
use crate::run::{Run, RunStatus};
use crate::text::time;

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
    /// The identity of the store its runs were read from.
    pub store: Option<String>,
    /// What keeps it from being followed now, if anything.
    pub trouble: Option<HostTrouble>,
}

/// What keeps a host from being followed: its runs are then shown as last
/// seen, with these words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostTrouble {
    /// The connection fails, or it does not answer.
    Unreachable,
    /// Its Corral is another version.
    OtherVersion,
    /// Its host key is not known or changed.
    HostKey,
    /// It refused the key, or the settings are wrong.
    Refused,
    /// No `corral` there.
    NoCorral,
}

impl HostTrouble {
    /// As stored and as printed in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            HostTrouble::Unreachable => "unreachable",
            HostTrouble::OtherVersion => "other_version",
            HostTrouble::HostKey => "host_key",
            HostTrouble::Refused => "refused",
            HostTrouble::NoCorral => "no_corral",
        }
    }

    /// A few words for a status column.
    pub fn short(self) -> &'static str {
        match self {
            HostTrouble::Unreachable => "unreachable",
            HostTrouble::OtherVersion => "other corral there",
            HostTrouble::HostKey => "host key refused",
            HostTrouble::Refused => "key refused",
            HostTrouble::NoCorral => "no corral there",
        }
    }

    fn parse(text: &str) -> Option<HostTrouble> {
        [
            HostTrouble::Unreachable,
            HostTrouble::OtherVersion,
            HostTrouble::HostKey,
            HostTrouble::Refused,
            HostTrouble::NoCorral,
        ]
        .into_iter()
        .find(|t| t.as_str() == text)
    }
}

/// Where reading a host's changes starts, once its store's identity is
/// known (see [`Store::host_store_seen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostHistory {
    /// The same store as before: go on after `seq`.
    Same { seq: i64 },
    /// Its runs were mirrored under another name (`from`, renamed or
    /// removed in config.toml): now this host's, read on after `seq`.
    Renamed { from: String, seq: i64 },
    /// Another store than the one mirrored: read from the start; `lost`
    /// active runs it no longer has were marked lost.
    Replaced { lost: usize },
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
    /// The host answered: a trouble recorded before is over.
    pub fn record_remote_launch(
        &mut self,
        host: &str,
        run: &Run,
        launched_by: Option<&str>,
        fire: Option<&super::FireLink<'_>>,
    ) -> Result<(), StoreError> {
        let now = time::format(time::now());
        self.write("recording a run launched on a host", |tx| {
            upsert(tx, host, 0, run)?;
            tx.execute(
                "UPDATE hosts SET reachable = 1, since = ?2, error = NULL, trouble = NULL, checked_at = ?2
                 WHERE name = ?1 AND NOT reachable",
                params![host, now],
            )?;
            tx.execute(
                "UPDATE remote_runs SET launched_by = ?3 WHERE host = ?1 AND id = ?2",
                params![host, run.id, launched_by],
            )?;
            if let Some(link) = fire {
                super::fires::record_fire_run(tx, link, &run.id)?;
            }
            Ok(())
        })
    }

    /// The runs of other hosts that local run `run_id`'s agent launched, as
    /// last seen: a parent waits for them as for its own children.
    pub fn remote_children(&self, run_id: &str) -> Result<Vec<Run>, StoreError> {
        let doing = "listing the runs a run launched on other hosts";
        let rows: Vec<Mirrored> = self
            .conn()
            .prepare_cached(
                "SELECT r.host, r.run, h.since, h.error FROM remote_runs r
                 LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE r.launched_by = ?1 ORDER BY r.created_at",
            )
            .doing(doing)?
            .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        Ok(rows.into_iter().filter_map(|(host, json, since, why)| parse(&host, &json, since.zip(why))).collect())
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
                "SELECT r.host, r.run, h.since, h.error FROM remote_runs r LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE ?1 IS NULL OR r.host = ?1 ORDER BY r.created_at DESC, r.id",
            )
            .doing(doing)?;
        let rows: Vec<Mirrored> = stmt
            .query_map([host], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?, r.get(3)?)))
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        Ok(rows.into_iter().filter_map(|(host, json, since, why)| parse(&host, &json, since.zip(why))).collect())
    }

    /// The run of another host whose id is `id_or_prefix`, or the one run
    /// whose id starts so; `None` if no host has one.
    pub fn find_remote_run(&self, id_or_prefix: &str) -> Result<Option<Run>, StoreError> {
        let doing = "finding a run of another host";
        let pattern = format!("{}%", id_or_prefix.replace(['%', '_'], ""));
        let rows: Vec<(String, Mirrored)> = self
            .conn()
            .prepare_cached(
                "SELECT r.id, r.host, r.run, h.since, h.error FROM remote_runs r
                 LEFT JOIN hosts h ON h.name = r.host AND NOT h.reachable
                 WHERE r.id = ?1 OR r.id LIKE ?2 ORDER BY r.id LIMIT 10",
            )
            .doing(doing)?
            .query_map(params![id_or_prefix, pattern], |r| {
                Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            })
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        let exact: Vec<_> = rows.iter().filter(|(id, _)| id == id_or_prefix).collect();
        let chosen = match (exact.as_slice(), rows.as_slice()) {
            ([one], _) => *one,
            (_, [one]) => one,
            (_, []) => return Ok(None),
            (_, many) => {
                let matches = many.iter().map(|(id, (h, ..))| format!("{id} on {h}")).collect::<Vec<_>>().join(", ");
                return Err(StoreError::AmbiguousRun { prefix: id_or_prefix.to_string(), matches });
            }
        };
        let (_, (host, json, since, why)) = chosen;
        Ok(parse(host, json, since.clone().zip(why.clone())))
    }

    /// Runs of other hosts that ended and were not announced yet, marked
    /// announced in the same transaction: each is announced once, by the
    /// one process that claims it.
    pub fn claim_remote_endings(&mut self, limit: usize) -> Result<Vec<Run>, StoreError> {
        let now = time::format(time::now());
        let terminal = RunStatus::terminal_sql();
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
        let terminal = RunStatus::terminal_sql();
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

    /// What this machine knows of `host` (nothing before it was followed).
    pub fn host_state(&self, host: &str) -> Result<Option<HostState>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT name, seq, reachable, since, error, version, checked_at, store, trouble FROM hosts WHERE name = ?1",
            )
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
                    store: r.get(7)?,
                    trouble: r.get::<_, Option<String>>(8)?.as_deref().and_then(HostTrouble::parse),
                })
            })
            .optional()
            .doing("reading a host's state")
    }

    /// Records that `host` answers, its `corral` at `version` (if known).
    pub fn record_host_answers(&mut self, host: &str, version: Option<&str>) -> Result<(), StoreError> {
        self.record_host(host, None, version, None)
    }

    /// Records that `host` cannot be followed now: what kind of trouble,
    /// and its words.
    pub fn record_host_trouble(&mut self, host: &str, trouble: HostTrouble, error: &str) -> Result<(), StoreError> {
        self.record_host(host, Some(trouble), None, Some(error))
    }

    /// `since` moves only when whether it answers changes.
    fn record_host(
        &mut self,
        host: &str,
        trouble: Option<HostTrouble>,
        version: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = time::format(time::now());
        let reachable = trouble.is_none();
        self.write("recording whether a host answers", |tx| {
            tx.execute(
                "INSERT INTO hosts (name, reachable, since, error, version, checked_at, trouble)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?3, ?6)
                 ON CONFLICT (name) DO UPDATE SET
                   since = CASE WHEN reachable IS ?2 AND since IS NOT NULL THEN since ELSE ?3 END,
                   reachable = ?2, error = ?4, version = coalesce(?5, version), checked_at = ?3, trouble = ?6",
                params![host, reachable, now, error, version, trouble.map(HostTrouble::as_str)],
            )
        })?;
        Ok(())
    }

    /// This store's identity, which a machine following it keeps.
    pub fn identity(&self) -> Result<String, StoreError> {
        self.conn()
            .prepare_cached("SELECT store FROM store_identity WHERE id = 1")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .doing("reading the store's identity")
    }

    /// Settles whose history `host`'s store (identity `store`, at change
    /// `remote_seq`) is, in one transaction: runs mirrored under another
    /// name for the same store become this host's (it was renamed), unless
    /// that name is one of `configured` too (two machines cloned from one
    /// image after Corral ran there share a store's identity: each keeps
    /// its runs, never moved to the other); a store other than the one
    /// mirrored is a new history, and the active runs it no longer has are
    /// marked lost, in words ("gone from host …").
    pub fn host_store_seen(
        &mut self,
        host: &str,
        store: &str,
        remote_seq: i64,
        configured: &[String],
    ) -> Result<HostHistory, StoreError> {
        let now = time::format(time::now());
        let active = RunStatus::sql_list(RunStatus::ACTIVE);
        self.write("settling a host's history", |tx| {
            let known: Option<(Option<String>, i64)> = tx
                .query_row("SELECT store, seq FROM hosts WHERE name = ?1", [host], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            // Names of this store no longer in config.toml: the host's old
            // names.
            let others: Vec<(String, i64)> = tx
                .prepare("SELECT name, seq FROM hosts WHERE store = ?1 AND name != ?2 ORDER BY seq DESC")?
                .query_map(params![store, host], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let renamed: Vec<(String, i64)> = others.into_iter().filter(|(n, _)| !configured.contains(n)).collect();
            let other = renamed.first().cloned();
            tx.execute(
                "INSERT INTO hosts (name, store) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET store = ?2",
                params![host, store],
            )?;
            if let Some((from, seq)) = other {
                let mine = known.as_ref().filter(|(s, _)| s.as_deref() == Some(store)).map_or(0, |(_, seq)| *seq);
                let seq = seq.max(mine);
                for (name, _) in &renamed {
                    tx.execute("UPDATE OR REPLACE remote_runs SET host = ?1 WHERE host = ?2", params![host, name])?;
                    tx.execute("DELETE FROM hosts WHERE name = ?1", [name])?;
                }
                tx.execute("UPDATE hosts SET seq = ?2 WHERE name = ?1", params![host, seq])?;
                return Ok(HostHistory::Renamed { from, seq });
            }
            match known {
                Some((Some(was), seq)) if was == store && remote_seq >= seq => Ok(HostHistory::Same { seq }),
                // A host first followed before stores had identities.
                Some((None, seq)) if remote_seq >= seq => Ok(HostHistory::Same { seq }),
                None => Ok(HostHistory::Same { seq: 0 }),
                Some(_) => {
                    let said = format!(
                        "gone from host '{host}': its store was replaced (reinstalled, or another CORRAL_HOME) \
                         and no longer has this run; its end is not known"
                    );
                    let lost = tx.execute(
                        &format!(
                            "UPDATE remote_runs SET status = '{lost}', notified_at = NULL,
                               run = json_set(run, '$.status', '{lost}', '$.error', ?2, '$.completed_at', ?3)
                             WHERE host = ?1 AND status IN {active}",
                            lost = RunStatus::Lost
                        ),
                        params![host, said, now],
                    )?;
                    tx.execute("UPDATE hosts SET seq = 0 WHERE name = ?1", [host])?;
                    Ok(HostHistory::Replaced { lost })
                }
            }
        })
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

/// A mirrored row: host, run, and since when and why its host cannot be
/// followed, if it cannot.
type Mirrored = (String, String, Option<String>, Option<String>);

/// A mirrored run, with its host, and since when and why the host cannot
/// be followed if it cannot and the run was active; `None` for a row this
/// Corral cannot read (written by a newer one: skipped, not fatal).
fn parse(host: &str, json: &str, trouble: Option<(String, String)>) -> Option<Run> {
    let mut run: Run = serde_json::from_str(json).ok()?;
    run.host = Some(host.to_string());
    // A host's word, checked for sense: a cost is never below zero.
    run.cost_usd = run.cost_usd.map(|usd| if usd.is_finite() { usd.max(0.0) } else { 0.0 });
    let (since, why) = trouble.filter(|_| run.status.is_active()).unzip();
    run.unreachable_since = since;
    run.host_trouble = why;
    Some(run)
}
