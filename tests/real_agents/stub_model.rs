//! A stub model server for the real agent CLIs, on 127.0.0.1 only: the
//! Anthropic Messages API (Claude Code, pi, opencode), the OpenAI Responses
//! API (Codex) and the Gemini API (Gemini CLI), streamed as server-sent
//! events as the real services stream them.
//!
//! What it answers is scripted by the task itself: every `stub> VERB ARGS`
//! in the latest user message that has any is one step, and the step taken
//! is the number of tool results that came back since that message.
//! - `say TEXT`: the final answer (`{last}` is the last tool result)
//! - `bash CMD`: call the agent's shell tool with CMD
//! - `mcp NAME JSON`: call the tool whose name ends with NAME
//! - `flaky N` (not a step): the first N requests fail with HTTP 500
//! - `limit N` (not a step): the first N requests fail with HTTP 429 at
//!   the account's usage limit, resetting now (as each API says it)
//! - `error CODE`: fail with HTTP CODE
//! - `hang`: answer nothing until the client goes away
//!
//! A prompt that hands over background runs' results (Corral's continuation
//! turn) is answered `Combined: ` and each run's first line of final text.
//! Anything else (a CLI's own side requests) is answered `ok`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// The marker of a scripted step.
const STEP: &str = "stub>";
/// How Corral's continuation prompt begins.
const CONTINUATION: &str = "The background agent runs you launched have finished";

/// A running stub server; it stops with the test process.
pub struct StubModel {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl StubModel {
    /// Starts the server on a free loopback port.
    pub fn start() -> StubModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stub model server");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let attempts = Arc::new(Mutex::new(HashMap::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, attempts) = (Arc::clone(&log), Arc::clone(&attempts));
                std::thread::spawn(move || serve(stream, &log, &attempts));
            }
        });
        StubModel { port, seen }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The request paths served so far.
    pub fn paths(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// The wire format of a request.
#[derive(Clone, Copy, PartialEq)]
enum Api {
    Anthropic,
    Responses,
    Gemini,
}

/// One request's conversation, reduced to what the script needs.
#[derive(Debug, PartialEq)]
enum Entry {
    User(String),
    ToolResult(String),
}

/// What to answer.
enum Answer {
    Say(String),
    Tool {
        name: String,
        input: Value,
    },
    Http(u16),
    /// HTTP 429: the account's usage limit, resetting at this minute.
    Limit,
    Hang,
}

fn serve(mut stream: TcpStream, log: &Mutex<Vec<String>>, attempts: &Mutex<HashMap<String, usize>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Some((method, path, body)) = crate::common::http::read_request(&mut stream) else { return };
    log.lock().unwrap().push(format!("{method} {path}"));
    if method != "POST" {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    }
    let api = if path.starts_with("/v1/messages") {
        Api::Anthropic
    } else if path.starts_with("/v1/responses") {
        Api::Responses
    } else if path.contains(":streamGenerateContent") {
        Api::Gemini
    } else if path.contains(":generateContent") {
        // Gemini CLI's side requests (model routing, next-speaker checks)
        // ask for JSON of a schema: the least answer that fits it, at once
        // (anything else it retries with backoff for a minute and more).
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let config = &request["generationConfig"];
        let schema = config.get("responseJsonSchema").or_else(|| config.get("responseSchema"));
        let text = schema.map_or_else(|| "ok".to_string(), |schema| least_fitting(schema).to_string());
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "index": 0}]});
        return respond_json(&mut stream, "200 OK", &body);
    } else {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(dump) = std::env::var_os("CORRAL_STUB_DUMP") {
        // For finding out what a new CLI version sends.
        let mut dumped = std::fs::OpenOptions::new().create(true).append(true).open(dump).unwrap();
        let _ = writeln!(dumped, "{path}\n{}", serde_json::to_string(&request).unwrap_or_default());
    }
    let answer = decide(api, &request, attempts);
    match answer {
        Answer::Http(code) => http_error(&mut stream, api, code),
        Answer::Limit => limit_error(&mut stream, api),
        Answer::Hang => {
            // Until the client closes the connection (it was aborted).
            let _ = stream.set_read_timeout(None);
            let mut buf = [0u8; 64];
            while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
        }
        Answer::Say(text) => stream_answer(&mut stream, api, &request, None, &text),
        Answer::Tool { name, input } => stream_answer(&mut stream, api, &request, Some((&name, input)), ""),
    }
}

