//! Following the answers, and sending what needs the user: the two halves
//! of a push channel at work, run by the tray (threads of its own) or by
//! `corral push listen` on a headless box.
//!
//! Answers are read from the reply topic from where the last reader left
//! off (`push.since` in the data folder), so an answer given while nothing
//! followed is acted on when something starts. Each acts once: its push is
//! marked answered in the store, and the ask it answers must still wait
//! (see `ask::answer`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{outbox, token, Channel};
use crate::attention::ask::Answer;
use crate::home::config::{Config, PushConfig};
use crate::home::Home;
use crate::store::{Store, StoreError};
use crate::upkeep::queue::ShepherdCommand;
use crate::watch::Watcher;

/// The longest the sender waits before it looks at the pushes again while
/// one waits to be sent (one given back, or one a dead sender claimed).
const CLAIM_CHECK: Duration = Duration::from_secs(60);
/// The shortest: a push due and not taken by this sender's last look is
/// another live sender's, in the middle of its send.
const CLAIM_LOOK: Duration = Duration::from_secs(2);
/// Longest wait before following the answers again after a failure.
const MOST_BACKOFF: Duration = Duration::from_secs(60);

/// What an answer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acted {
    /// It did what it said.
    Done {
        /// The push it answered.
        key: String,
        /// The answer.
        action: String,
    },
    /// `corral push test`'s answer: nothing to do here.
    Test(String),
    /// Not acted on, and why (forged, expired, answered already, stale).
    Refused(String),
}

/// Acts on one message of the reply topic.
pub fn act(store: &mut Store, shepherd: &ShepherdCommand, secret: &[u8], text: &str) -> Result<Acted, StoreError> {
    let signed = match token::verify(secret, text, chrono::Utc::now().timestamp()) {
        Ok(signed) => signed,
        Err(why) => return Ok(Acted::Refused(why.to_string())),
    };
    if signed.action == "test" {
        return Ok(Acted::Test(signed.key));
    }
    if signed.action == "allow-denied" {
        return allow_denied(store, shepherd, signed.key);
    }
    if signed.action == "send" {
        return send_review(store, shepherd, signed.key);
    }
    let answer = match signed.action.as_str() {
        "allow" => Answer::AllowMore,
        "stop" => Answer::Stop,
        other => return Ok(Acted::Refused(format!("no answer {other}"))),
    };
    let Some(ask) = crate::attention::ask::pending(store)?.into_iter().find(|a| outbox::budget_key(a) == signed.key)
    else {
        return Ok(Acted::Refused(format!("{} waits for no answer now (answered elsewhere, or over)", signed.key)));
    };
    if !store.answer_push(&signed.key)? {
        return Ok(Acted::Refused(format!("{} was answered already", signed.key)));
    }
    if let Err(e) = crate::attention::ask::answer(store, ask.owner(), answer, shepherd) {
        return Ok(Acted::Refused(e.to_string()));
    }
    Ok(Acted::Done { key: signed.key, action: signed.action })
}

/// "Allow and continue" for the run and end `key` names: its denied
/// actions allowed (tool calls, and what its sandbox refused), in a new
/// turn of its session (as `corral reply --allow-denied`), once.
fn allow_denied(store: &mut Store, shepherd: &ShepherdCommand, key: String) -> Result<Acted, StoreError> {
    let run_id = key.strip_prefix("denied:").and_then(|rest| rest.split(':').next()).unwrap_or("");
    let run = match store.run(run_id) {
        Ok(run) => run,
        Err(StoreError::UnknownRun(_)) => return Ok(Acted::Refused(format!("run {run_id} is gone"))),
        Err(e) => return Err(e),
    };
    if outbox::denied_key(&run) != key || run.denied.is_empty() {
        return Ok(Acted::Refused(format!("{key} waits for no answer now (answered elsewhere, or over)")));
    }
    if !store.answer_push(&key)? {
        return Ok(Acted::Refused(format!("{key} was answered already")));
    }
    match crate::verbs::allow::allow_denied(store, &run.id, "", shepherd) {
        Ok(_) => Ok(Acted::Done { key, action: "allow-denied".into() }),
        Err(crate::verbs::allow::AllowError::Store(e)) => Err(e),
        Err(e) => Ok(Acted::Refused(e.to_string())),
    }
}

