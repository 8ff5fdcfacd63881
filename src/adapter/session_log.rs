//! What Codex and Gemini CLI write of a turn's spend to their own session
//! files while the turn runs.
//!
//! Their streams say usage only at a turn's end (`turn.completed`,
//! `result`), and a turn can spend millions of tokens before it: a lead
//! blocked in `corral wait` while its children work, a long tool loop. But
//! each writes every model response to a file of its session as it comes:
//! Codex its rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-…-THREAD.jsonl`,
//! a `token_count` event with the thread's running total after each
//! response), Gemini CLI its chat (`~/.gemini/tmp/PROJECT/chats/
//! session-…-ID8.jsonl`, each model message with its own `tokens`). The
//! shepherd follows that file for a live figure until the stream says the
//! exact one; see `tests/captures/codex-0.169-rollout.jsonl` and
//! `gemini-0.61-chat.jsonl`.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json;
use crate::run::Usage;

/// Which agent's session file, and so how it is found and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Codex's rollout: the thread's total after each response.
    CodexRollout,
    /// Gemini CLI's chat: each model message's own tokens.
    GeminiChat,
}

impl Format {
    /// The agent's folder under the user's home, where its sessions are.
    pub fn folder(self) -> &'static str {
        match self {
            Format::CodexRollout => ".codex",
            Format::GeminiChat => ".gemini",
        }
    }

    /// The variable that moves that folder, if the agent has one.
    pub fn folder_env(self) -> Option<&'static str> {
        match self {
            Format::CodexRollout => Some("CODEX_HOME"),
            Format::GeminiChat => None,
        }
    }

    /// True if what the file says covers the whole session (every turn),
    /// as Codex's stream does; else only the turn that began at `since`.
    pub fn is_cumulative(self) -> bool {
        self == Format::CodexRollout
    }
}

/// The most read of a session file at one look: a file that grew by more
/// is read on at the next.
const READ_AT_ONCE: u64 = 4 << 20;

/// A session file followed for one turn's live spend. Runtime state only.
#[derive(Debug)]
pub struct SessionLog {
    format: Format,
    /// The agent's folders it may be under (the user's, a sandboxed run's
    /// copy, one the environment names).
    roots: Vec<PathBuf>,
    /// When the turn began (RFC 3339, UTC): a chat's messages before it
    /// are earlier turns'.
    since: String,
    /// The file, once found, and how far it was read.
    path: Option<PathBuf>,
    offset: u64,
    /// The end of a line not yet written whole.
    partial: Vec<u8>,
    usage: Usage,
    /// Chat messages already counted (a chat may write one again).
    counted: HashSet<String>,
}

impl SessionLog {
    /// Follows the session file of `format` under `roots` for the turn that
    /// began at `since`.
    pub fn new(format: Format, roots: Vec<PathBuf>, since: String) -> SessionLog {
        SessionLog {
            format,
            roots,
            since,
            path: None,
            offset: 0,
            partial: Vec::new(),
            usage: Usage::default(),
            counted: HashSet::new(),
        }
    }

    /// What session `session` spent so far, as its file says: of the whole
    /// session or of this turn (see [`Format::is_cumulative`]). `None`
    /// while the file is not found or says nothing yet.
    pub fn follow(&mut self, session: &str) -> Option<Usage> {
        if session.is_empty() {
            return None;
        }
        if self.path.is_none() {
            self.path = self.find(session);
        }
        let path = self.path.clone()?;
        // The agent writes this file: a FIFO or a link it left there is
        // never waited on or followed.
        let mut file = crate::process::open_regular(&path).ok()?;
        let len = file.metadata().ok()?.len();
        if len < self.offset {
            // Written anew (a chat rewritten whole): read it again.
            self.offset = 0;
            self.partial.clear();
            self.counted.clear();
            self.usage = Usage::default();
        }
        if len > self.offset {
            file.seek(SeekFrom::Start(self.offset)).ok()?;
            let mut bytes = Vec::new();
            file.take(READ_AT_ONCE).read_to_end(&mut bytes).ok()?;
            self.offset += bytes.len() as u64;
            self.partial.extend_from_slice(&bytes);
            let whole = self.partial.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
            let lines: Vec<u8> = self.partial.drain(..whole).collect();
            for line in lines.split(|&b| b == b'\n') {
                if let Ok(value) = serde_json::from_slice::<Value>(line) {
                    self.read(&value);
                }
            }
        }
        (self.usage.total() > 0).then_some(self.usage)
    }

