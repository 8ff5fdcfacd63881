//! The Codex adapter (`codex exec --json`).
//!
//! Terminal events: `turn.completed` and `turn.failed`. Top-level `error`
//! lines are transient (Codex reconnects) and never end a run. Codex
//! interrupts cleanly on SIGINT but can orphan a command's children on
//! SIGTERM, so its stop sequence starts with SIGINT. `turn.completed.usage`
//! is cumulative for the thread, so it replaces rather than adds.

use std::collections::HashSet;

use serde_json::Value;

use super::json::{self, Line};
use super::{
    Adapter, EventKind, Invocation, InvocationContext, InvocationError, ProcessEnd, Report, StreamLine,
    TranscriptEvent, Verdict,
};
use crate::run::{RunStatus, StopReason};

/// Codex's stream state.
#[derive(Debug, Default)]
pub struct CodexAdapter {
    report: Report,
    last_error: Option<String>,
    /// Items started and not yet completed (commands, tool calls).
    running: HashSet<String>,
}

impl Adapter for CodexAdapter {
    fn api_hosts(&self, env: &crate::sandbox::AgentEnv<'_>) -> Vec<String> {
        let mut hosts = env.hosts(&["api.openai.com", "chatgpt.com", "auth.openai.com"], &["OPENAI_BASE_URL"]);
        // Providers of its own config: `[model_providers.X] base_url`.
        let config = std::fs::read_to_string(env.home.join(".codex/config.toml")).unwrap_or_default();
        if let Ok(config) = config.parse::<toml::Table>() {
            let providers = config.get("model_providers").and_then(|p| p.as_table()).into_iter().flatten();
            hosts.extend(providers.filter_map(|(_, p)| p.get("base_url")?.as_str().and_then(crate::sandbox::url_host)));
        }
        hosts
    }

    fn own_files(&self) -> &'static [&'static str] {
        &["~/.codex/"]
    }

    fn own_history(&self) -> &'static [&'static str] {
        &["~/.codex/sessions", "~/.codex/archived_sessions", "~/.codex/log", "~/.codex/history.jsonl"]
    }

    fn session_log(&self) -> Option<super::session_log::Format> {
        Some(super::session_log::Format::CodexRollout)
    }

    fn own_env(&self) -> &'static [&'static str] {
        &["OPENAI_", "CODEX_"]
    }

    fn invocation(&self, ctx: &InvocationContext<'_>) -> Result<Invocation, InvocationError> {
        let preset = ctx.preset;
        let mut args: Vec<String> = ["exec", "--json", "--skip-git-repo-check"].map(str::to_string).to_vec();
        if let Some(model) = ctx.model {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        args.extend(preset.args.iter().cloned());
        // `-`: the prompt is read from stdin, never argv (which every local
        // user can read).
        args.push("-".to_string());
        let prompt = json::task_with_instructions(&preset.system_prompt, ctx.task);
        Ok(Invocation { program: "codex".into(), args, env: Vec::new(), stdin: Some(prompt), files: Vec::new() })
    }

    /// `codex exec [options] resume <thread id> -`, the prompt on stdin.
    fn resume_invocation(&self, ctx: &InvocationContext<'_>, session_id: &str) -> Option<Invocation> {
        if session_id.is_empty() {
            return None; // resume only by the stored session id, never a guess
        }
        let mut invocation = self.invocation(ctx).ok()?;
        invocation.args.pop();
        invocation.args.extend(["resume".to_string(), session_id.to_string(), "-".to_string()]);
        invocation.stdin = Some(ctx.task.to_string());
        Some(invocation)
    }

    fn usage_is_cumulative(&self) -> bool {
        true
    }

    fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>) -> Option<Verdict> {
        let event = match json::classify(line) {
            Line::Json(value) => value,
            Line::Oversized { event_type, total } => {
                out.push(json::oversized_event(event_type.as_deref(), total));
                return match event_type.as_deref() {
                    Some("turn.completed") => Some(self.completed()),
                    Some("turn.failed") => Some(self.failed(None)),
                    _ => None,
                };
            }
            Line::Text(text) => {
                out.push(json::text_event(text));
                return None;
            }
        };
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "thread.started" => {
                self.report.session_id = json::str_at(&event, &["thread_id"]).map(str::to_string);
            }
            "item.started" => self.on_item_started(&event["item"], out),
            "item.updated" => {}
            "item.completed" => {
                self.on_item_completed(&event["item"], out);
            }
            "error" => {
                let message = json::str_at(&event, &["message"]).unwrap_or("error").to_string();
                out.push(TranscriptEvent::text(EventKind::Retry, json::bounded(message.clone())));
                self.last_error = Some(message);
            }
            "turn.completed" => {
                let usage = &event["usage"];
                let input = json::u64_at(usage, &["input_tokens"]);
                let cached = json::u64_at(usage, &["cached_input_tokens"]);
                self.report.usage.input_tokens = input.saturating_sub(cached);
                self.report.usage.cache_read_tokens = cached;
                self.report.usage.cache_write_tokens = json::u64_at(usage, &["cache_write_input_tokens"]);
                self.report.usage.output_tokens = json::u64_at(usage, &["output_tokens"]);
                out.push(TranscriptEvent {
                    kind: EventKind::Usage,
                    text: format!("{input} in / {} out", self.report.usage.output_tokens),
                    json: Some(usage.clone()),
                });
                return Some(self.completed());
            }
            "turn.failed" => {
                let message = json::str_at(&event, &["error", "message"]).map(str::to_string);
                out.push(TranscriptEvent::text(EventKind::Error, message.clone().unwrap_or_default()));
                return Some(self.failed(message));
            }
            "turn.started" => {}
            _ => out.push(json::unknown_event(&event)),
        }
        None
    }

    fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    fn interrupts_first(&self) -> bool {
        true
    }

    fn verdict_on_exit(&mut self, end: ProcessEnd, stderr_tail: &str) -> Verdict {
        json::verdict_without_terminal("codex", end, stderr_tail, self.last_error.as_deref())
    }

    fn report(&self) -> Report {
        self.report.clone()
    }
}