/// The least value that fits a JSON schema (as Gemini's API writes them:
/// types may be upper case): first enum values, minimums, empty strings.
fn least_fitting(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str().unwrap_or("object").to_ascii_lowercase().as_str() {
        "string" => json!("stub"),
        "number" | "integer" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => {
            let mut object = serde_json::Map::new();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                object.insert(name.clone(), least_fitting(property));
            }
            Value::Object(object)
        }
    }
}

/// The conversation of a request, in order.
fn conversation(api: Api, request: &Value) -> Vec<Entry> {
    let text_of = |content: &Value| -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    let mut entries = Vec::new();
    match api {
        Api::Anthropic => {
            for message in request["messages"].as_array().into_iter().flatten() {
                if message["role"] != "user" {
                    continue;
                }
                match &message["content"] {
                    Value::String(s) => entries.push(Entry::User(s.clone())),
                    Value::Array(blocks) => {
                        let mut text = String::new();
                        for block in blocks {
                            match block["type"].as_str() {
                                Some("tool_result") => entries.push(Entry::ToolResult(text_of(&block["content"]))),
                                Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
                                _ => {}
                            }
                        }
                        if !text.is_empty() {
                            entries.push(Entry::User(text));
                        }
                    }
                    _ => {}
                }
            }
        }
        Api::Gemini => {
            for content in request["contents"].as_array().into_iter().flatten() {
                if content["role"] != "user" {
                    continue;
                }
                let mut text = String::new();
                for part in content["parts"].as_array().into_iter().flatten() {
                    if let Some(response) = part.get("functionResponse") {
                        entries.push(Entry::ToolResult(response["response"].to_string()));
                    } else if let Some(t) = part["text"].as_str() {
                        text.push_str(t);
                    }
                }
                if !text.is_empty() {
                    entries.push(Entry::User(text));
                }
            }
        }
        Api::Responses => {
            for item in request["input"].as_array().into_iter().flatten() {
                match item["type"].as_str() {
                    Some("function_call_output") => entries.push(Entry::ToolResult(text_of(&item["output"]))),
                    Some("message") | None if item["role"] == "user" => {
                        entries.push(Entry::User(text_of(&item["content"])))
                    }
                    _ => {}
                }
            }
        }
    }
    entries
}