    /// One line of the file.
    fn read(&mut self, value: &Value) {
        match self.format {
            Format::CodexRollout => {
                let payload = &value["payload"];
                let total = match (json::str_at(value, &["type"]), json::str_at(payload, &["type"])) {
                    (Some("event_msg"), Some("token_count")) => &payload["info"]["total_token_usage"],
                    (Some("token_usage_record"), _) => &payload["thread_token_usage"],
                    _ => return,
                };
                if total.is_object() {
                    let input = json::u64_at(total, &["input_tokens"]);
                    let cached = json::u64_at(total, &["cached_input_tokens"]);
                    self.usage = Usage {
                        input_tokens: input.saturating_sub(cached),
                        output_tokens: json::u64_at(total, &["output_tokens"]),
                        cache_read_tokens: cached,
                        cache_write_tokens: json::u64_at(total, &["cache_write_input_tokens"]),
                    };
                }
            }
            Format::GeminiChat => match value.get("$set").and_then(|set| set.get("messages")) {
                Some(Value::Array(messages)) => messages.iter().for_each(|m| self.count_message(m)),
                _ => self.count_message(value),
            },
        }
    }

    /// A chat's model message of this turn, once.
    fn count_message(&mut self, message: &Value) {
        let tokens = &message["tokens"];
        if json::str_at(message, &["type"]) != Some("gemini") || !tokens.is_object() {
            return;
        }
        if json::str_at(message, &["timestamp"]).is_some_and(|at| at < self.since.as_str()) {
            return;
        }
        let id = json::str_at(message, &["id"]).unwrap_or_default().to_string();
        if !id.is_empty() && !self.counted.insert(id) {
            return;
        }
        let cached = json::u64_at(tokens, &["cached"]);
        self.usage.input_tokens += json::u64_at(tokens, &["input"]).saturating_sub(cached);
        self.usage.cache_read_tokens += cached;
        // Thinking is billed as output.
        self.usage.output_tokens += json::u64_at(tokens, &["output"]) + json::u64_at(tokens, &["thoughts"]);
    }

    /// The session's file under one of the roots, if it is there yet.
    fn find(&self, session: &str) -> Option<PathBuf> {
        self.roots.iter().find_map(|root| match self.format {
            Format::CodexRollout => codex_rollout(root, session),
            Format::GeminiChat => gemini_chat(root, session),
        })
    }
}

/// `ROOT/sessions/YYYY/MM/DD/rollout-…-SESSION.jsonl`: on the days around
/// now first (Codex names the day as it sees it; a turn may cross
/// midnight), then, for a thread resumed days after it began (Codex keeps
/// writing it in the folder of the day it began), every day's folder,
/// newest first, [`DAYS_LOOKED_BACK`] at most.
fn codex_rollout(root: &Path, session: &str) -> Option<PathBuf> {
    codex_rollout_around_now(root, session).or_else(|| codex_rollout_any_day(root, session))
}

/// The most day folders a resumed thread's rollout is looked for in.
const DAYS_LOOKED_BACK: usize = 800;

fn codex_rollout_any_day(root: &Path, session: &str) -> Option<PathBuf> {
    let suffix = format!("-{session}.jsonl");
    // Folders named by numbers, newest (largest) first.
    let numbered = |dir: &Path| -> Vec<PathBuf> {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
            .collect();
        found.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        found.into_iter().map(|(_, path)| path).collect()
    };
    numbered(&root.join("sessions"))
        .iter()
        .flat_map(|year| numbered(year))
        .flat_map(|month| numbered(&month))
        .take(DAYS_LOOKED_BACK)
        .find_map(|day| newest_in(&day, |name| name.starts_with("rollout-") && name.ends_with(&suffix)))
}

fn codex_rollout_around_now(root: &Path, session: &str) -> Option<PathBuf> {
    let suffix = format!("-{session}.jsonl");
    let now = chrono::Utc::now();
    let mut days: Vec<chrono::NaiveDate> = Vec::new();
    for offset in [0i64, -1, 1, -2] {
        let at = now + chrono::Duration::days(offset);
        for day in [at.date_naive(), at.with_timezone(&chrono::Local).date_naive()] {
            if !days.contains(&day) {
                days.push(day);
            }
        }
    }
    days.into_iter().find_map(|day| {
        let folder = root.join("sessions").join(day.format("%Y/%m/%d").to_string());
        newest_in(&folder, |name| name.starts_with("rollout-") && name.ends_with(&suffix))
    })
}

