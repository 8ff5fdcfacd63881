//! The opencode adapter (`opencode run --format json`).
//!
//! Events carry a `part`: `text`, `tool_use` (with `state.status`, input and
//! output), `step_start`, `step_finish` (with `reason`, `tokens`, `cost`),
//! and `error`. Terminal: `done`, else a `step_finish` whose reason is
//! `stop` (a step ending in tool calls is followed by another step).

use serde_json::Value;

use super::json::{self, Line};
use super::{
    Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// opencode's stream state.
#[derive(Debug, Default)]
pub struct OpencodeAdapter {
    report: Report,
    /// Text parts of the current step, concatenated.
    answer: String,
    last_error: Option<String>,
}

impl Adapter for OpencodeAdapter {
    fn api_hosts(&self, env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        let vendors = ["api.anthropic.com", "api.openai.com", "models.dev", "opencode.ai"];
        env.hosts(&vendors, &["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"])
    }

    fn own_files(&self) -> &'static [&'static str] {
        &["~/.config/opencode/", "~/.local/share/opencode/", "~/.local/state/opencode/", "~/.cache/opencode/"]
    }

    fn own_history(&self) -> &'static [&'static str] {
        &["~/.local/share/opencode/storage", "~/.local/share/opencode/log", "~/.local/share/opencode/snapshot"]
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["OPENCODE_", "ANTHROPIC_", "OPENAI_"]
    }

    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let mut args: Vec<String> = ["run", "--format", "json"].map(str::to_string).to_vec();
        if let Some(model) = ctx.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        args.extend(preset.args.iter().cloned());
        // On stdin, verbatim: opencode wraps a message argument that has a
        // space in double quotes (and escapes its quotes) before the model
        // sees it; its standard input it passes on as it is.
        let task = json::task_with_instructions(&preset.system_prompt, ctx.task);
        Ok(Invocation { program: "opencode".into(), args, env: Vec::new(), stdin: Some(task), files: Vec::new() })
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        let event = match json::classify(line) {
            Line::Json(value) => value,
            Line::Oversized { event_type, total } => {
                out.push(json::oversized_event(event_type.as_deref(), total));
                return (event_type.as_deref() == Some("done")).then(|| self.verdict());
            }
            Line::Text(text) => {
                out.push(json::text_event(text));
                return None;
            }
        };
        if self.report.session_id.is_none() {
            self.report.session_id = json::str_at(&event, &["sessionID"]).map(str::to_string);
        }
        let part = &event["part"];
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "step_start" => self.answer.clear(),
            "text" => {
                let text = json::str_at(part, &["text"]).unwrap_or_default();
                out.push(TranscriptEvent::text(EventKind::Text, json::bounded(text.to_string())));
                self.answer.push_str(text);
            }
            "reasoning" => {
                let text = json::str_at(part, &["text"]).unwrap_or_default();
                out.push(TranscriptEvent::text(EventKind::Thinking, json::bounded(text.to_string())));
            }
            "tool_use" => {
                let name = json::str_at(part, &["tool"]).unwrap_or("?");
                let id = json::str_at(part, &["callID"]);
                let state = &part["state"];
                out.push(json::tool_call(name, id, &state["input"]));
                match json::str_at(state, &["status"]) {
                    Some("completed") => {
                        let output = json::str_at(state, &["output"]).unwrap_or_default().to_string();
                        out.push(json::tool_result(Some(name), id, output, false));
                    }
                    Some("error") => {
                        let output = json::str_at(state, &["error"]).unwrap_or_default().to_string();
                        out.push(json::tool_result(Some(name), id, output, true));
                    }
                    _ => {}
                }
            }
            "step_finish" => {
                let tokens = &part["tokens"];
                let usage = &mut self.report.usage;
                usage.input_tokens += json::u64_at(tokens, &["input"]);
                usage.output_tokens += json::u64_at(tokens, &["output"]) + json::u64_at(tokens, &["reasoning"]);
                usage.cache_read_tokens += json::u64_at(tokens, &["cache", "read"]);
                usage.cache_write_tokens += json::u64_at(tokens, &["cache", "write"]);
                if let Some(cost) = part.get("cost").and_then(Value::as_f64) {
                    *self.report.cost_usd.get_or_insert(0.0) += cost;
                }
                out.push(TranscriptEvent {
                    kind: EventKind::Usage,
                    text: "step finished".into(),
                    json: Some(tokens.clone()),
                });
                if !self.answer.trim().is_empty() {
                    self.report.final_text = Some(self.answer.clone());
                }
                if json::str_at(part, &["reason"]) == Some("stop") {
                    return Some(self.verdict());
                }
            }
            "error" => {
                let message = json::str_at(&event, &["error", "data", "message"])
                    .or_else(|| json::str_at(&event, &["error", "message"]))
                    .or_else(|| json::str_at(&event, &["error", "name"]))
                    .unwrap_or("error")
                    .to_string();
                out.push(TranscriptEvent::text(EventKind::Error, json::bounded(message.clone())));
                self.last_error = Some(message);
            }
            "done" => return Some(self.verdict()),
            _ => out.push(json::unknown_event(&event)),
        }
        None
    }

    fn resume_invocation(&self, ctx: &InvocationContext<'_>, session_id: &str) -> Option<Invocation> {
        if session_id.is_empty() {
            return None; // resume only by the stored session id, never `--continue`
        }
        let mut invocation = self.invocation(ctx).ok()?;
        invocation.args.splice(1..1, ["--session".to_string(), session_id.to_string()]);
        Some(invocation)
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        json::verdict_without_terminal("opencode", end, stderr_tail, self.last_error.as_deref())
    }

    fn report(&self) -> Report {
        self.report.clone()
    }
}

impl OpencodeAdapter {
    fn verdict(&self) -> Verdict {
        match &self.last_error {
            Some(error) if self.report.final_text.is_none() => {
                Verdict { status: RunStatus::Failed, stop_reason: StopReason::AgentError, error: Some(error.clone()) }
            }
            _ => Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None },
        }
    }
}
