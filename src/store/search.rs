//! Full-text search over runs (task, final text, error) and transcripts,
//! newest matches first, through the FTS5 indexes the migrations keep.

use rusqlite::params;

use super::{Doing, Store, StoreError};

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

impl Store {
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
