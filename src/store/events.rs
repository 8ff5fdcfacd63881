//! The `events` table: a run's transcript, one row per transcript item (a
//! text block, a tool call, a tool result, an error) — never one per token.
//! Only a run's shepherd appends to its transcript, so it numbers the rows.

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::adapter::{EventKind, TranscriptEvent};
use crate::text::time;

/// A transcript event as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredEvent {
    /// Position in the run's transcript, from 1.
    pub seq: i64,
    /// When the shepherd read it.
    pub at: String,
    /// What it is.
    pub kind: EventKind,
    /// Its text.
    pub text: String,
    /// Structured detail, as JSON text.
    pub json: Option<String>,
}

/// A transcript row as the window shows it: an event, with the token usage
/// its agent reported right after it folded in (a "usage" row after every
/// message is noise to a reader; its figures are the row's detail).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShownEvent {
    /// The event.
    #[serde(flatten)]
    pub event: StoredEvent,
    /// The text of each usage event between it and the next shown row.
    pub usage: Vec<String>,
}

/// Folds each usage event of `events` (in order) into the row before it.
/// Usage before the first other event has no row of its own here: it
/// belongs to the previous page's last row.
pub fn fold_usage(events: &[StoredEvent]) -> Vec<ShownEvent> {
    let mut shown: Vec<ShownEvent> = Vec::new();
    for event in events {
        match (event.kind, shown.last_mut()) {
            (EventKind::Usage, Some(row)) => row.usage.push(event.text.clone()),
            (EventKind::Usage, None) => {}
            _ => shown.push(ShownEvent { event: event.clone(), usage: Vec::new() }),
        }
    }
    shown
}

/// Where a reader of transcripts is: the newest event it has seen.
pub type EventMark = i64;

/// What a transcript cap left out of one append: counted, not kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Events not kept.
    pub events: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// An event's bytes as the store counts them (`transcript_bytes`, the
/// transcript cap): its text and its structured detail as stored.
pub fn stored_bytes(text: &str, json: Option<&str>) -> u64 {
    (text.len() + json.map_or(0, str::len)) as u64
}

impl Store {
    /// The newest event's mark: transcripts changed since are found with
    /// [`Store::transcripts_changed_since`].
    pub fn event_mark(&self) -> Result<EventMark, StoreError> {
        self.conn()
            .query_row("SELECT coalesce(max(id), 0) FROM events", [], |r| r.get(0))
            .doing("reading the event mark")
    }

