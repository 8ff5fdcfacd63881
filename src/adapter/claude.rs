//! The Claude Code adapter (`claude -p --output-format stream-json --verbose`).
//!
//! Terminal event: the first `result` line. `is_error: true` fails the run
//! even when `subtype` says `success` (an API error the CLI reports as a
//! result). `system/api_retry` lines are progress. Without a `result` line
//! the process's end decides (SIGINT while waiting on the API exits 0 with
//! no result: that is not a completion).

use std::collections::HashMap;

use serde_json::Value;

use super::json::{self, Line};
use super::{
    Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// The settings file in the run's folder that allows a reply's commands.
const ALLOWED_SETTINGS: &str = "allowed-settings.json";

/// Claude Code's stream state.
#[derive(Debug, Default)]
pub struct ClaudeAdapter {
    report: Report,
    /// Tool calls without a result yet, by id, with the tool's name.
    open_tools: HashMap<String, String>,
    last_error: Option<String>,
    /// Usage of each model message so far, by message id, as its
    /// `assistant` events say (one event per content block, each with the
    /// message's usage): the live spend until `result` gives the totals.
    /// Claude Code's stream says a message's input and cache tokens
    /// exactly, its output tokens only as of the message's start.
    live_usage: HashMap<String, crate::run::Usage>,
}

impl Adapter for ClaudeAdapter {
    fn api_hosts(&self, env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        env.hosts(&["api.anthropic.com", "statsig.anthropic.com"], &["ANTHROPIC_BASE_URL"])
    }

    fn own_files(&self) -> &'static [&'static str] {
        &[
            "~/.claude/",
            "~/.claude.json",
            "~/.claude.json.backup",
            "~/.config/claude",
            "~/.cache/claude",
            "~/.local/share/claude",
            "~/.local/state/claude",
        ]
    }

    fn own_history(&self) -> &'static [&'static str] {
        &[
            "~/.claude/projects",
            "~/.claude/todos",
            "~/.claude/shell-snapshots",
            "~/.claude/statsig",
            "~/.claude/file-history",
            "~/.claude/debug",
            "~/.claude/logs",
            "~/.claude/session-env",
            "~/.claude/plans",
            "~/.claude/local",
            "~/.claude/ide",
            "~/.claude/history.jsonl",
            "~/.local/share/claude/versions",
        ]
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["ANTHROPIC_", "CLAUDE_", "DISABLE_", "MCP_"]
    }

    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let mut args: Vec<String> = ["-p", "--output-format", "stream-json", "--verbose"].map(str::to_string).to_vec();
        if let Some(model) = ctx.model {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        if !preset.tools.is_empty() {
            args.extend(["--tools".to_string(), preset.tools.join(",")]);
        }
        // From a private file, never argv (which every local user can read).
        if let Some(file) = &ctx.system_prompt_file {
            args.extend(["--append-system-prompt-file".to_string(), file.to_string_lossy().into_owned()]);
        }
        args.extend(preset.args.iter().cloned());
        // Allowed commands (`reply --allow-denied`) often hold tokens: they
        // go in a private settings file, never in argv.
        let mut files = Vec::new();
        if !ctx.allowed.is_empty() {
            let path = ctx.run_dir.join(ALLOWED_SETTINGS);
            let settings = serde_json::json!({ "permissions": { "allow": ctx.allowed } });
            args.extend(["--settings".to_string(), path.to_string_lossy().into_owned()]);
            files.push((path, settings.to_string()));
        }
        // The task on stdin (`-p` with no prompt argument reads it): never in
        // argv, where every local user can read it, and never taken for an
        // option or one more value of a variadic one like --allowedTools.
        Ok(Invocation { program: "claude".into(), args, env: Vec::new(), stdin: Some(ctx.task.to_string()), files })
    }

    fn resume_invocation(&self, ctx: &InvocationContext<'_>, session_id: &str) -> Option<Invocation> {
        if session_id.is_empty() {
            return None; // resume only by the stored session id, never a guess
        }
        let mut invocation = self.invocation(ctx).ok()?;
        // Ahead of every option that takes several values.
        invocation.args.splice(1..1, ["--resume".to_string(), session_id.to_string()]);
        Some(invocation)
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        if json::leading_type(line.bytes) == Some("stream_event") && line.dropped == 0 {
            return None; // token deltas; the assistant message follows whole
        }
        let event = match json::classify(line) {
            Line::Json(value) => value,
            Line::Oversized { event_type, total } => {
                out.push(json::oversized_event(event_type.as_deref(), total));
                // An oversized result still ends the run; its text is lost
                // to the cut, so the last assistant text stands in.
                return (event_type.as_deref() == Some("result")).then_some(Verdict {
                    status: RunStatus::Completed,
                    stop_reason: StopReason::EndTurn,
                    error: None,
                });
            }
            Line::Text(text) => {
                out.push(json::text_event(text));
                return None;
            }
        };
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "system" => self.on_system(&event, out),
            "assistant" => self.on_assistant(&event["message"], out),
            "user" => self.on_user(&event["message"], out),
            "result" => return Some(self.on_result(&event, out)),
            "stream_event" | "rate_limit_event" => {}
            _ => out.push(json::unknown_event(&event)),
        }
        None
    }

    fn busy(&self) -> bool {
        !self.open_tools.is_empty()
    }

    fn allows_tools(&self) -> bool {
        true
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        json::verdict_without_terminal("claude", end, stderr_tail, self.last_error.as_deref())
    }

    fn report(&self) -> Report {
        self.report.clone()
    }
}

