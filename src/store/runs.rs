//! The `runs` table: one row per run, and every state transition of it.
//!
//! Transitions are guarded in SQL (`WHERE status IN (...)`), so whoever
//! commits a terminal status first wins and a run's outcome is written once.

use rusqlite::{params, OptionalExtension, Row};

use super::{Doing, Store, StoreError};
use crate::adapter::Report;
use crate::preset::Preset;
use crate::resources::{Containment, Resources};
use crate::run::{ChangeCount, Run, RunStatus, StopReason, Usage};
use crate::time;

/// Columns of a run, in the order [`run_from_row`] reads them.
const RUN_COLUMNS: &str = "id, parent_id, preset, preset_path, agent, task, cwd, model,
    resolved_model, status, stop_reason, exit_code, exit_signal, final_text, error,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, session_id,
    created_at, started_at, completed_at, exited_at, abort_requested_at, notified_at,
    dismissed_at, shepherd_pid, shepherd_start, agent_pid, agent_start, collected_at, waiting_at,
    promoted_at, promoter_pid, promoter_start, worktree_path, worktree_branch, worktree_base, worktree_repo,
    worktree_from_branch, worktree_removed_at, denied, replied_at, changes_files, changes_added, changes_removed, cost_estimated, retrying,
    containment, cpu_seconds, memory_peak_bytes, paused_at, transcript_bytes, transcript_dropped_events,
    transcript_dropped_bytes, worktree_merged, worktree_merged_squashed";

/// A run about to be launched.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The preset, snapshotted into the row so the run never depends on the
    /// file staying as it was.
    pub preset: &'a Preset,
    /// The task, verbatim.
    pub task: &'a str,
    /// The working folder (absolute).
    pub cwd: &'a str,
    /// A model override.
    pub model: Option<&'a str>,
    /// The run that launched this one.
    pub parent_id: Option<&'a str>,
    /// Where its worktree comes from, if it gets one (the agent then works
    /// in the same subfolder of it as `cwd` is of the repository).
    pub worktree: Option<&'a crate::worktree::Plan>,
}

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

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Include runs cleared with "Clear finished".
    pub include_dismissed: bool,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Only children of this run.
    pub parent_id: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
    /// After skipping this many (a page of the list).
    pub offset: usize,
    /// Only runs that ended at or after this moment (RFC 3339).
    pub ended_since: Option<String>,
    /// Only runs with one of these statuses (with `status`, both hold).
    pub statuses: Vec<RunStatus>,
    /// Only runs of this preset.
    pub preset: Option<String>,
    /// Only runs launched in this folder or below it (their folder, or the
    /// repository folder a worktree run mirrors).
    pub folder: Option<String>,
    /// Only runs created at or after this moment (RFC 3339).
    pub created_since: Option<String>,
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

/// One search match.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SearchHit {
    /// The run's id.
    pub id: String,
    /// Where it matched: `task`, `final_text`, `error` or `transcript`.
    pub field: String,
    /// The matching text, shortened around the match.
    pub snippet: String,
    /// The host of the run; absent for this machine's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

fn new_run_id() -> String {
    // Lowercase letters and digits without look-alikes; 8 of them give
    // 30^8 ≈ 6.6e11 ids, and the UNIQUE constraint catches the rest.
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    (0..8).map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char).collect()
}