fn decide(api: Api, request: &Value, attempts: &Mutex<HashMap<String, usize>>) -> Answer {
    let entries = conversation(api, request);
    let prompt_at = entries
        .iter()
        .rposition(|e| matches!(e, Entry::User(text) if text.contains(STEP) || text.contains(CONTINUATION)));
    let Some(prompt_at) = prompt_at else { return Answer::Say("ok".into()) };
    let Entry::User(prompt) = &entries[prompt_at] else { unreachable!() };
    let results: Vec<&str> = entries[prompt_at + 1..]
        .iter()
        .filter_map(|e| match e {
            Entry::ToolResult(text) => Some(text.as_str()),
            Entry::User(_) => None,
        })
        .collect();
    if prompt.contains(CONTINUATION) {
        return Answer::Say(format!("Combined: {}", first_lines_after(prompt, "Final text:").join(" | ")));
    }
    // A step ends with its line: what a CLI adds to the prompt after it
    // (Claude Code's "Continue from where you left off." on a resumed
    // session) is not part of it.
    let steps: Vec<&str> = prompt.split(STEP).skip(1).map(|s| s.lines().next().unwrap_or("").trim()).collect();
    let attempt = {
        let mut attempts = attempts.lock().unwrap();
        let n = attempts.entry(format!("{prompt}#{}", results.len())).or_insert(0);
        *n += 1;
        *n
    };
    let flaky: usize =
        steps.iter().find_map(|s| s.strip_prefix("flaky ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    if attempt <= flaky {
        return Answer::Http(500);
    }
    let limited: usize =
        steps.iter().find_map(|s| s.strip_prefix("limit ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
    if attempt <= limited {
        return Answer::Limit;
    }
    let actions: Vec<&str> =
        steps.iter().copied().filter(|s| !s.starts_with("flaky") && !s.starts_with("limit")).collect();
    let Some(step) = actions.get(results.len()) else { return Answer::Say("done".into()) };
    let last = results.last().map(|r| r.trim().chars().take(300).collect::<String>()).unwrap_or_default();
    let (verb, rest) = step.split_once(' ').unwrap_or((step, ""));
    match verb {
        "say" => Answer::Say(rest.replace("{last}", &last)),
        "error" => Answer::Http(rest.trim().parse().unwrap_or(400)),
        "hang" => Answer::Hang,
        "bash" => shell_call(api, request, rest),
        "mcp" => {
            let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
            let tool = tool_names(api, request).into_iter().find(|t| t.ends_with(name));
            match tool {
                Some(tool) => Answer::Tool { name: tool, input: serde_json::from_str(args).unwrap_or(json!({})) },
                None => Answer::Say(format!("no tool ending with {name} among {:?}", tool_names(api, request))),
            }
        }
        other => Answer::Say(format!("the stub does not know the step {other:?}")),
    }
}

/// The first line after each `marker` in `text`.
/// The first line of each text after `marker`, inside the frame Corral
/// puts around a run's own words (`<<<run-words …`).
fn first_lines_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    text.split(marker)
        .skip(1)
        .filter_map(|part| part.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("<<<run-words")))
        .collect()
}

fn tool_names(api: Api, request: &Value) -> Vec<String> {
    let tools = request["tools"].as_array().into_iter().flatten();
    match api {
        Api::Anthropic => tools.filter_map(|t| t["name"].as_str().map(str::to_string)).collect(),
        Api::Gemini => tools
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .filter_map(|f| f["name"].as_str().map(str::to_string))
            .collect(),
        // Codex groups an MCP server's tools in a namespace: `mcp__corral`
        // with `launch_agent` inside is called as `mcp__corral/launch_agent`.
        Api::Responses => tools
            .flat_map(|t| -> Vec<String> {
                match t["tools"].as_array() {
                    Some(inner) => {
                        let space = t["name"].as_str().unwrap_or_default();
                        inner.iter().filter_map(|i| i["name"].as_str().map(|n| format!("{space}/{n}"))).collect()
                    }
                    None => {
                        t["name"].as_str().or(t["function"]["name"].as_str()).map(str::to_string).into_iter().collect()
                    }
                }
            })
            .collect(),
    }
}

/// A call of the agent's shell tool, in the shape its schema asks for.
fn shell_call(api: Api, request: &Value, command: &str) -> Answer {
    let names = tool_names(api, request);
    let has = |n: &str| names.iter().any(|t| t == n);
    let (name, input) = if has("Bash") {
        ("Bash", json!({ "command": command, "description": "run a command" }))
    } else if has("bash") {
        ("bash", json!({ "command": command }))
    } else if has("shell") {
        ("shell", json!({ "command": ["bash", "-lc", command] }))
    } else if has("shell_command") {
        ("shell_command", json!({ "command": command }))
    } else if has("exec_command") {
        ("exec_command", json!({ "cmd": command }))
    } else if has("run_shell_command") {
        ("run_shell_command", json!({ "command": command }))
    } else {
        return Answer::Say(format!("no shell tool among {names:?}"));
    };
    Answer::Tool { name: name.to_string(), input }
}

fn http_error(stream: &mut TcpStream, api: Api, code: u16) {
    let body = match api {
        Api::Anthropic => {
            json!({"type": "error", "error": {"type": "api_error", "message": format!("stub error {code}")}})
        }
        Api::Responses => {
            json!({"error": {"type": "server_error", "message": format!("stub error {code}"), "code": null}})
        }
        Api::Gemini => json!({"error": {"code": code, "message": format!("stub error {code}"), "status": "INTERNAL"}}),
    };
    respond_json(stream, &format!("{code} Stub"), &body);
}

/// HTTP 429 at the account's usage limit, as each API says it: the
/// Responses API's `usage_limit_reached` with its reset time (now), the
/// Messages API's `rate_limit_error`, Gemini's `RESOURCE_EXHAUSTED`.
fn limit_error(stream: &mut TcpStream, api: Api) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let body = match api {
        Api::Anthropic => json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. Please try again later."}}),
        Api::Responses => {
            json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
            "plan_type": "plus", "resets_at": now, "resets_in_seconds": 0}})
        }
        Api::Gemini => json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}),
    };
    // A limit is not over in seconds: clients that would retry at once
    // (Claude Code, on a short or no retry-after) give up.
    respond_json_with(stream, "429 Too Many Requests", "retry-after: 3600\r\n", &body);
}

