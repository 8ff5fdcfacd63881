//! The `runs` table: one row per run, how it is created and selected (a
//! row read whole in `run_row`). Every change of a run's state is in
//! `transitions`; full-text search in `search`.

use rusqlite::{params, OptionalExtension};

use super::run_row::{run_from_row, RUN_COLUMNS};
use super::{Doing, Store, StoreError};
use crate::preset::Preset;
use crate::run::{Run, RunStatus};
use crate::text::time;

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
    /// What it (with its child runs) may spend, and what crossing it does.
    pub budget: Option<(crate::cost::budget::Budget, crate::cost::budget::OnBudget)>,
    /// The schedule's fire that launches it: recorded in the same write as
    /// the run, so a firer killed at any moment leaves no run its fire does
    /// not list.
    pub fire: Option<super::FireLink<'a>>,
    /// The launcher's key for this launch (see `launch_requests`).
    pub request: Option<&'a str>,
    /// How many ports it gets (a block of its own), if any.
    pub ports: Option<u16>,
}

impl<'a> NewRun<'a> {
    /// A run of `preset` with `task` in `cwd` and nothing else asked: no
    /// parent, worktree, budget, fire, key or ports (what a test or a
    /// bench records by the thousand).
    pub fn plain(preset: &'a Preset, task: &'a str, cwd: &'a str) -> NewRun<'a> {
        NewRun {
            preset,
            task,
            cwd,
            model: None,
            parent_id: None,
            worktree: None,
            budget: None,
            fire: None,
            request: None,
            ports: None,
        }
    }
}

/// No block of ports was free, carried out of the insert's write.
#[derive(Debug)]
struct NoFreePorts(u16);

impl std::fmt::Display for NoFreePorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no block of {} free ports", self.0)
    }
}

impl std::error::Error for NoFreePorts {}

/// The run a launch under the same key made first, carried out of the
/// insert's write.
#[derive(Debug)]
struct Made(String);

impl std::fmt::Display for Made {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {} was made under this key", self.0)
    }
}

impl std::error::Error for Made {}

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
        // What listens now is read once, outside the write.
        let listening = new.ports.map(|_| crate::run::ports::listening()).unwrap_or_default();
        let id = loop {
            let id = new_run_id();
            let inserted = self.write("recording a new run", |tx| {
                // Made already under the same key, by the other of two
                // launchers of one request (the cold one, the spare): one run.
                if let Some(key) = new.request {
                    let made: Option<String> = tx
                        .query_row("SELECT run_id FROM launch_requests WHERE key = ?1", [key], |r| r.get(0))
                        .optional()?;
                    if let Some(made) = made {
                        return Err(rusqlite::Error::ToSqlConversionFailure(Box::new(Made(made))));
                    }
                }
                let ports = match new.ports {
                    Some(count) => Some(
                        super::ports::free_block(tx, count, &listening)?
                            .ok_or(rusqlite::Error::ToSqlConversionFailure(Box::new(NoFreePorts(count))))?,
                    ),
                    None => None,
                };
                let slots = super::slots::slots_in(tx)?;
                // An agent whose usage limit stands starts nothing new.
                let limited: bool = tx.query_row(
                    "SELECT EXISTS (SELECT 1 FROM usage_limits WHERE agent = ?1 AND resets_at > ?2)",
                    params![new.preset.agent.as_str(), now],
                    |r| r.get(0),
                )?;
                let status = if slots.free_for_queued(max_parallel) > 0 && slots.queued == 0 && !limited {
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
                       worktree_path, worktree_branch, worktree_base, worktree_repo, worktree_from_branch,
                       budget_usd, budget_tokens, on_budget, ports_first, ports_count,
                       budget_step_usd, budget_step_tokens)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
                       ?20, ?21, ?22, ?23, ?24, ?20, ?21)",
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
                        new.budget.and_then(|b| b.0.usd),
                        new.budget.and_then(|b| b.0.tokens).map(|t| t as i64),
                        new.budget.map(|b| b.1.as_str()),
                        ports.map(|p| p.first),
                        ports.map(|p| p.count),
                    ],
                )?;
                if inserted == 1 {
                    if let Some(link) = &new.fire {
                        super::fires::record_fire_run(tx, link, &id)?;
                    }
                    if let Some(key) = new.request {
                        tx.execute("INSERT INTO launch_requests (key, run_id) VALUES (?1, ?2)", params![key, id])?;
                    }
                    // Rolls the insert back if the folder cannot be readied.
                    prepare(&id).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                }
                Ok(inserted)
            });
            let inserted = match inserted {
                Err(StoreError::Sql { source: rusqlite::Error::ToSqlConversionFailure(e), .. })
                    if e.is::<NoFreePorts>() =>
                {
                    return Err(StoreError::NoFreePorts { count: new.ports.unwrap_or_default() });
                }
                Err(StoreError::Sql { source: rusqlite::Error::ToSqlConversionFailure(e), .. }) if e.is::<Made>() => {
                    let made = e.downcast::<Made>().map(|m| m.0).unwrap_or_default();
                    return Err(StoreError::RequestMade(made));
                }
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

    /// The run a launch under `key` made, if one did.
    pub fn run_of_request(&self, key: &str) -> Result<Option<Run>, StoreError> {
        let id: Option<String> = self
            .conn()
            .query_row("SELECT run_id FROM launch_requests WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .doing("reading the run of a launch request")?;
        id.map(|id| self.run(&id)).transpose()
    }

    /// True if `pid` is (or was) the shepherd of a run other than `run`.
    pub fn is_shepherd_of_another(&self, pid: i32, run: &str) -> Result<bool, StoreError> {
        self.conn()
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM runs WHERE shepherd_pid = ?1 AND id <> ?2)")
            .and_then(|mut stmt| stmt.query_row(params![pid, run], |r| r.get(0)))
            .doing("telling another run's shepherd")
    }

    /// The run with exactly this id.
    pub fn run(&self, id: &str) -> Result<Run, StoreError> {
        // Cached: every verb, wait and shepherd reads runs by id, and the
        // statement's column list costs more to prepare than to run.
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
        let mut stmt = self.conn().prepare_cached(&sql).doing("reading a run")?;
        let run = stmt.query_row([id], run_from_row).optional().doing("reading a run")?;
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

    /// True if run `id` is run `ancestor` itself or was launched under it
    /// (its parent, or its parent's parent, and so on).
    pub fn is_within(&self, id: &str, ancestor: &str) -> Result<bool, StoreError> {
        let mut next = Some(id.to_string());
        let mut hops = 0;
        while let Some(at) = next.filter(|_| hops < 1024) {
            if at == ancestor {
                return Ok(true);
            }
            next = self.run(&at)?.parent_id;
            hops += 1;
        }
        Ok(false)
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
}