/// `ROOT/tmp/PROJECT/chats/session-…-ID8.jsonl` whose first line names
/// `session`.
fn gemini_chat(root: &Path, session: &str) -> Option<PathBuf> {
    let short: String = session.chars().take(8).collect();
    let suffix = format!("-{short}.jsonl");
    let projects = std::fs::read_dir(root.join("tmp")).ok()?;
    projects.flatten().find_map(|project| {
        let chats = project.path().join("chats");
        let path = newest_in(&chats, |name| name.starts_with("session-") && name.ends_with(&suffix))?;
        let mut head = String::new();
        crate::process::open_regular(&path).ok()?.take(64 << 10).read_to_string(&mut head).ok()?;
        let first: Value = serde_json::from_str(head.lines().next()?).ok()?;
        (json::str_at(&first, &["sessionId"]) == Some(session)).then_some(path)
    })
}

/// The most recently changed file of `folder` whose name `wanted` takes.
fn newest_in(folder: &Path, wanted: impl Fn(&str) -> bool) -> Option<PathBuf> {
    std::fs::read_dir(folder)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&wanted))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(name: &str) -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures").join(name)).unwrap()
    }

    /// Lays `text` out as the agent would under `root`, then follows it.
    fn follow_written(format: Format, relative: &str, text: &str, session: &str, since: &str) -> Option<Usage> {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        SessionLog::new(format, vec![root.path().to_path_buf()], since.into()).follow(session)
    }

    #[test]
    fn codexs_rollout_says_the_threads_total_so_far() {
        let thread = "01a21b41-334d-70c0-97e9-60ded06e957b";
        let day = chrono::Utc::now().format("%Y/%m/%d");
        let relative = format!("sessions/{day}/rollout-2026-11-27T04-26-27-{thread}.jsonl");
        let text = capture("codex-0.169-rollout.jsonl");
        let usage = follow_written(Format::CodexRollout, &relative, &text, thread, "").unwrap();
        assert_eq!(usage, Usage { input_tokens: 36, output_tokens: 21, cache_read_tokens: 0, cache_write_tokens: 0 });
        // Another thread's file is not this one's.
        assert_eq!(follow_written(Format::CodexRollout, &relative, &text, "another-thread", ""), None);
        // A thread resumed a week after it began is still in the folder of
        // the day it began: followed there (a live check on every turn).
        let week_ago = (chrono::Utc::now() - chrono::Duration::days(9)).format("%Y/%m/%d");
        let relative = format!("sessions/{week_ago}/rollout-2026-11-18T04-26-27-{thread}.jsonl");
        let usage = follow_written(Format::CodexRollout, &relative, &text, thread, "").unwrap();
        assert_eq!(usage.output_tokens, 21);
    }

    #[test]
    fn gemini_clis_chat_says_this_turns_messages_once_each() {
        let session = "1a8e92ef-e25b-4a32-8d4e-fd17e6d2d452";
        let relative = "tmp/project/chats/session-2026-11-27T04-26-1a8e92ef.jsonl";
        let text = capture("gemini-0.61-chat.jsonl");
        let usage = follow_written(Format::GeminiChat, relative, &text, session, "").unwrap();
        assert_eq!(usage.input_tokens, 12);
        assert_eq!(usage.output_tokens, 7);
        // Written again whole, or with the message again: counted once.
        let twice = format!("{text}{}", text.lines().filter(|l| l.contains("\"type\":\"gemini\"")).collect::<String>());
        let usage = follow_written(Format::GeminiChat, relative, &format!("{twice}\n"), session, "").unwrap();
        assert_eq!(usage.output_tokens, 7);
        // An earlier turn's messages are not this turn's.
        assert_eq!(follow_written(Format::GeminiChat, relative, &text, session, "2099-01-01T00:00:00.000Z"), None);
    }

    #[test]
    fn a_line_being_written_is_read_once_whole() {
        let root = tempfile::tempdir().unwrap();
        let day = chrono::Utc::now().format("%Y/%m/%d");
        let path = root.path().join(format!("sessions/{day}/rollout-x-t1.jsonl"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let line = r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":500,"cached_input_tokens":100,"output_tokens":50}}}}"#;
        let (head, tail) = line.split_at(40);
        std::fs::write(&path, head).unwrap();
        let mut log = SessionLog::new(Format::CodexRollout, vec![root.path().to_path_buf()], String::new());
        assert_eq!(log.follow("t1"), None);
        std::fs::write(&path, format!("{head}{tail}\n")).unwrap();
        let usage = log.follow("t1").unwrap();
        assert_eq!((usage.input_tokens, usage.cache_read_tokens, usage.output_tokens), (400, 100, 50));
    }
}