impl Store {
    /// Writes a new run and returns it: `starting` if fewer than
    /// `max_parallel` runs hold a slot and none is queued before it, else
    /// `queued`. Decided inside the insert's transaction, so concurrent
    /// launchers never overfill the slots.
    ///
    /// `prepare` readies the run's folder (its kept environment) inside the
    /// same transaction, before anyone can see the row: a queued run can be
    /// promoted by another process the moment the row is committed, and its
    /// shepherd must find everything there. If it fails, nothing is recorded.
    pub fn insert_run(
        &mut self,
        new: &NewRun<'_>,
        max_parallel: usize,
        mut prepare: impl FnMut(&str) -> std::io::Result<()>,
    ) -> Result<Run, StoreError> {
        let preset_json = serde_json::to_string(new.preset).expect("a preset always serializes");
        let now = time::format(time::now());
        let me = self.me();
        let home = self.home().clone();
        let id = loop {
            let id = new_run_id();
            let inserted = self.write("recording a new run", |tx| {
                let slots = super::slots::slots_in(tx)?;
                let status = if slots.free_for_queued(max_parallel) > 0 && slots.queued == 0 {
                    RunStatus::Starting
                } else {
                    RunStatus::Queued
                };
                let starting = status == RunStatus::Starting;
                let worktree = new.worktree.map(|plan| {
                    let path = home.worktrees_dir().join(&id);
                    let cwd = path.join(&plan.prefix);
                    let text = |p: &std::path::Path| p.to_string_lossy().trim_end_matches('/').to_string();
                    (text(&path), crate::worktree::branch_of(&id), plan, text(&cwd))
                });
                let cwd = worktree.as_ref().map_or(new.cwd.to_string(), |w| w.3.clone());
                let promoted = starting.then_some(&now);
                let (promoter_pid, promoter_start) = if starting { me } else { (None, None) };
                let inserted = tx.execute(
                    "INSERT OR IGNORE INTO runs (id, parent_id, preset, preset_path, preset_json,
                       agent, task, cwd, model, status, created_at, promoted_at, promoter_pid, promoter_start,
                       worktree_path, worktree_branch, worktree_base, worktree_repo, worktree_from_branch)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
                    params![
                        id,
                        new.parent_id,
                        new.preset.name,
                        new.preset.path,
                        preset_json,
                        new.preset.agent.as_str(),
                        new.task,
                        cwd,
                        new.model.or(new.preset.model.as_deref()),
                        status.as_str(),
                        now,
                        promoted,
                        promoter_pid,
                        promoter_start,
                        worktree.as_ref().map(|w| &w.0),
                        worktree.as_ref().map(|w| &w.1),
                        worktree.as_ref().map(|w| &w.2.base),
                        worktree.as_ref().map(|w| w.2.repo.to_string_lossy().into_owned()),
                        worktree.as_ref().and_then(|w| w.2.from_branch.clone()),
                    ],
                )?;
                if inserted == 1 {
                    // Rolls the insert back if the folder cannot be readied.
                    prepare(&id).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                }
                Ok(inserted)
            });
            let inserted = match inserted {
                Err(StoreError::Sql { source: rusqlite::Error::ToSqlConversionFailure(e), .. }) => {
                    let source = match e.downcast::<std::io::Error>() {
                        Ok(io) => *io,
                        Err(other) => std::io::Error::other(other.to_string()),
                    };
                    return Err(StoreError::RunFolder { path: home.run_dir(&id), source });
                }
                other => other?,
            };
            if inserted == 1 {
                break id;
            }
        };
        self.run(&id)
    }

    /// The run with exactly this id.
    pub fn run(&self, id: &str) -> Result<Run, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
        let run = self.conn().query_row(&sql, [id], run_from_row).optional().doing("reading a run")?;
        let mut run = run.ok_or_else(|| StoreError::UnknownRun(id.to_string()))??;
        run.children = self.children(&run.id)?;
        Ok(run)
    }

    /// The run whose id is `id_or_prefix`, or the one run whose id starts so.
    pub fn find_run(&self, id_or_prefix: &str) -> Result<Run, StoreError> {
        match self.run(id_or_prefix) {
            Err(StoreError::UnknownRun(_)) if !id_or_prefix.is_empty() => {}
            other => return other,
        }
        let mut stmt = self
            .conn()
            .prepare("SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY num LIMIT 6")
            .doing("finding a run")?;
        let ids: Vec<String> = stmt
            .query_map([id_or_prefix], |r| r.get(0))
            .doing("finding a run")?
            .collect::<Result<_, _>>()
            .doing("finding a run")?;
        match ids.as_slice() {
            [] => Err(StoreError::UnknownRun(id_or_prefix.to_string())),
            [one] => self.run(one),
            many => Err(StoreError::AmbiguousRun { prefix: id_or_prefix.to_string(), matches: many.join(", ") }),
        }
    }

    /// Ids of the runs launched from `id`, oldest first.
    pub fn children(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT id FROM runs WHERE parent_id = ?1 ORDER BY num")
            .doing("listing child runs")?;
        let ids = stmt.query_map([id], |r| r.get(0)).doing("listing child runs")?;
        ids.collect::<Result<_, _>>().doing("listing child runs")
    }

    /// The preset a run was launched with, as it was then.
    pub fn run_preset(&self, id: &str) -> Result<Preset, StoreError> {
        let json: String = self
            .conn()
            .query_row("SELECT preset_json FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .doing("reading a run's preset")?
            .ok_or_else(|| StoreError::UnknownRun(id.to_string()))?;
        serde_json::from_str(&json).map_err(|e| StoreError::Corrupt {
            id: id.to_string(),
            field: "preset",
            reason: e.to_string(),
        })
    }

    /// Runs matching `filter`, newest first.
    pub fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>, StoreError> {
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1");
        let mut args: Vec<String> = Vec::new();
        if !filter.include_dismissed {
            sql.push_str(" AND dismissed_at IS NULL");
        }
        if let Some(status) = filter.status {
            args.push(status.as_str().to_string());
            sql.push_str(&format!(" AND status = ?{}", args.len()));
        }
        if let Some(parent) = &filter.parent_id {
            args.push(parent.clone());
            sql.push_str(&format!(" AND parent_id = ?{}", args.len()));
        }
        if let Some(since) = &filter.ended_since {
            args.push(since.clone());
            sql.push_str(&format!(" AND completed_at >= ?{}", args.len()));
        }
        if !filter.statuses.is_empty() {
            sql.push_str(&format!(" AND status IN {}", RunStatus::sql_list(&filter.statuses)));
        }
        if let Some(preset) = &filter.preset {
            args.push(preset.clone());
            sql.push_str(&format!(" AND preset = ?{}", args.len()));
        }
        if let Some(folder) = &filter.folder {
            let folder = folder.trim_end_matches('/').to_string();
            // The folder itself, or anything below it (`/` ends the name),
            // compared byte for byte: LIKE would take `Work` for `work`.
            let under = format!("{folder}/");
            args.push(folder);
            args.push(under);
            let (same, below) = (args.len() - 1, args.len());
            // A worktree run is where it was launched: the same subfolder of
            // its repository as its folder is of its worktree.
            let mirrored = "(worktree_repo || substr(cwd, length(worktree_path) + 1))";
            sql.push_str(&format!(
                " AND (cwd = ?{same} OR substr(cwd, 1, length(?{below})) = ?{below}
                   OR (worktree_repo IS NOT NULL AND worktree_path IS NOT NULL
                       AND substr(cwd, 1, length(worktree_path)) = worktree_path
                       AND ({mirrored} = ?{same} OR substr({mirrored}, 1, length(?{below})) = ?{below})))"
            ));
        }
        if let Some(since) = &filter.created_since {
            args.push(since.clone());
            sql.push_str(&format!(" AND created_at >= ?{}", args.len()));
        }
        sql.push_str(" ORDER BY num DESC");
        if let Some(limit) = filter.limit {
            sql.push_str(&format!(" LIMIT {limit} OFFSET {}", filter.offset));
        }
        let mut stmt = self.conn().prepare(&sql).doing("listing runs")?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(&args), run_from_row)
            .doing("listing runs")?
            .collect::<Result<Vec<_>, _>>()
            .doing("listing runs")?;
        let mut runs = rows.into_iter().collect::<Result<Vec<Run>, StoreError>>()?;
        self.fill_children(&mut runs)?;
        Ok(runs)
    }

    /// Fills `children` of every run in one query (never one per run),
    /// through the parent index: only the children of these runs are read,
    /// however many runs the store holds.
    fn fill_children(&self, runs: &mut [Run]) -> Result<(), StoreError> {
        let doing = "listing child runs";
        let wanted: std::collections::HashMap<&str, usize> =
            runs.iter().enumerate().map(|(i, r)| (r.id.as_str(), i)).collect();
        let mut found: Vec<Vec<String>> = vec![Vec::new(); runs.len()];
        let parents = serde_json::to_string(&runs.iter().map(|r| &r.id).collect::<Vec<_>>()).unwrap_or_default();
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT parent_id, id FROM runs WHERE parent_id IN (SELECT value FROM json_each(?1)) ORDER BY num",
            )
            .doing(doing)?;
        let rows = stmt.query_map([parents], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).doing(doing)?;
        for row in rows {
            let (parent, child) = row.doing(doing)?;
            if let Some(&i) = wanted.get(parent.as_str()) {
                found[i].push(child);
            }
        }
        for (run, children) in runs.iter_mut().zip(found) {
            run.children = children;
        }
        Ok(())
    }

    /// Runs whose outcome is committed but whose processes were never
    /// recorded as reaped (their shepherd may have died during cleanup).
    pub fn unreaped_runs(&self) -> Result<Vec<Run>, StoreError> {
        // Through the partial index: never a scan of every ended run.
        let filter = format!(
            "num IN (SELECT num FROM runs INDEXED BY runs_unreaped WHERE exited_at IS NULL) AND status IN {}",
            RunStatus::terminal_sql()
        );
        self.runs_where(&filter, [], "listing unreaped runs")
    }

    /// Active runs (not terminal), oldest first: what reconciliation checks.
    pub fn active_runs(&self) -> Result<Vec<Run>, StoreError> {
        self.runs_where(&format!("status IN {}", RunStatus::active_sql()), [], "listing active runs")
    }

    /// The shepherds of this store's runs that have not exited, as each
    /// recorded itself (pid, start time): which processes that say they
    /// are shepherds really are this installation's.
    pub fn unexited_shepherds(&self) -> Result<Vec<crate::process::ProcessId>, StoreError> {
        let doing = "listing the runs' shepherds";
        let sql = "SELECT shepherd_pid, shepherd_start FROM runs
                   WHERE num IN (SELECT num FROM runs INDEXED BY runs_unreaped WHERE exited_at IS NULL)
                     AND shepherd_pid IS NOT NULL AND shepherd_start IS NOT NULL";
        let mut stmt = self.conn().prepare_cached(sql).doing(doing)?;
        let rows = stmt
            .query_map([], |r| Ok(crate::process::ProcessId { pid: r.get(0)?, start: r.get::<_, i64>(1)? as u64 }))
            .doing(doing)?
            .collect::<Result<Vec<_>, _>>()
            .doing(doing);
        rows
    }

    /// The direct children of a run, oldest first.
    pub fn child_runs(&self, id: &str) -> Result<Vec<Run>, StoreError> {
        self.runs_where("parent_id = ?1", [id], "listing child runs")
    }

    /// Runs matching an SQL condition, oldest first (without `children`).
    fn runs_where(
        &self,
        filter: &str,
        params: impl rusqlite::Params,
        doing: &'static str,
    ) -> Result<Vec<Run>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE {filter} ORDER BY num");
        let mut stmt = self.conn().prepare_cached(&sql).doing(doing)?;
        let rows = stmt.query_map(params, run_from_row).doing(doing)?.collect::<Result<Vec<_>, _>>().doing(doing)?;
        rows.into_iter().collect()
    }

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
        self.write("recording a merge", |tx| {
            tx.execute(
                "UPDATE runs SET worktree_merged = ?2, worktree_merged_squashed = ?3 WHERE id = ?1",
                params![id, merged, squashed],
            )
        })
        .map(drop)
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

    /// The runs whose task, final text, error or transcript holds `text`,
    /// newest matches first, at most `limit` matches looked at: for lists
    /// filtered by a search (the window's), which need no excerpts.
    pub fn search_run_ids(&self, text: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let query = fts_query(text);
        if query.is_empty() {
            return Ok(Vec::new());
        }
        let mut ids: Vec<String> = Vec::new();
        for sql in [
            "SELECT r.id FROM runs r WHERE r.num IN
               (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2)",
            "SELECT DISTINCT e.run_id FROM events e WHERE e.id IN
               (SELECT rowid FROM events_fts WHERE events_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2)",
        ] {
            let mut stmt = self.conn().prepare_cached(sql).doing("searching runs")?;
            let rows =
                stmt.query_map(params![query, limit as i64], |r| r.get::<_, String>(0)).doing("searching runs")?;
            for id in rows {
                let id = id.doing("searching runs")?;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        Ok(ids)
    }

    /// Full-text search over tasks, final texts, errors and transcripts.
    pub fn search(&self, text: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
        let query = fts_query(text);
        if query.is_empty() {
            return Ok(Vec::new());
        }
        // The newest matches first, found by rowid alone (FTS5 walks its
        // index backwards and stops at the limit); snippets are made only
        // for the rows returned, never for every match.
        let mut hits = Vec::new();
        let newest = |sql: &str| -> Result<Vec<i64>, StoreError> {
            let mut stmt = self.conn().prepare_cached(sql).doing("searching")?;
            let rows = stmt.query_map(params![query, limit as i64], |r| r.get(0)).doing("searching")?;
            rows.collect::<Result<_, _>>().doing("searching")
        };
        let runs = newest("SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2")?;
        for num in runs {
            let (run_id, task, final_text, error) = self
                .conn()
                .prepare_cached(
                    "SELECT r.id, snippet(runs_fts, 0, char(1), char(2), '…', 12),
                       snippet(runs_fts, 1, char(1), char(2), '…', 12), snippet(runs_fts, 2, char(1), char(2), '…', 12)
                     FROM runs_fts JOIN runs r ON r.num = runs_fts.rowid
                     WHERE runs_fts MATCH ?1 AND runs_fts.rowid = ?2",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(params![query, num], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                            r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                            r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                        ))
                    })
                })
                .doing("searching runs")?;
            // Marked with characters no text holds, so a task with `[` in
            // it is not taken for the field that matched.
            let (field, snippet) = [("task", task), ("final_text", final_text), ("error", error)]
                .into_iter()
                .find(|(_, s)| s.contains('\u{1}'))
                .unwrap_or(("task", String::new()));
            let snippet = snippet.replace('\u{1}', "[").replace('\u{2}', "]");
            hits.push(SearchHit { id: run_id, field: field.to_string(), snippet, host: None });
        }
        let events = newest("SELECT rowid FROM events_fts WHERE events_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2")?;
        for id in events.into_iter().take(limit.saturating_sub(hits.len())) {
            let (run_id, snippet) = self
                .conn()
                .prepare_cached(
                    "SELECT e.run_id, highlight(events_fts, 0, char(1), char(2))
                     FROM events_fts JOIN events e ON e.id = events_fts.rowid
                     WHERE events_fts MATCH ?1 AND events_fts.rowid = ?2",
                )
                .and_then(|mut stmt| stmt.query_row(params![query, id], |r| Ok((r.get(0)?, r.get::<_, String>(1)?))))
                .doing("searching transcripts")?;
            // FTS5's snippet() weighs every match of a long event (13 ms for
            // one of 16 KiB); the text around the first match is enough.
            let snippet = around_first_match(&snippet);
            hits.push(SearchHit { id: run_id, field: "transcript".to_string(), snippet, host: None });
        }
        hits.truncate(limit);
        Ok(hits)
    }
}