/// "Send to the run" for the pull request ask `key` names: what the forge
/// asks sent to the run in its own session (as `corral pr RUN --send`),
/// once, and only while that ask is the one that waits (an answer to an
/// earlier review acts on nothing).
fn send_review(store: &mut Store, shepherd: &ShepherdCommand, key: String) -> Result<Acted, StoreError> {
    let run_id = key.strip_prefix("pr:").and_then(|rest| rest.split(':').next()).unwrap_or("");
    let current = match store.pull_request(run_id)? {
        Some(pr) if pr.asks() => crate::attention::announce::pull_request(store, &pr)?.map(|(key, _)| key),
        _ => None,
    };
    if current.as_deref() != Some(key.as_str()) {
        return Ok(Acted::Refused(format!("{key} waits for no answer now (answered elsewhere, or over)")));
    }
    if !store.answer_push(&key)? {
        return Ok(Acted::Refused(format!("{key} was answered already")));
    }
    match crate::forge::send(store, run_id, shepherd) {
        Ok(_) => Ok(Acted::Done { key, action: "send".into() }),
        Err(crate::forge::ForgeError::Store(e)) => Err(e),
        Err(e) => Ok(Acted::Refused(e.to_string())),
    }
}

/// Why pushes cannot start, or a round of them stopped.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// config.toml is broken.
    #[error(transparent)]
    Config(#[from] crate::home::config::ConfigError),
    /// There is no `[push]` to follow.
    #[error("no [push] in config.toml: add `ntfy = \"https://ntfy.sh/<a random topic>\"` under [push]")]
    NoPush,
    /// The channel is not usable.
    #[error(transparent)]
    Push(#[from] super::PushError),
    /// The store failed.
    #[error(transparent)]
    Heal(#[from] crate::upkeep::heal::HealError),
    /// Something of this machine's: the secret, a thread, Corral's program.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
}

impl From<StoreError> for ListenError {
    fn from(e: StoreError) -> Self {
        ListenError::Heal(e.into())
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ListenError {
    move |source| ListenError::Io { what, source }
}

/// Starts following answers and sending pushes on two threads of their
/// own; `Err(NoPush)` if `[push]` is not set.
pub fn start(home: &Home) -> Result<[std::thread::JoinHandle<()>; 2], ListenError> {
    let config = Config::load(home)?;
    let push = config.push.ok_or(ListenError::NoPush)?;
    let channel = Channel::new(&push)?;
    let secret = token::secret(home).map_err(io("making the push secret"))?;
    let (h1, h2) = (home.clone(), home.clone());
    let (c1, c2) = (channel.clone(), channel);
    let s1 = secret.clone();
    let answers = std::thread::Builder::new()
        .name("corral-push-answers".into())
        .spawn(move || follow_answers(&h1, &c1, &s1))
        .map_err(io("starting a thread"))?;
    let pushes = std::thread::Builder::new()
        .name("corral-push-send".into())
        .spawn(move || send_pushes(&h2, &c2, &push, &secret))
        .map_err(io("starting a thread"))?;
    Ok([answers, pushes])
}

fn since_file(home: &Home) -> PathBuf {
    home.data_dir().join("push.since")
}

/// Follows the reply topic for ever, acting on each answer; reconnects
/// after a failure, waiting longer each time (at most a minute).
fn follow_answers(home: &Home, channel: &Channel, secret: &[u8]) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let since = std::fs::read_to_string(since_file(home)).map(|s| s.trim().to_string()).unwrap_or_default();
        let since = if since.is_empty() { "all".to_string() } else { since };
        let opened = Instant::now();
        let followed = (|| -> Result<(), ListenError> {
            let shepherd = ShepherdCommand::lightest().map_err(io("finding corral"))?;
            let mut store = crate::upkeep::heal::open_healed(home, &shepherd)?;
            channel
                .follow(&since, |id, text| {
                    // Only where a stranger can neither read the asks nor
                    // post an answer is an answer from the topic the user's.
                    let answer = match channel.answering() {
                        Ok(crate::push::Answering::On) => act(&mut store, &shepherd, secret, text),
                        Ok(crate::push::Answering::Off(why)) => Ok(Acted::Refused(why)),
                        Err(e) => Ok(Acted::Refused(format!("the server could not be asked who may answer: {e}"))),
                    };
                    match answer {
                        Ok(Acted::Done { key, action }) => tracing::info!("answer from the phone: {action} {key}"),
                        Ok(Acted::Test(_)) => {}
                        Ok(Acted::Refused(why)) => tracing::info!("an answer not acted on: {why}"),
                        Err(e) => tracing::warn!("acting on an answer: {e}"),
                    }
                    if let Err(e) = std::fs::write(since_file(home), id) {
                        tracing::warn!("cannot keep where the answers were read to: {e}");
                    }
                    true
                })
                .map_err(ListenError::from)
        })();
        if let Err(e) = followed {
            tracing::warn!("following the answers: {e}");
        }
        // A connection that lived a while was fine: start over quickly.
        backoff =
            if opened.elapsed() > MOST_BACKOFF { Duration::from_secs(1) } else { (backoff * 2).min(MOST_BACKOFF) };
        std::thread::sleep(backoff);
    }
}

/// Keeps what needs the user in the store's outbox and sends it, at once
/// after each change to the store; what the server did not take, again
/// every little while.
fn send_pushes(home: &Home, channel: &Channel, config: &PushConfig, secret: &[u8]) {
    // Endings from now on: turning pushes on does not send the history.
    let since = crate::text::time::format(crate::text::time::now());
    loop {
        let worked = (|| -> Result<(), ListenError> {
            let shepherd = ShepherdCommand::lightest().map_err(io("finding corral"))?;
            let mut store = crate::upkeep::heal::open_healed(home, &shepherd)?;
            let mut watcher = Watcher::new(&store)?;
            loop {
                // A followed process that ended is healed for, once: the
                // watcher would otherwise say "changed" at once, for ever.
                watcher.heal_if_due(&mut store, &shepherd)?;
                outbox::gather(&mut store, config, secret, &since)?;
                outbox::send(&mut store, channel)?;
                watcher.changed_before(&store, next_try(&store)?)?;
            }
        })();
        if let Err(e) = worked {
            tracing::warn!("sending pushes: {e}");
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// When the sender next has a push to try again: a claim of another
/// sender is looked at every [`CLAIM_LOOK`] (taken once that sender is
/// gone), one given back when it is due, [`CLAIM_CHECK`] at most.
fn next_try(store: &Store) -> Result<Option<Instant>, ListenError> {
    let Some(at) = store.next_push_try()?.and_then(|at| crate::text::time::parse(&at)) else {
        return Ok(store.push_trouble()?.map(|_| Instant::now() + CLAIM_CHECK));
    };
    let wait = (at - crate::text::time::now()).to_std().unwrap_or_default();
    Ok(Some(Instant::now() + wait.clamp(CLAIM_LOOK, CLAIM_CHECK)))
}

/// `corral push listen`'s work: both halves, and the runs' pull requests
/// followed (the tray follows them itself), for ever.
pub fn run_for_ever(home: &Home) -> Result<(), ListenError> {
    let threads = start(home)?;
    // On a machine without the tray, what the forge asks of a run is
    // pushed only if this asks the forge.
    let following = crate::forge::start_following(home.clone()).map_err(io("starting a thread"))?;
    for thread in threads.into_iter().chain([following]) {
        let _ = thread.join();
    }
    Ok(())
}
