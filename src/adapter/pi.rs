//! The pi adapter (`pi --mode json`).
//!
//! Terminal event: `agent_settled` (pi 1.x), else the last `agent_end` that
//! is not followed by `auto_retry_start` and does not say `willRetry: true`.
//! Because "not followed by" can only be known from what comes next, an
//! `agent_end` without `willRetry` is a tentative end: it becomes the
//! outcome when the next line is not a retry, when the process exits, or
//! when a short settle window passes in silence. pi exits 0 even when the
//! run failed, so the stream alone decides.

use std::time::Duration;

use serde_json::Value;

use super::json::{self, Line};
use super::{
    Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// How long an `agent_end` may go unanswered before it is the end. pi
/// prints `auto_retry_start` right after the `agent_end` it retries.
pub const SETTLE_WINDOW: Duration = Duration::from_millis(250);

/// pi's stream state.
#[derive(Debug, Default)]
pub struct PiAdapter {
    report: Report,
    /// The verdict of an `agent_end` not yet known to be final.
    tentative: Option<Verdict>,
    /// Error of the last assistant message that failed.
    last_error: Option<String>,
    tools_running: usize,
}

impl Adapter for PiAdapter {
    fn api_hosts(&self, env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        let vendors = ["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "openrouter.ai"];
        let mut hosts = env.hosts(&vendors, &["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"]);
        // Providers of its own `models.json`: `providers.X.baseUrl`.
        let models = std::fs::read_to_string(env.home.join(".pi/agent/models.json")).unwrap_or_default();
        if let Ok(models) = serde_json::from_str::<serde_json::Value>(&models) {
            let providers = models["providers"].as_object().into_iter().flatten();
            hosts.extend(providers.filter_map(|(_, p)| p["baseUrl"].as_str().and_then(crate::sandbox::url_host)));
        }
        hosts
    }

    fn own_files(&self) -> &'static [&'static str] {
        &["~/.pi/"]
    }

    fn own_history(&self) -> &'static [&'static str] {
        &["~/.pi/agent/sessions"]
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["PI_", "ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "OPENROUTER_", "GROQ_", "XAI_", "MISTRAL_"]
    }

    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let mut args = vec!["--mode".to_string(), "json".to_string()];
        // A run from before sessions moved to the agent's folder keeps its.
        let earlier = ctx.run_dir.join("session.jsonl");
        let session = if earlier.exists() { earlier } else { super::agent_dir(&ctx.run_dir).join("session.jsonl") };
        args.push("--session".into());
        args.push(session.to_string_lossy().into_owned());
        if let Some(model) = ctx.model {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        if !preset.tools.is_empty() {
            args.extend(["--tools".to_string(), preset.tools.join(",")]);
        }
        if let Some(file) = ctx.system_prompt_file.as_ref() {
            args.extend(["--append-system-prompt".to_string(), file.to_string_lossy().into_owned()]);
        }
        args.extend(preset.args.iter().cloned());
        // pi has no `--`: an argument that begins with `-` or `@` is an
        // option or a file, and an unknown option takes the next argument
        // as its value. Its standard input is taken verbatim as the prompt.
        Ok(Invocation {
            program: "pi".into(),
            args,
            env: Vec::new(),
            stdin: Some(ctx.task.to_string()),
            files: Vec::new(),
        })
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        // Deltas repeat the whole partial message each time: never parse them.
        if json::leading_type(line.bytes) == Some("message_update") && line.dropped == 0 {
            return None;
        }
        let event = match json::classify(line) {
            Line::Json(value) => value,
            Line::Oversized { event_type, total } => {
                out.push(json::oversized_event(event_type.as_deref(), total));
                return self.on_oversized(event_type.as_deref());
            }
            Line::Text(text) => {
                out.push(json::text_event(text));
                return self.settled_by_other_line();
            }
        };
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
        match kind.as_str() {
            "session" => {
                self.report.session_id = json::str_at(&event, &["id"]).map(str::to_string);
                None
            }
            "message_end" => {
                self.on_message_end(&event["message"], out);
                self.settled_by_other_line()
            }
            "tool_execution_start" => {
                self.tools_running += 1;
                None
            }
            "tool_execution_end" => {
                self.tools_running = self.tools_running.saturating_sub(1);
                let output = json::content_text(&event["result"]["content"]);
                let is_error = event.get("isError").and_then(Value::as_bool).unwrap_or(false);
                out.push(json::tool_result(
                    json::str_at(&event, &["toolName"]),
                    json::str_at(&event, &["toolCallId"]),
                    output,
                    is_error,
                ));
                None
            }
            "agent_end" => {
                let verdict = self.verdict_now();
                match event.get("willRetry").and_then(Value::as_bool) {
                    Some(true) => {
                        self.tentative = None;
                        None
                    }
                    Some(false) => Some(verdict),
                    None => {
                        self.tentative = Some(verdict);
                        None
                    }
                }
            }
            "auto_retry_start" => {
                self.tentative = None;
                let attempt = json::u64_at(&event, &["attempt"]);
                let max = json::u64_at(&event, &["maxAttempts"]);
                let delay = json::u64_at(&event, &["delayMs"]);
                let why = json::str_at(&event, &["errorMessage"]).unwrap_or("error");
                out.push(TranscriptEvent::text(
                    EventKind::Retry,
                    json::bounded(format!("retry {attempt}/{max} in {delay} ms after: {why}")),
                ));
                None
            }
            "auto_retry_end" => {
                let success = event.get("success").and_then(Value::as_bool).unwrap_or(false);
                if success {
                    // Not a retry any more: the run is working again.
                    out.push(TranscriptEvent::text(EventKind::Output, "retry succeeded"));
                    return None;
                }
                let error =
                    json::str_at(&event, &["finalError"]).map(str::to_string).or_else(|| self.last_error.clone());
                let text = format!("retries exhausted: {}", error.as_deref().unwrap_or("unknown error"));
                out.push(TranscriptEvent::text(EventKind::Error, json::bounded(text)));
                self.tentative = None;
                Some(Verdict { status: RunStatus::Failed, stop_reason: StopReason::ApiError, error })
            }
            "agent_settled" => Some(self.tentative.take().unwrap_or_else(|| self.verdict_now())),
            "agent_start"
            | "turn_start"
            | "turn_end"
            | "message_start"
            | "message_update"
            | "tool_execution_update" => None,
            _ => {
                out.push(json::unknown_event(&event));
                None
            }
        }
    }

    /// The same `--session` file continues the conversation.
    fn resume_invocation(&self, ctx: &InvocationContext<'_>, _session_id: &str) -> Option<Invocation> {
        self.invocation(ctx).ok()
    }

    fn settling(&self) -> Option<Duration> {
        self.tentative.as_ref().map(|_| SETTLE_WINDOW)
    }

    fn settle(&mut self) -> Option<Verdict> {
        self.tentative.take()
    }

    fn busy(&self) -> bool {
        self.tools_running > 0
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        match self.tentative.take() {
            Some(verdict) => verdict,
            None => json::verdict_without_terminal("pi", end, stderr_tail, self.last_error.as_deref()),
        }
    }

    fn report(&self) -> Report {
        self.report.clone()
    }
}

impl PiAdapter {
    /// The run's verdict from the last assistant message seen.
    fn verdict_now(&self) -> Verdict {
        match &self.last_error {
            Some(error) => {
                Verdict { status: RunStatus::Failed, stop_reason: StopReason::ApiError, error: Some(error.clone()) }
            }
            None => Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None },
        }
    }

    /// Any line other than a retry after `agent_end` confirms it.
    fn settled_by_other_line(&mut self) -> Option<Verdict> {
        self.tentative.take()
    }

    fn on_oversized(&mut self, event_type: Option<&str>) -> Option<Verdict> {
        match event_type {
            // The messages it carries were already read from `message_end`s.
            Some("agent_end") => {
                self.tentative = Some(self.verdict_now());
                None
            }
            Some("agent_settled") => Some(self.tentative.take().unwrap_or_else(|| self.verdict_now())),
            Some("message_update") => None,
            _ => self.settled_by_other_line(),
        }
    }

    fn on_message_end(&mut self, message: &Value, out: &mut Vec<TranscriptEvent>) {
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => {}
            Some("user") => {
                let text = json::content_text(&message["content"]);
                if !text.is_empty() {
                    out.push(TranscriptEvent::text(EventKind::System, json::bounded(format!("prompt: {text}"))));
                }
                return;
            }
            // Tool results arrive as `tool_execution_end` already.
            _ => return,
        }
        let usage = &message["usage"];
        let report = &mut self.report;
        report.usage.input_tokens += json::u64_at(usage, &["input"]);
        report.usage.output_tokens += json::u64_at(usage, &["output"]);
        report.usage.cache_read_tokens += json::u64_at(usage, &["cacheRead"]);
        report.usage.cache_write_tokens += json::u64_at(usage, &["cacheWrite"]);
        if let Some(cost) = usage.get("cost").and_then(|c| c.get("total")).and_then(Value::as_f64) {
            *report.cost_usd.get_or_insert(0.0) += cost;
        }
        if let Some(model) = json::str_at(message, &["model"]) {
            report.resolved_model = Some(model.to_string());
        }

        let mut text = Vec::new();
        for block in message["content"].as_array().into_iter().flatten() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let t = json::str_at(block, &["text"]).unwrap_or_default();
                    text.push(t.to_string());
                    out.push(TranscriptEvent::text(EventKind::Text, json::bounded(t.to_string())));
                }
                Some("thinking") => {
                    let t = json::str_at(block, &["thinking"]).unwrap_or_default();
                    out.push(TranscriptEvent::text(EventKind::Thinking, json::bounded(t.to_string())));
                }
                Some("toolCall") => out.push(json::tool_call(
                    json::str_at(block, &["name"]).unwrap_or("?"),
                    json::str_at(block, &["id"]),
                    &block["arguments"],
                )),
                _ => {}
            }
        }
        let stop = json::str_at(message, &["stopReason"]).unwrap_or_default();
        if stop == "error" || stop == "aborted" {
            let error = json::str_at(message, &["errorMessage"]).unwrap_or("the model call failed").to_string();
            out.push(TranscriptEvent::text(EventKind::Error, json::bounded(error.clone())));
            self.last_error = Some(error);
        } else {
            self.last_error = None;
            // The final text is the last assistant message's text.
            let joined = text.join("\n");
            if !joined.trim().is_empty() {
                self.report.final_text = Some(joined);
            }
        }
        out.push(TranscriptEvent {
            kind: EventKind::Usage,
            text: format!("{} in / {} out", json::u64_at(usage, &["input"]), json::u64_at(usage, &["output"])),
            json: Some(usage.clone()),
        });
    }
}