impl CodexAdapter {
    fn completed(&self) -> Verdict {
        Verdict { status: RunStatus::Completed, stop_reason: StopReason::EndTurn, error: None }
    }

    fn failed(&self, message: Option<String>) -> Verdict {
        let error = message.or_else(|| self.last_error.clone()).unwrap_or_else(|| "the turn failed".into());
        Verdict { status: RunStatus::Failed, stop_reason: StopReason::ApiError, error: Some(error) }
    }

    fn on_item_started(&mut self, item: &Value, out: &mut Vec<TranscriptEvent>) {
        if let Some(id) = json::str_at(item, &["id"]) {
            self.running.insert(id.to_string());
        }
        if json::str_at(item, &["type"]) == Some("command_execution") {
            let command = json::str_at(item, &["command"]).unwrap_or_default();
            out.push(json::tool_call("shell", json::str_at(item, &["id"]), &Value::from(command)));
        }
    }

    fn on_item_completed(&mut self, item: &Value, out: &mut Vec<TranscriptEvent>) {
        let id = json::str_at(item, &["id"]);
        if let Some(id) = id {
            self.running.remove(id);
        }
        match json::str_at(item, &["type"]).unwrap_or_default() {
            "agent_message" => {
                let text = json::str_at(item, &["text"]).unwrap_or_default().to_string();
                out.push(TranscriptEvent::text(EventKind::Text, json::bounded(text.clone())));
                self.report.final_text = Some(text);
            }
            "reasoning" => {
                let text = json::str_at(item, &["text"]).unwrap_or_default().to_string();
                out.push(TranscriptEvent::text(EventKind::Thinking, json::bounded(text)));
            }
            "command_execution" => {
                let output = json::str_at(item, &["aggregated_output"]).unwrap_or_default().to_string();
                let code = item.get("exit_code").and_then(Value::as_i64);
                out.push(json::tool_result(Some("shell"), id, output, code.is_some_and(|c| c != 0)));
            }
            "error" => {
                let message = json::str_at(item, &["message"]).unwrap_or("error").to_string();
                out.push(TranscriptEvent::text(EventKind::Error, json::bounded(message)));
            }
            other => {
                // file_change, mcp_tool_call, web_search, todo_list, ...: a
                // tool step whose whole record is the detail.
                out.push(TranscriptEvent {
                    kind: EventKind::ToolResult,
                    text: other.to_string(),
                    json: Some(item.clone()),
                });
            }
        }
    }
}
