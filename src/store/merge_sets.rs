//! The `merge_sets` table: a journal of merges being made, so a merge whose
//! process was killed mid-way is finished by the next heal (see
//! `merge_set`), and a merge that ends records its runs and leaves the
//! journal in one write.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::process::ProcessId;
use crate::text::time;

/// A merge of runs being made, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeSet {
    /// Its row.
    pub id: i64,
    /// The user's repository.
    pub repo: String,
    /// The branch the runs go into.
    pub branch: String,
    /// That branch's commit before the first merge.
    pub before: String,
    /// Merged squashed (else with the agent's commits).
    pub squashed: bool,
    /// The runs, in merge order.
    pub runs: Vec<String>,
    /// The commit each squashed merge was about to put on the branch.
    pub made: std::collections::BTreeMap<String, String>,
    /// The process making it, or healing it.
    pub owner: ProcessId,
}

/// A set about to be begun.
#[derive(Debug, Clone, Copy)]
pub struct NewMergeSet<'a> {
    pub repo: &'a str,
    pub branch: &'a str,
    pub before: &'a str,
    pub squashed: bool,
    pub runs: &'a [String],
}

impl Store {
    /// Journals a merge of `set.runs` by this process, before its first
    /// merge is made.
    pub fn begin_merge_set(&mut self, set: &NewMergeSet<'_>) -> Result<i64, StoreError> {
        let me = ProcessId::of(std::process::id() as i32);
        let runs = serde_json::to_string(set.runs).unwrap_or_else(|_| "[]".into());
        let now = time::format(time::now());
        self.write("journaling a merge", |tx| {
            tx.execute(
                "INSERT INTO merge_sets (repo, branch, before, squashed, runs, pid, pid_start, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    set.repo,
                    set.branch,
                    set.before,
                    set.squashed,
                    runs,
                    std::process::id(),
                    me.map(|p| p.start as i64),
                    now
                ],
            )?;
            Ok(tx.last_insert_rowid())
        })
    }

    /// Ends merge set `id`: each of `merged` (run, the commit of its branch
    /// that went in) recorded as merged, and the journal left, in one
    /// write.
    pub fn end_merge_set(&mut self, id: i64, merged: &[(String, String)], squashed: bool) -> Result<(), StoreError> {
        self.write("recording a merge", |tx| {
            for (run, commit) in merged {
                tx.execute(super::transitions::RECORD_MERGE_SQL, params![run, commit, squashed])?;
            }
            tx.execute("DELETE FROM merge_sets WHERE id = ?1", [id])
        })
        .map(drop)
    }

    /// Every journaled merge set (a handful at most: each lives while one
    /// `merge` runs).
    pub fn merge_sets(&self) -> Result<Vec<MergeSet>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT id, repo, branch, before, squashed, runs, pid, pid_start, made FROM merge_sets ORDER BY id",
            )
            .doing("reading the merges being made")?;
        let rows = stmt
            .query_map([], |r| {
                let runs: String = r.get(5)?;
                let (pid, start): (i32, Option<i64>) = (r.get(6)?, r.get(7)?);
                let made: String = r.get(8)?;
                Ok(MergeSet {
                    id: r.get(0)?,
                    repo: r.get(1)?,
                    branch: r.get(2)?,
                    before: r.get(3)?,
                    squashed: r.get(4)?,
                    runs: serde_json::from_str(&runs).unwrap_or_default(),
                    made: serde_json::from_str(&made).unwrap_or_default(),
                    owner: ProcessId { pid, start: start.unwrap_or(0) as u64 },
                })
            })
            .doing("reading the merges being made")?;
        rows.collect::<Result<_, _>>().doing("reading the merges being made")
    }

    /// Notes that run `run` of merge set `id` is about to put `commit` on
    /// the branch: written before the branch moves.
    pub fn note_merge_commit(&mut self, id: i64, run: &str, commit: &str) -> Result<(), StoreError> {
        self.write("journaling a merge", |tx| {
            let made: String = tx.query_row("SELECT made FROM merge_sets WHERE id = ?1", [id], |r| r.get(0))?;
            let mut made: std::collections::BTreeMap<String, String> = serde_json::from_str(&made).unwrap_or_default();
            made.insert(run.to_string(), commit.to_string());
            let made = serde_json::to_string(&made).unwrap_or_else(|_| "{}".into());
            tx.execute("UPDATE merge_sets SET made = ?2 WHERE id = ?1", params![id, made])
        })
        .map(drop)
    }

    /// Gives merge set `id` back to `was` (its process, gone): another
    /// heal tries it again.
    pub fn release_merge_set(&mut self, id: i64, was: ProcessId) -> Result<(), StoreError> {
        self.write("leaving a merge left half made", |tx| {
            tx.execute(
                "UPDATE merge_sets SET pid = ?2, pid_start = ?3 WHERE id = ?1",
                params![id, was.pid, was.start as i64],
            )
        })
        .map(drop)
    }

    /// Takes merge set `id` over from `was` (a process found gone) for this
    /// process; false if another took it first, or it ended.
    pub fn claim_merge_set(&mut self, id: i64, was: ProcessId) -> Result<bool, StoreError> {
        let me = ProcessId::of(std::process::id() as i32);
        self.write("taking over a merge left half made", |tx| {
            let claimed = tx.execute(
                "UPDATE merge_sets SET pid = ?3, pid_start = ?4
                 WHERE id = ?1 AND pid = ?2 AND coalesce(pid_start, 0) = ?5",
                params![id, was.pid, std::process::id(), me.map(|p| p.start as i64), was.start as i64],
            )?;
            Ok(claimed == 1)
        })
    }
}
