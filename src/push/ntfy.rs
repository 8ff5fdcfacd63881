//! ntfy's HTTP protocol, as Corral uses it: publish a message as JSON
//! (`POST /` with the topic in the body), with `http` actions whose body is
//! the signed answer; follow a topic's messages (`GET /TOPIC/json?since=`,
//! one JSON object per line, kept open); and a webhook, POSTed the same
//! message.

use std::io::BufRead;
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::PushConfig;

/// How long a publish may take before it counts as not sent.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// ntfy sends a keepalive about every 45 s on a followed topic: silence
/// longer than this is a dead connection, opened again.
const SILENCE: Duration = Duration::from_secs(120);

/// A push not published, and whether the phone took it (then only the
/// webhook failed).
#[derive(Debug)]
pub struct NotPublished {
    /// What failed.
    pub error: PushError,
    /// The phone has it: the webhook alone is left to send it to.
    pub phone_took: bool,
}

/// Why a push or a subscription failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// `[push] ntfy` is not a topic's address.
    #[error("`[push] ntfy = \"{0}\"` is not a topic's address: write e.g. \"https://ntfy.sh/<a random topic>\"")]
    NotATopic(String),
    /// The server could not be reached or refused.
    #[error("{what} {url}: {detail}")]
    Http {
        /// What was being done.
        what: &'static str,
        /// Where.
        url: String,
        /// What went wrong.
        detail: String,
    },
}

/// Where pushes go and answers come from.
#[derive(Debug, Clone)]
pub struct Channel {
    /// The ntfy server (`https://ntfy.sh`) and topic, if any.
    ntfy: Option<(String, String)>,
    webhook: Option<String>,
    /// Task text and the agent's words in pushes.
    pub details: bool,
    agent: ureq::Agent,
}

impl Channel {
    /// The channel `[push]` sets up.
    pub fn new(config: &PushConfig) -> Result<Channel, PushError> {
        let ntfy = match &config.ntfy {
            Some(url) => {
                let (server, topic) =
                    url.trim_end_matches('/').rsplit_once('/').ok_or(PushError::NotATopic(url.clone()))?;
                if topic.is_empty() || server.ends_with('/') || !server.contains("://") {
                    return Err(PushError::NotATopic(url.clone()));
                }
                Some((server.to_string(), topic.to_string()))
            }
            None => None,
        };
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder().timeout_connect(Some(SEND_TIMEOUT)).http_status_as_error(true).build(),
        );
        Ok(Channel { ntfy, webhook: config.webhook.clone(), details: config.details, agent })
    }

    /// True if answers can come back (an ntfy topic is set).
    pub fn answers(&self) -> bool {
        self.ntfy.is_some()
    }

    /// The address the phone posts answers to: the reply topic.
    pub fn reply_address(&self) -> Option<String> {
        self.ntfy.as_ref().map(|(server, topic)| format!("{server}/{topic}-answers"))
    }

    /// Sends `message` (`{title, message, actions: [{label, answer}]}`) to
    /// the topic and the webhook (`webhook_only`: the webhook alone, the
    /// phone having it). The ntfy message's buttons publish their answer on
    /// the reply topic.
    pub fn publish(&self, message: &Value, webhook_only: bool) -> Result<(), NotPublished> {
        if let Some((server, topic)) = self.ntfy.as_ref().filter(|_| !webhook_only) {
            let reply = format!("{server}/{topic}-answers");
            let actions: Vec<Value> = message["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| {
                    json!({"action": "http", "label": a["label"], "url": reply, "method": "POST",
                           "body": a["answer"], "clear": true})
                })
                .collect();
            let body = json!({"topic": topic, "title": message["title"], "message": message["message"],
                "tags": message["tags"], "priority": message["priority"], "actions": actions});
            let url = format!("{server}/");
            self.post(&url, &body, "publishing to").map_err(|error| NotPublished { error, phone_took: false })?;
        }
        if let Some(url) = &self.webhook {
            // The phone has it (or there is none): a webhook that fails gets
            // it again, the phone does not.
            self.post(url, message, "posting to the webhook")
                .map_err(|error| NotPublished { error, phone_took: true })?;
        }
        Ok(())
    }

    fn post(&self, url: &str, body: &Value, what: &'static str) -> Result<(), PushError> {
        let failed = |e: ureq::Error| PushError::Http { what, url: url.to_string(), detail: e.to_string() };
        let request = self.agent.post(url).config().timeout_global(Some(SEND_TIMEOUT)).build();
        request.send_json(body).map_err(failed)?;
        Ok(())
    }

    /// Follows the reply topic from `since` (an ntfy message id, or `all`),
    /// handing each message's id and text to `each`, until the connection
    /// ends or `each` says stop (false). Errors: the server could not be
    /// reached, or the connection broke.
    pub fn follow(&self, since: &str, mut each: impl FnMut(&str, &str) -> bool) -> Result<(), PushError> {
        let Some((server, topic)) = &self.ntfy else { return Ok(()) };
        let url = format!("{server}/{topic}-answers/json?since={since}");
        let failed = |detail: String| PushError::Http { what: "following", url: url.clone(), detail };
        let request = self.agent.get(&url).config().timeout_recv_body(None).timeout_per_read(Some(SILENCE)).build();
        let response = request.call().map_err(|e| failed(e.to_string()))?;
        let reader = std::io::BufReader::new(response.into_body().into_reader());
        for line in reader.lines() {
            let line = line.map_err(|e| failed(e.to_string()))?;
            let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
            if event["event"] != "message" {
                continue;
            }
            let (Some(id), Some(text)) = (event["id"].as_str(), event["message"].as_str()) else { continue };
            if !each(id, text) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Asks the server whether it is up (`/v1/health`), for `doctor`.
    pub fn check(&self) -> Result<String, PushError> {
        let Some((server, _)) = &self.ntfy else { return Ok("webhook only: answers cannot come back".into()) };
        let url = format!("{server}/v1/health");
        let request = self.agent.get(&url).config().timeout_global(Some(SEND_TIMEOUT)).build();
        let mut response =
            request.call().map_err(|e| PushError::Http { what: "asking", url: url.clone(), detail: e.to_string() })?;
        let body = response.body_mut().read_to_string().unwrap_or_default();
        Ok(format!("{server} answers ({})", body.trim()))
    }
}
