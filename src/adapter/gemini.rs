//! The Gemini CLI adapter (`gemini --output-format stream-json -p TASK`).
//!
//! Events: `init` (session id, model), `message` (user or assistant text,
//! possibly in deltas), `tool_use`, `tool_result`, `error` (non-fatal
//! warnings and errors), and the terminal `result` with `status` and
//! `stats`. The final text is the assistant's text since the last tool step,
//! deltas concatenated.

use std::collections::HashMap;

use serde_json::Value;

use super::json::{self, Line};
use super::{
    Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// Gemini's stream state.
#[derive(Debug, Default)]
pub struct GeminiAdapter {
    report: Report,
    /// Assistant text since the last tool step.
    answer: String,
    open_tools: HashMap<String, String>,
    last_error: Option<String>,
}

impl Adapter for GeminiAdapter {
    fn api_hosts(&self, env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        let vendors = ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"];
        env.hosts(&vendors, &["GOOGLE_GEMINI_BASE_URL"])
    }

    fn own_files(&self) -> &'static [&'static str] {
        &["~/.gemini/"]
    }

    fn own_history(&self) -> &'static [&'static str] {
        &["~/.gemini/tmp", "~/.gemini/history"]
    }

    fn session_log(&self) -> Option<super::session_log::Format> {
        Some(super::session_log::Format::GeminiChat)
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["GEMINI_", "GOOGLE_"]
    }

    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let mut args: Vec<String> = ["--output-format", "stream-json"].map(str::to_string).to_vec();
        if let Some(model) = ctx.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        args.extend(preset.args.iter().cloned());
        // The prompt on stdin, never argv (which every local user can read):
        // with stdin not a terminal Gemini CLI runs headless and takes it
        // whole as its input.
        let prompt = json::task_with_instructions(&preset.system_prompt, ctx.task);
        Ok(Invocation { program: "gemini".into(), args, env: Vec::new(), stdin: Some(prompt), files: Vec::new() })
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        let event = match json::classify(line) {
            Line::Json(value) => value,
            Line::Oversized { event_type, total } => {
                out.push(json::oversized_event(event_type.as_deref(), total));
                return (event_type.as_deref() == Some("result")).then(|| self.flush_answer_and_complete(out));
            }
            Line::Text(text) => {
                out.push(json::text_event(text));
                return None;
            }
        };
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "init" => {
                let id = json::str_at(&event, &["session_id"]).or_else(|| json::str_at(&event, &["sessionId"]));
                self.report.session_id = id.map(str::to_string);
                self.report.resolved_model = json::str_at(&event, &["model"]).map(str::to_string);
            }
            "message" => {
                if json::str_at(&event, &["role"]) == Some("assistant") {
                    self.answer.push_str(json::str_at(&event, &["content"]).unwrap_or_default());
                }
            }
            "tool_use" => {
                self.flush_answer(out);
                let name = json::str_at(&event, &["tool_name"]).unwrap_or("?");
                let id = json::str_at(&event, &["tool_id"]);
                if let Some(id) = id {
                    self.open_tools.insert(id.to_string(), name.to_string());
                }
                out.push(json::tool_call(name, id, &event["parameters"]));
            }
            "tool_result" => {
                let id = json::str_at(&event, &["tool_id"]);
                let name = id.and_then(|id| self.open_tools.remove(id));
                let is_error = json::str_at(&event, &["status"]) == Some("error");
                let output = json::str_at(&event, &["output"])
                    .or_else(|| json::str_at(&event, &["error", "message"]))
                    .unwrap_or_default()
                    .to_string();
                out.push(json::tool_result(name.as_deref(), id, output, is_error));
            }
            "error" => {
                let message = json::str_at(&event, &["message"]).unwrap_or("error").to_string();
                out.push(TranscriptEvent::text(EventKind::Error, json::bounded(message.clone())));
                self.last_error = Some(message);
            }
            "result" => return Some(self.on_result(&event, out)),
            _ => out.push(json::unknown_event(&event)),
        }
        None
    }

    fn resume_invocation(&self, ctx: &InvocationContext<'_>, session_id: &str) -> Option<Invocation> {
        if session_id.is_empty() {
            return None; // resume only by the stored session id, never "latest"
        }
        let mut invocation = self.invocation(ctx).ok()?;
        invocation.args.extend(["--resume".to_string(), session_id.to_string()]);
        Some(invocation)
    }

    fn busy(&self) -> bool {
        !self.open_tools.is_empty()
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        json::verdict_without_terminal("gemini", end, stderr_tail, self.last_error.as_deref())
    }

    fn report(&self) -> Report {
        let mut report = self.report.clone();
        if !self.answer.trim().is_empty() {
            report.final_text = Some(self.answer.clone());
        }
        report
    }
}

impl GeminiAdapter {
    /// Assistant text before a tool step becomes one transcript event.
    fn flush_answer(&mut self, out: &mut Vec<TranscriptEvent>) {
        if !self.answer.trim().is_empty() {
            let text = std::mem::take(&mut self.answer);
            out.push(TranscriptEvent::text(EventKind::Text, json::bounded(text.clone())));
            self.report.final_text = Some(text);
        }
        self.answer.clear();
    }

    fn flush_answer_and_complete(&mut self, out: &mut Vec<TranscriptEvent>) -> Verdict {
        self.flush_answer(out);
        Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None }
    }

    fn on_result(&mut self, event: &Value, out: &mut Vec<TranscriptEvent>) -> Verdict {
        self.flush_answer(out);
        let stats = &event["stats"];
        let cached = json::u64_at(stats, &["cached"]);
        self.report.usage.input_tokens = json::u64_at(stats, &["input_tokens"]).saturating_sub(cached);
        self.report.usage.cache_read_tokens = cached;
        self.report.usage.output_tokens = json::u64_at(stats, &["output_tokens"]);
        out.push(TranscriptEvent {
            kind: EventKind::Usage,
            text: format!("{} in / {} out", json::u64_at(stats, &["input_tokens"]), self.report.usage.output_tokens),
            json: Some(stats.clone()),
        });
        if json::str_at(event, &["status"]) == Some("success") {
            return Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None };
        }
        let error = json::str_at(event, &["error", "message"])
            .map(str::to_string)
            .or_else(|| self.last_error.clone())
            .unwrap_or_else(|| "gemini reported an error".into());
        let stop_reason = match json::str_at(event, &["error", "type"]) {
            Some(t) if t.contains("turn") => StopReason::MaxTurns,
            _ => StopReason::AgentError,
        };
        out.push(TranscriptEvent::text(EventKind::Error, json::bounded(error.clone())));
        Verdict { status: RunStatus::Failed, stop_reason, error: Some(error) }
    }
}