/// The text around the first match of `marked` (matches between `\x01` and
/// `\x02`, as `highlight()` marks them), as `[match]` with `…` where cut.
fn around_first_match(marked: &str) -> String {
    const BEFORE: usize = 40;
    const AFTER: usize = 80;
    let first = marked.find('\u{1}').unwrap_or(0);
    let start = marked[..first].char_indices().rev().nth(BEFORE - 1).map_or(0, |(i, _)| i);
    let end = marked[first..].char_indices().nth(AFTER).map_or(marked.len(), |(i, _)| first + i);
    let mut text = String::new();
    if start > 0 {
        text.push('…');
    }
    text.push_str(&marked[start..end].replace('\u{1}', "[").replace('\u{2}', "]"));
    if end < marked.len() {
        text.push('…');
    }
    text
}

/// Quotes each word so user text is never parsed as FTS5 syntax.
fn fts_query(text: &str) -> String {
    text.split_whitespace().map(|word| format!("\"{}\"", word.replace('"', "\"\""))).collect::<Vec<_>>().join(" ")
}

/// Reads a row selected with [`RUN_COLUMNS`]. The outer result is SQLite's,
/// the inner one says whether the stored words made sense.
fn run_from_row(row: &Row<'_>) -> rusqlite::Result<Result<Run, StoreError>> {
    let id: String = row.get(0)?;
    let parse =
        |field: &'static str, text: String| StoreError::Corrupt { id: id.clone(), field, reason: format!("'{text}'") };
    let agent_word: String = row.get(4)?;
    let status_word: String = row.get(9)?;
    let stop_word: Option<String> = row.get(10)?;
    let agent = match agent_word.parse() {
        Ok(a) => a,
        Err(_) => return Ok(Err(parse("agent", agent_word))),
    };
    let status = match status_word.parse() {
        Ok(s) => s,
        Err(_) => return Ok(Err(parse("status", status_word))),
    };
    let stop_reason = match stop_word.map(|w| w.parse::<StopReason>().map_err(|_| w)) {
        None => None,
        Some(Ok(reason)) => Some(reason),
        Some(Err(w)) => return Ok(Err(parse("stop_reason", w))),
    };
    let count = |index: usize| -> rusqlite::Result<u64> { Ok(row.get::<_, i64>(index)?.max(0) as u64) };
    Ok(Ok(Run {
        id: id.clone(),
        parent_id: row.get(1)?,
        children: Vec::new(),
        preset: row.get(2)?,
        preset_path: row.get(3)?,
        agent,
        task: row.get(5)?,
        cwd: row.get(6)?,
        model: row.get(7)?,
        resolved_model: row.get(8)?,
        status,
        stop_reason,
        exit_code: row.get(11)?,
        exit_signal: row.get(12)?,
        final_text: row.get(13)?,
        error: row.get(14)?,
        usage: Usage {
            input_tokens: count(15)?,
            output_tokens: count(16)?,
            cache_read_tokens: count(17)?,
            cache_write_tokens: count(18)?,
        },
        cost_usd: row.get(19)?,
        session_id: row.get(20)?,
        created_at: row.get(21)?,
        started_at: row.get(22)?,
        completed_at: row.get(23)?,
        exited_at: row.get(24)?,
        abort_requested_at: row.get(25)?,
        notified_at: row.get(26)?,
        dismissed_at: row.get(27)?,
        shepherd_pid: row.get(28)?,
        shepherd_start: row.get::<_, Option<i64>>(29)?.map(|v| v as u64),
        agent_pid: row.get(30)?,
        agent_start: row.get::<_, Option<i64>>(31)?.map(|v| v as u64),
        collected_at: row.get(32)?,
        waiting_at: row.get(33)?,
        promoted_at: row.get(34)?,
        promoter_pid: row.get(35)?,
        promoter_start: row.get::<_, Option<i64>>(36)?.map(|v| v as u64),
        worktree: match (
            row.get::<_, Option<String>>(37)?,
            row.get(38)?,
            row.get(39)?,
            row.get::<_, Option<String>>(42)?,
        ) {
            (Some(path), Some(branch), Some(base), None) => Some(crate::worktree::Worktree {
                path,
                branch,
                base,
                merged: row.get(57)?,
                merged_squashed: row.get::<_, i64>(58)? != 0,
            }),
            _ => None,
        },
        worktree_repo: row.get(40)?,
        worktree_dir: row.get(37)?,
        worktree_from_branch: row.get(41)?,
        denied: row.get::<_, Option<String>>(43)?.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default(),
        replied_at: row.get(44)?,
        cost_estimated: row.get(48)?,
        retrying: row.get(49)?,
        containment: row.get::<_, Option<String>>(50)?.and_then(|json| serde_json::from_str(&json).ok()),
        resources: row.get::<_, Option<f64>>(51)?.map(|cpu_seconds| crate::resources::Resources {
            cpu_seconds,
            memory_peak_bytes: row.get::<_, Option<i64>>(52).ok().flatten().map(|b| b.max(0) as u64),
        }),
        paused_at: row.get(53)?,
        transcript: crate::run::TranscriptSize {
            bytes: count(54)?,
            dropped_events: count(55)?,
            dropped_bytes: count(56)?,
        },
        host: None,
        unreachable_since: None,
        host_trouble: None,
        changes: match (row.get::<_, Option<i64>>(45)?, row.get::<_, Option<i64>>(46)?, row.get::<_, Option<i64>>(47)?)
        {
            (Some(files), Some(added), Some(removed)) => {
                Some(ChangeCount { files: files as u64, added: added as u64, removed: removed as u64 })
            }
            _ => None,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_hit_shows_the_text_around_its_first_match() {
        let long = format!("{}\u{1}needle\u{2} and the rest {}", "é".repeat(100), "x".repeat(200));
        let shown = around_first_match(&long);
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert!(shown.contains("[needle] and the rest"), "{shown}");
        assert!(shown.chars().count() < 130, "{shown}");
        assert_eq!(around_first_match("\u{1}short\u{2}"), "[short]");
    }
}