/// A whole JSON response, then the connection closes.
fn respond_json(stream: &mut TcpStream, status: &str, body: &Value) {
    respond_json_with(stream, status, "", body);
}

/// As [`respond_json`], with more header lines (each ending in CRLF).
fn respond_json_with(stream: &mut TcpStream, status: &str, headers: &str, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

fn sse(out: &mut String, event: &str, data: Value) {
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

/// Numbers the ids of answers: a CLI that resumes a session merges
/// messages that share an id, as the real services never reuse one.
static ANSWERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn stream_answer(stream: &mut TcpStream, api: Api, request: &Value, tool: Option<(&str, Value)>, text: &str) {
    let model = request["model"].as_str().unwrap_or("stub-model");
    let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (msg_id, tool_id, call_id) = (format!("msg_stub_{n}"), format!("toolu_stub_{n}"), format!("call_stub_{n}"));
    let mut body = String::new();
    match api {
        Api::Anthropic => {
            let usage = json!({"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0});
            sse(
                &mut body,
                "message_start",
                json!({"type": "message_start", "message": {"id": msg_id, "type": "message", "role": "assistant",
                    "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
            );
            let stop = match &tool {
                Some((name, input)) => {
                    sse(
                        &mut body,
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                            "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}}}),
                    );
                    sse(
                        &mut body,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                    );
                    "tool_use"
                }
                None => {
                    sse(
                        &mut body,
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    );
                    sse(
                        &mut body,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                    );
                    "end_turn"
                }
            };
            sse(&mut body, "content_block_stop", json!({"type": "content_block_stop", "index": 0}));
            sse(
                &mut body,
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": 7}}),
            );
            sse(&mut body, "message_stop", json!({"type": "message_stop"}));
        }
        Api::Responses => {
            let id = format!("resp_stub_{n}");
            sse(
                &mut body,
                "response.created",
                json!({"type": "response.created", "response": {"id": id, "model": model, "status": "in_progress"}}),
            );
            let item = match &tool {
                Some((name, input)) => {
                    let mut call = json!({"type": "function_call", "id": format!("fc_stub_{n}"), "call_id": call_id,
                        "name": name, "arguments": input.to_string(), "status": "completed"});
                    if let Some((space, inner)) = name.split_once('/') {
                        call["namespace"] = json!(space);
                        call["name"] = json!(inner);
                    }
                    call
                }
                None => {
                    sse(
                        &mut body,
                        "response.output_text.delta",
                        json!({"type": "response.output_text.delta", "item_id": msg_id, "output_index": 0,
                            "content_index": 0, "delta": text}),
                    );
                    json!({"type": "message", "id": msg_id, "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]})
                }
            };
            sse(
                &mut body,
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            );
            sse(
                &mut body,
                "response.completed",
                json!({"type": "response.completed", "response": {"id": id, "model": model, "status": "completed",
                    "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 19}}}),
            );
        }
        Api::Gemini => {
            let part = match &tool {
                Some((name, input)) => json!({"functionCall": {"name": name, "args": input}}),
                None => json!({"text": text}),
            };
            let chunk = json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP",
                "index": 0}], "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19},
                "modelVersion": model, "responseId": msg_id});
            body.push_str(&format!("data: {chunk}\r\n\r\n"));
        }
    }
    let head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}