/// A refused tool call as Claude Code's permission rules write it:
/// `Bash(npm test)`, `Edit(src/x.rs)`, or the tool's name alone.
fn denial(entry: &Value) -> String {
    let tool = json::str_at(entry, &["tool_name"]).unwrap_or("?");
    let input = &entry["tool_input"];
    let detail = ["command", "file_path", "path", "url", "pattern"].iter().find_map(|key| json::str_at(input, &[key]));
    match detail {
        Some(detail) => format!("{tool}({})", detail.lines().next().unwrap_or_default()),
        None => tool.to_string(),
    }
}

impl ClaudeAdapter {
    fn on_system(&mut self, event: &Value, out: &mut Vec<TranscriptEvent>) {
        match json::str_at(event, &["subtype"]) {
            Some("init") => {
                self.report.session_id = json::str_at(event, &["session_id"]).map(str::to_string);
                if let Some(model) = json::str_at(event, &["model"]) {
                    self.report.resolved_model = Some(model.to_string());
                }
                let model = self.report.resolved_model.as_deref().unwrap_or("default model");
                out.push(TranscriptEvent::text(EventKind::System, format!("session started ({model})")));
            }
            Some("api_retry") => {
                let attempt = json::u64_at(event, &["attempt"]);
                let max = json::u64_at(event, &["max_retries"]);
                let status = event.get("error_status").map(Value::to_string).unwrap_or_default();
                let why = json::str_at(event, &["error"]).unwrap_or("error");
                let delay = event.get("retry_delay_ms").and_then(Value::as_f64).unwrap_or(0.0);
                let text = format!("{why} {status} ({attempt}/{max}), next try in {delay:.0} ms");
                self.last_error = Some(format!("API error {status} {why}"));
                out.push(TranscriptEvent { kind: EventKind::Retry, text, json: Some(event.clone()) });
            }
            _ => {}
        }
    }

