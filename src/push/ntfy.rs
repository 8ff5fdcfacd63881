//! ntfy's HTTP protocol, as Corral uses it: publish a message as JSON
//! (`POST /` with the topic in the body), with `http` actions whose body is
//! the signed answer; follow a topic's messages (`GET /TOPIC/json?since=`,
//! one JSON object per line, kept open); and a webhook, POSTed the same
//! message.
//!
//! Buttons that answer are put in a push only where the server refuses
//! both topics to anyone without a token (asked of the server itself, as a
//! stranger would ask): on an open topic, whoever reads it could post its
//! signed answers back, so its pushes say what happened and carry none.

use std::io::BufRead;
use std::time::Duration;

use serde_json::{json, Value};

use crate::home::config::PushConfig;

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

/// How long the server's "a stranger may" is believed before it is asked
/// again. Only that: its "no one but the token's holder" is asked again
/// before each push with buttons and each answer acted on, as its rules
/// may be loosened at any moment, and a wrong yes lets a stranger answer.
const ASK_AGAIN: Duration = Duration::from_secs(600);

/// Whether answers may come from the phone, as the server said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answering {
    /// The server refuses both topics to anyone without the token.
    On,
    /// Why not, in words with what to do.
    Off(String),
}

/// Where pushes go and answers come from.
#[derive(Debug, Clone)]
pub struct Channel {
    /// The ntfy server (`https://ntfy.sh`) and topic, if any.
    ntfy: Option<(String, String)>,
    token: Option<String>,
    webhook: Option<String>,
    /// Task text and the agent's words in pushes.
    pub details: bool,
    agent: ureq::Agent,
    /// What the server last said of a stranger's access, and when.
    /// Runtime state only.
    answering: std::sync::Arc<std::sync::Mutex<Option<(std::time::Instant, Answering)>>>,
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
        let token = config.token.clone().filter(|t| !t.trim().is_empty());
        Ok(Channel {
            ntfy,
            token,
            webhook: config.webhook.clone(),
            details: config.details,
            agent,
            answering: Default::default(),
        })
    }

    /// Whether answers may come from the phone: only where the server
    /// refuses a stranger (no token) both reading the topic and writing
    /// its `-answers` topic, so its signed answers reach no one else and
    /// no one else can post one back. Asked of the server as a stranger
    /// would ask: each time while it says so, at most every 10 minutes
    /// while it says a stranger may. An error: it could not be asked (no
    /// answers meanwhile).
    pub fn answering(&self) -> Result<Answering, PushError> {
        let Some((server, topic)) = &self.ntfy else {
            return Ok(Answering::Off("no ntfy topic: a webhook alone cannot bring an answer back".into()));
        };
        if let Some((at, said @ Answering::Off(_))) = self.answering.lock().ok().and_then(|a| a.clone()) {
            if at.elapsed() < ASK_AGAIN {
                return Ok(said);
            }
        }
        let said = if self.token.is_none() {
            Answering::Off(format!(
                "no `[push] token`: the topic {topic} is protected by its name alone, and whoever reads it could \
                 answer for you; protect it on the server and set a token (see the manual, docs/push.md)"
            ))
        } else {
            let read = self.stranger(self.agent.get(format!("{server}/{topic}/json?poll=1&since=latest")).call())?;
            let write = self.stranger(self.agent.post(format!("{server}/{topic}-answers")).send("probe"))?;
            match (read, write) {
                (true, true) => Answering::On,
                (false, _) => Answering::Off(format!(
                    "{server} lets anyone read the topic {topic}: deny anonymous access to it (and to \
                     {topic}-answers) on the server, then the buttons come back"
                )),
                (true, false) => Answering::Off(format!(
                    "{server} lets anyone post to {topic}-answers: deny anonymous access to it on the server"
                )),
            }
        };
        if let Ok(mut slot) = self.answering.lock() {
            *slot = Some((std::time::Instant::now(), said.clone()));
        }
        Ok(said)
    }

    /// Whether the server refused a request made without the token (401,
    /// 403): true refused, false let through; an error when it said
    /// neither.
    fn stranger<T>(&self, answer: Result<T, ureq::Error>) -> Result<bool, PushError> {
        match answer {
            Ok(_) => Ok(false),
            Err(ureq::Error::StatusCode(401 | 403)) => Ok(true),
            Err(e) => Err(PushError::Http {
                what: "asking whether a stranger may use",
                url: self.reply_address().unwrap_or_default(),
                detail: e.to_string(),
            }),
        }
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
            let asks = message["actions"].as_array().is_some_and(|a| !a.is_empty());
            let answering = match asks {
                true => self.answering().map_err(|error| NotPublished { error, phone_took: false })?,
                false => Answering::On,
            };
            let mut text = message["message"].as_str().unwrap_or_default().to_string();
            let actions: Vec<Value> = match (&answering, &self.token) {
                (Answering::On, Some(token)) => message["actions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        json!({"action": "http", "label": a["label"], "url": reply, "method": "POST",
                               "headers": {"Authorization": format!("Bearer {token}")},
                               "body": a["answer"], "clear": true})
                    })
                    .collect(),
                // No signed answer on a topic a stranger may read.
                (Answering::Off(_), _) | (Answering::On, None) => {
                    if asks {
                        text.push_str("\n\nAnswer on your computer (corral ls): this topic is not protected, so it carries no buttons.");
                    }
                    Vec::new()
                }
            };
            let body = json!({"topic": topic, "title": message["title"], "message": text,
                "tags": message["tags"], "priority": message["priority"], "actions": actions});
            let url = format!("{server}/");
            self.post(&url, &body, "publishing to", true).map_err(|error| NotPublished { error, phone_took: false })?;
        }
        if let Some(url) = &self.webhook {
            // The phone has it (or there is none): a webhook that fails gets
            // it again, the phone does not.
            // The webhook is told what happened, never handed an answer.
            let mut told = message.clone();
            if let Some(actions) = told["actions"].as_array_mut() {
                for action in actions {
                    if let Some(action) = action.as_object_mut() {
                        action.remove("answer");
                    }
                }
            }
            self.post(url, &told, "posting to the webhook", false)
                .map_err(|error| NotPublished { error, phone_took: true })?;
        }
        Ok(())
    }

    /// POSTs `body` as JSON to `url`, with the token if `ours` (the ntfy
    /// server's, never a webhook's).
    fn post(&self, url: &str, body: &Value, what: &'static str, ours: bool) -> Result<(), PushError> {
        let failed = |e: ureq::Error| PushError::Http { what, url: url.to_string(), detail: e.to_string() };
        let mut request = self.agent.post(url);
        if let Some(token) = self.token.as_ref().filter(|_| ours) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        request.config().timeout_global(Some(SEND_TIMEOUT)).build().send_json(body).map_err(failed)?;
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
        let mut request = self.agent.get(&url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let request = request.config().timeout_recv_body(None).timeout_per_read(Some(SILENCE)).build();
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
        let answers = match self.answering()? {
            Answering::On => {
                "answers from the phone: on (the server refuses both topics to anyone without the token)".to_string()
            }
            Answering::Off(why) => format!("answers from the phone: off ({why})"),
        };
        Ok(format!("{server} answers ({}); {answers}", body.trim()))
    }
}