    /// The runs whose transcripts gained events after `mark`, and the new
    /// mark. Through the events' primary key: it reads only the new events.
    pub fn transcripts_changed_since(&self, mark: EventMark) -> Result<(Vec<String>, EventMark), StoreError> {
        let doing = "finding changed transcripts";
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT run_id, max(id) FROM events WHERE id > ?1 GROUP BY run_id")
            .doing(doing)?;
        let rows = stmt.query_map([mark], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))).doing(doing)?;
        let mut runs = Vec::new();
        let mut newest = mark;
        for row in rows {
            let (run, last) = row.doing(doing)?;
            newest = newest.max(last);
            runs.push(run);
        }
        Ok((runs, newest))
    }

    /// The highest event number of a run (0 if none).
    pub fn last_event_seq(&self, run_id: &str) -> Result<i64, StoreError> {
        self.conn()
            .query_row("SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?1", [run_id], |r| r.get(0))
            .doing("reading a transcript's length")
    }

    /// Appends events numbered from `first_seq`, in one transaction.
    pub fn append_events(
        &mut self,
        run_id: &str,
        first_seq: i64,
        events: &[TranscriptEvent],
    ) -> Result<(), StoreError> {
        self.append_transcript(run_id, first_seq, events, Dropped::default())
    }

    /// Appends events numbered from `first_seq` and counts `dropped` (what
    /// the transcript cap left out since the last append), in one
    /// transaction; the run's transcript size grows with both.
    pub fn append_transcript(
        &mut self,
        run_id: &str,
        first_seq: i64,
        events: &[TranscriptEvent],
        dropped: Dropped,
    ) -> Result<(), StoreError> {
        if events.is_empty() && dropped == Dropped::default() {
            return Ok(());
        }
        let at = time::format(time::now());
        self.write("appending to a transcript", |tx| {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO events (run_id, seq, at, kind, text, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut bytes = 0u64;
            for (offset, event) in events.iter().enumerate() {
                let json = event.json.as_ref().map(|v| v.to_string());
                bytes += stored_bytes(&event.text, json.as_deref());
                stmt.execute(params![run_id, first_seq + offset as i64, at, event.kind.as_str(), event.text, json])?;
            }
            tx.prepare_cached(
                "UPDATE runs SET transcript_bytes = transcript_bytes + ?2,
                    transcript_dropped_events = transcript_dropped_events + ?3,
                    transcript_dropped_bytes = transcript_dropped_bytes + ?4
                 WHERE id = ?1",
            )?
            .execute(params![run_id, bytes as i64, dropped.events as i64, dropped.bytes as i64])?;
            Ok(())
        })
    }

    /// The last `bytes` of what run `id`'s agent wrote to stderr (its
    /// stderr events, newest last).
    pub fn stderr_tail(&self, run_id: &str, bytes: usize) -> Result<String, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT text FROM events WHERE run_id = ?1 AND kind = ?2 ORDER BY seq DESC LIMIT 200")
            .doing("reading stderr")?;
        let lines: Vec<String> = stmt
            .query_map(params![run_id, EventKind::Stderr.as_str()], |r| r.get(0))
            .doing("reading stderr")?
            .collect::<Result<_, _>>()
            .doing("reading stderr")?;
        let mut tail = String::new();
        for line in lines.iter().rev() {
            tail.push_str(line.trim_end_matches('\n'));
            tail.push('\n');
        }
        let cut = tail.len().saturating_sub(bytes);
        let cut = (cut..tail.len()).find(|&i| tail.is_char_boundary(i)).unwrap_or(tail.len());
        Ok(tail[cut..].to_string())
    }

    /// The last `limit` events of a run before `before_seq` (`i64::MAX`:
    /// the end), in order: how `tail` reads backwards, a page at a time.
    pub fn events_before(&self, run_id: &str, before_seq: i64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let sql = "SELECT seq, at, kind, text, json FROM events
                   WHERE run_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3";
        let mut events = self.read_events(sql, run_id, params![run_id, before_seq, limit as i64])?;
        events.reverse();
        Ok(events)
    }

    /// Events of a run after `after_seq`, in order, at most `limit`.
    pub fn events_after(&self, run_id: &str, after_seq: i64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let sql = "SELECT seq, at, kind, text, json FROM events
                   WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
        self.read_events(sql, run_id, params![run_id, after_seq, limit as i64])
    }

    /// How many rows run `run_id`'s transcript shows: its events but usage
    /// (see [`ShownEvent`]). Through the `events_shown` index alone.
    pub fn shown_count(&self, run_id: &str) -> Result<i64, StoreError> {
        // The literal 'usage' (EventKind::Usage) matches the partial
        // index's own WHERE, so SQLite uses it.
        self.conn()
            .query_row("SELECT count(*) FROM events WHERE run_id = ?1 AND kind != 'usage'", [run_id], |r| r.get(0))
            .doing("counting a transcript's rows")
    }

    /// The shown rows of run `run_id` from position `offset` (from 0), at
    /// most `limit`, each with the usage that followed it folded in.
    pub fn shown_page(&self, run_id: &str, offset: usize, limit: usize) -> Result<Vec<ShownEvent>, StoreError> {
        let doing = "reading a transcript's rows";
        // The page's first row and the row after its last, by position in
        // the index; then every event between them, usage with the rest.
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT seq FROM events WHERE run_id = ?1 AND kind != 'usage' ORDER BY seq LIMIT ?2 OFFSET ?3",
            )
            .doing(doing)?;
        let seqs: Vec<i64> = stmt
            .query_map(params![run_id, limit as i64 + 1, offset as i64], |r| r.get(0))
            .doing(doing)?
            .collect::<Result<_, _>>()
            .doing(doing)?;
        let Some(&first) = seqs.first().filter(|_| limit > 0) else {
            return Ok(Vec::new());
        };
        let end = seqs.get(limit).copied().unwrap_or(i64::MAX);
        let sql = "SELECT seq, at, kind, text, json FROM events
                   WHERE run_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq";
        Ok(fold_usage(&self.read_events(sql, run_id, params![run_id, first, end])?))
    }

    /// Runs one of the page queries above on run `run_id`'s events.
    fn read_events(
        &self,
        sql: &str,
        run_id: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut stmt = self.conn().prepare_cached(sql).doing("reading a transcript")?;
        let rows = stmt
            .query_map(args, |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, String>(2)?, r.get(3)?, r.get(4)?)))
            .doing("reading a transcript")?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, at, kind, text, json) = row.doing("reading a transcript")?;
            events.push(stored(run_id, seq, at, kind, text, json)?);
        }
        Ok(events)
    }
}

/// An event as read back, its kind checked.
fn stored(
    run_id: &str,
    seq: i64,
    at: String,
    kind: String,
    text: String,
    json: Option<String>,
) -> Result<StoredEvent, StoreError> {
    let kind = kind.parse().map_err(|e: crate::run::UnknownWord| StoreError::Corrupt {
        id: run_id.to_string(),
        field: "event kind",
        reason: e.to_string(),
    })?;
    Ok(StoredEvent { seq, at, kind, text, json })
}