    fn on_assistant(&mut self, message: &Value, out: &mut Vec<TranscriptEvent>) {
        if let Some(model) = json::str_at(message, &["model"]) {
            self.report.resolved_model = Some(model.to_string());
        }
        self.count_live(message);
        for block in message["content"].as_array().into_iter().flatten() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = json::str_at(block, &["text"]).unwrap_or_default().to_string();
                    out.push(TranscriptEvent::text(EventKind::Text, json::bounded(text.clone())));
                    self.report.final_text = Some(text);
                }
                Some("thinking") => {
                    let text = json::str_at(block, &["thinking"]).unwrap_or_default().to_string();
                    out.push(TranscriptEvent::text(EventKind::Thinking, json::bounded(text)));
                }
                Some("tool_use") => {
                    let name = json::str_at(block, &["name"]).unwrap_or("?");
                    let id = json::str_at(block, &["id"]);
                    if let Some(id) = id {
                        self.open_tools.insert(id.to_string(), name.to_string());
                    }
                    out.push(json::tool_call(name, id, &block["input"]));
                }
                _ => {}
            }
        }
    }

    /// Adds a message's usage to the live spend (each message once, at the
    /// most any of its events said).
    fn count_live(&mut self, message: &Value) {
        let (Some(id), Some(usage)) = (json::str_at(message, &["id"]), message.get("usage")) else { return };
        let seen = self.live_usage.entry(id.to_string()).or_default();
        seen.input_tokens = seen.input_tokens.max(json::u64_at(usage, &["input_tokens"]));
        seen.output_tokens = seen.output_tokens.max(json::u64_at(usage, &["output_tokens"]));
        seen.cache_read_tokens = seen.cache_read_tokens.max(json::u64_at(usage, &["cache_read_input_tokens"]));
        seen.cache_write_tokens = seen.cache_write_tokens.max(json::u64_at(usage, &["cache_creation_input_tokens"]));
        self.report.usage = self.live_usage.values().fold(Default::default(), |sum, u| sum + *u);
    }

    fn on_user(&mut self, message: &Value, out: &mut Vec<TranscriptEvent>) {
        for block in message["content"].as_array().into_iter().flatten() {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = json::str_at(block, &["tool_use_id"]);
            let name = id.and_then(|id| self.open_tools.remove(id));
            let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            out.push(json::tool_result(name.as_deref(), id, json::content_text(&block["content"]), is_error));
        }
    }

    fn on_result(&mut self, event: &Value, out: &mut Vec<TranscriptEvent>) -> Verdict {
        let usage = &event["usage"];
        let report = &mut self.report;
        report.usage.input_tokens = json::u64_at(usage, &["input_tokens"]);
        report.usage.output_tokens = json::u64_at(usage, &["output_tokens"]);
        report.usage.cache_read_tokens = json::u64_at(usage, &["cache_read_input_tokens"]);
        report.usage.cache_write_tokens = json::u64_at(usage, &["cache_creation_input_tokens"]);
        report.cost_usd = event.get("total_cost_usd").and_then(Value::as_f64);
        if let Some(id) = json::str_at(event, &["session_id"]) {
            report.session_id = Some(id.to_string());
        }
        if report.resolved_model.is_none() {
            let models = event.get("modelUsage").and_then(Value::as_object);
            report.resolved_model = models.and_then(|m| m.keys().next().cloned());
        }
        report.denied = event["permission_denials"].as_array().into_iter().flatten().map(denial).collect();
        if let Some(note) = crate::run::denied_note(&report.denied) {
            out.push(TranscriptEvent::text(EventKind::System, note));
        }
        let result_text = json::str_at(event, &["result"]).map(str::to_string);
        let is_error = event.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        let subtype = json::str_at(event, &["subtype"]).unwrap_or_default();
        out.push(TranscriptEvent {
            kind: EventKind::Usage,
            text: format!("{} in / {} out", report.usage.input_tokens, report.usage.output_tokens),
            json: Some(usage.clone()),
        });

        if !is_error && subtype == "success" {
            if let Some(text) = result_text {
                self.report.final_text = Some(text);
            }
            return Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None };
        }
        let errors: Vec<&str> = event["errors"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let error = result_text
            .filter(|t| !t.is_empty())
            .or_else(|| (!errors.is_empty()).then(|| errors.join("; ")))
            .unwrap_or_else(|| match subtype {
                "" => "claude ended with a result it did not explain".to_string(),
                other => format!("claude ended with {other}"),
            });
        let stop_reason = match subtype {
            "error_max_turns" => StopReason::MaxTurns,
            _ if !event["api_error_status"].is_null() => StopReason::ApiError,
            _ => StopReason::AgentError,
        };
        out.push(TranscriptEvent::text(EventKind::Error, json::bounded(error.clone())));
        Verdict { status: RunStatus::Failed, stop_reason, error: Some(error) }
    }
}
