//! A run's row read whole: its columns in one order, and each stored word
//! checked as it is read (a word this version does not know is a corrupt
//! row, said with its run and field, never a panic). Apart from `runs`,
//! which writes and selects, because it is the one place a column is
//! added to when the `runs` table grows.

use rusqlite::Row;

use super::StoreError;
use crate::run::{ChangeCount, Run, StopReason, Usage};

/// Columns of a run, in the order [`run_from_row`] reads them.
pub(super) const RUN_COLUMNS: &str = "id, parent_id, preset, preset_path, agent, task, cwd, model,
    resolved_model, status, stop_reason, exit_code, exit_signal, final_text, error,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, session_id,
    created_at, started_at, completed_at, exited_at, abort_requested_at, notified_at,
    dismissed_at, shepherd_pid, shepherd_start, agent_pid, agent_start, collected_at, waiting_at,
    promoted_at, promoter_pid, promoter_start, worktree_path, worktree_branch, worktree_base, worktree_repo,
    worktree_from_branch, worktree_removed_at, denied, replied_at, changes_files, changes_added, changes_removed, cost_estimated, retrying,
    containment, cpu_seconds, memory_peak_bytes, paused_at, transcript_bytes, transcript_dropped_events,
    transcript_dropped_bytes, worktree_merged, worktree_merged_squashed, budget_usd, budget_tokens, on_budget,
    pause_reason, resumes_at, ports_first, ports_count";

/// Reads a row selected with [`RUN_COLUMNS`]. The outer result is SQLite's,
/// the inner one says whether the stored words made sense.
pub(super) fn run_from_row(row: &Row<'_>) -> rusqlite::Result<Result<Run, StoreError>> {
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
        resources: row.get::<_, Option<f64>>(51)?.map(|cpu_seconds| crate::cost::resources::Resources {
            cpu_seconds,
            memory_peak_bytes: row.get::<_, Option<i64>>(52).ok().flatten().map(|b| b.max(0) as u64),
        }),
        paused_at: row.get(53)?,
        transcript: crate::run::TranscriptSize {
            bytes: count(54)?,
            dropped_events: count(55)?,
            dropped_bytes: count(56)?,
        },
        budget: Some(crate::cost::budget::Budget {
            usd: row.get(59)?,
            tokens: row.get::<_, Option<i64>>(60)?.map(|t| t.max(0) as u64),
        })
        .filter(|b| !b.is_unlimited()),
        on_budget: row.get::<_, Option<String>>(61)?.and_then(|w| w.parse().ok()),
        pause_reason: row.get::<_, Option<String>>(62)?.and_then(|w| w.parse().ok()),
        resumes_at: row.get(63)?,
        ports: match (row.get::<_, Option<i64>>(64)?, row.get::<_, Option<i64>>(65)?) {
            (Some(first), Some(count)) => {
                Some(crate::run::ports::PortBlock { first: first as u16, count: count as u16 })
            }
            _ => None,
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
