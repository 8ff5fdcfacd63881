//! What every JSON-lines agent stream shares: classifying a line (event,
//! oversized event, or plain text), bounded transcript texts, and the
//! verdict when the stream ended without its terminal event.

use serde_json::Value;

use super::{signal_name, EventKind, ProcessEnd, StreamLine, TranscriptEvent, Verdict};
use crate::run::{RunStatus, StopReason};

/// Longest text kept in one transcript event; the raw log keeps everything.
pub const MAX_EVENT_TEXT: usize = 256 * 1024;

/// One stdout line, classified.
pub enum Line {
    /// A JSON object (or other JSON value).
    Json(Value),
    /// A line too long to keep whole; its event type read from its start.
    Oversized { event_type: Option<String>, total: u64 },
    /// Anything else: kept as transcript text.
    Text(String),
}

/// Classifies a line. An oversized line is never parsed: only its head is
/// here, and JSON producers put `type` first, which is all a terminal-event
/// check needs.
pub fn classify(line: StreamLine<'_>) -> Line {
    if line.dropped > 0 {
        return Line::Oversized {
            event_type: leading_type(line.bytes).map(str::to_string),
            total: line.bytes.len() as u64 + line.dropped,
        };
    }
    let trimmed = line.bytes.trim_ascii();
    if trimmed.first() == Some(&b'{') {
        if let Ok(value) = serde_json::from_slice::<Value>(trimmed) {
            return Line::Json(value);
        }
    }
    Line::Text(String::from_utf8_lossy(line.bytes).into_owned())
}

/// The event type when a line starts `{"type":"NAME"`, as every agent CLI
/// here prints it. Used to skip parsing of high-volume delta lines and to
/// recognize oversized lines; anything else returns `None`.
pub fn leading_type(bytes: &[u8]) -> Option<&str> {
    let rest = bytes.strip_prefix(b"{\"type\":\"")?;
    let end = rest.iter().take(64).position(|&b| b == b'"')?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// The transcript event for a line that is not part of the agent's protocol.
pub fn text_event(text: String) -> TranscriptEvent {
    TranscriptEvent::text(EventKind::Output, bounded(text))
}

/// The transcript note for an oversized line.
pub fn oversized_event(event_type: Option<&str>, total: u64) -> TranscriptEvent {
    let what = event_type.map_or("a line".to_string(), |t| format!("a `{t}` event"));
    TranscriptEvent::text(
        EventKind::System,
        format!("{what} of {total} bytes was too long to keep; only its type was read"),
    )
}

/// An unknown event type: kept as it is, otherwise ignored.
pub fn unknown_event(value: &Value) -> TranscriptEvent {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("?");
    TranscriptEvent { kind: EventKind::System, text: format!("unrecognized event `{kind}`"), json: Some(value.clone()) }
}

/// Cuts `text` to [`MAX_EVENT_TEXT`] bytes at a character boundary.
pub fn bounded(mut text: String) -> String {
    let dropped = super::truncate_at_char(&mut text, MAX_EVENT_TEXT);
    if dropped > 0 {
        text.push_str(&format!("…[{dropped} bytes cut]"));
    }
    text
}

/// `a.b.c` lookup as a string.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(key))?.as_str()
}

/// `a.b.c` lookup as an unsigned count (missing or negative: 0).
pub fn u64_at(value: &Value, path: &[&str]) -> u64 {
    path.iter().try_fold(value, |v, key| v.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

/// A tool call's transcript event: name and compact arguments.
pub fn tool_call(name: &str, id: Option<&str>, args: &Value) -> TranscriptEvent {
    let args_text = match args {
        Value::Null => String::new(),
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    };
    let mut detail = serde_json::json!({ "name": name, "args": args });
    if let Some(id) = id {
        detail["id"] = Value::from(id);
    }
    TranscriptEvent {
        kind: EventKind::ToolCall,
        text: bounded(format!("{name} {args_text}").trim_end().to_string()),
        json: Some(detail),
    }
}

/// A tool result's transcript event.
pub fn tool_result(name: Option<&str>, id: Option<&str>, output: String, is_error: bool) -> TranscriptEvent {
    TranscriptEvent {
        kind: EventKind::ToolResult,
        text: bounded(output),
        json: Some(serde_json::json!({ "name": name, "id": id, "is_error": is_error })),
    }
}

/// The text of content that may be a string or an array of `{type:"text"}`
/// blocks (Anthropic-style tool results).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The verdict for a JSON-stream agent whose process ended without its
/// terminal event: never completed, since the agent never said it was done.
pub fn verdict_without_terminal(agent: &str, end: ProcessEnd, stderr_tail: &str, last_error: Option<&str>) -> Verdict {
    let hint = last_error.or_else(|| super::last_line(stderr_tail));
    let with_hint = |what: String| super::with_hint(what, hint);
    match end {
        ProcessEnd::Exited(0) => Verdict {
            status: RunStatus::Failed,
            stop_reason: StopReason::AgentError,
            error: Some(with_hint(format!("{agent} exited without finishing its turn (no final event)"))),
        },
        ProcessEnd::Exited(code) => Verdict {
            status: RunStatus::Failed,
            stop_reason: StopReason::ExitCode,
            error: Some(with_hint(format!("{agent} exited with code {code} before finishing"))),
        },
        ProcessEnd::Signaled(sig) => Verdict {
            status: RunStatus::Failed,
            stop_reason: StopReason::Signal,
            error: Some(with_hint(format!("{agent} was killed by {} before finishing", signal_name(sig)))),
        },
    }
}

/// Joins the system prompt before the task, for agents without a flag to
/// append to their own system prompt.
pub fn task_with_instructions(system_prompt: &str, task: &str) -> String {
    if system_prompt.trim().is_empty() {
        task.to_string()
    } else {
        format!("{}\n\n---\n\n{task}", system_prompt.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_leading_type_only_at_the_start() {
        assert_eq!(leading_type(br#"{"type":"agent_end","messages":[]}"#), Some("agent_end"));
        assert_eq!(leading_type(br#"{"id":1,"type":"agent_end"}"#), None);
        assert_eq!(leading_type(b"not json"), None);
    }

    #[test]
    fn garbage_and_wrong_shapes_are_text_never_errors() {
        let cases: [&[u8]; 4] = [b"\xff\xfe\x00garbage", b"{not json", b"[1,2,3]", b""];
        for bytes in cases {
            assert!(matches!(classify(StreamLine { bytes, dropped: 0 }), Line::Text(_)));
        }
    }
}
