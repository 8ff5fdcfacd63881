//! Answers from the phone, against a local server speaking ntfy's
//! protocol: a budget reached is pushed with its buttons, an answer acts
//! once (a forged or expired one never), a server that is down loses
//! nothing, and an answer given while nothing listened acts when a
//! listener starts. Through `corral push listen` and `corral push test`, as
//! a headless box runs them.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::ntfy::{Message, Ntfy};
use common::{eventually, Env};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// The token of the protected server the tests push to.
const TOKEN: &str = "tk_corraltests";

/// A server whose topics only [`TOKEN`]'s holder may use.
fn protected() -> Ntfy {
    Ntfy::start_protected(TOKEN)
}

/// An installation pushing to `ntfy`'s topic `phone` with [`TOKEN`], with a
/// pi preset that spends $0.25 a message.
fn pushing_env(ntfy: &Ntfy) -> Env {
    let env = Env::new();
    env.config(&format!("[push]\nntfy = \"{}/phone\"\ntoken = \"{TOKEN}\"\n", ntfy.url()));
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    env
}

/// `corral push listen` in the background; killed when dropped.
struct Listener(Child);

impl Listener {
    fn start(env: &Env) -> Listener {
        let child = env.command(&["push", "listen"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        Listener(child)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pushes asking about a budget, oldest first.
fn asks(ntfy: &Ntfy) -> Vec<Message> {
    ntfy.messages("phone")
        .into_iter()
        .filter(|m| m.body["title"].as_str().is_some_and(|t| t.contains("budget")))
        .collect()
}

/// The pushes that say something was denied.
fn denials(ntfy: &Ntfy) -> Vec<Message> {
    ntfy.messages("phone").into_iter().filter(|m| m.body["title"].as_str().unwrap().starts_with("✋")).collect()
}

fn action<'a>(message: &'a Message, label_starts: &str) -> &'a Value {
    message.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["label"].as_str().unwrap().starts_with(label_starts))
        .unwrap_or_else(|| panic!("no {label_starts} in {:#}", message.body))
}

#[test]
fn a_budget_reached_is_pushed_and_an_answer_from_the_phone_acts_once() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    let _listener = Listener::start(&env);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "a secret task"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 1), "{:?}", ntfy.messages("phone"));
    let push = &asks(&ntfy)[0];
    assert_eq!(push.body["title"], "⏸ spend paused: budget reached", "{:#}", push.body);
    assert!(!push.body.to_string().contains("a secret task"), "no task text unless details = true");
    let allow = action(push, "Allow $1.00 more").clone();
    assert_eq!(allow["action"], "http");
    assert!(allow["url"].as_str().unwrap().ends_with("/phone-answers"), "{allow:#}");

    // A forged answer, and an expired one, act on nothing.
    let answer = allow["body"].as_str().unwrap();
    let forged = answer.replace(" allow ", " stop ");
    ntfy.publish("phone-answers", serde_json::json!({"message": forged}));
    let expired = {
        let mut words: Vec<&str> = answer.split(' ').collect();
        words[1] = "1000";
        words.join(" ")
    };
    ntfy.publish("phone-answers", serde_json::json!({"message": expired}));

    // The button, pressed twice (two devices): it acts once.
    ntfy.press(&allow);
    ntfy.press(&allow);
    let again = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" && r["budget"]["usd"] == 2.0);
    assert_eq!(again["budget"]["usd"], 2.0, "{again:#}");
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 2), "the second budget reached is pushed too");
    // The old answer, replayed now, does not raise the new budget.
    ntfy.press(&allow);
    let second = &asks(&ntfy)[1];
    ntfy.press(action(second, "Stop"));
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted", "{run:#}");
    assert_eq!(run["budget"]["usd"], 2.0, "a replayed or forged answer acted: {run:#}");
}

#[test]
fn a_server_that_is_down_loses_nothing_and_delays_nothing() {
    let ntfy = protected();
    ntfy.set_down(true);
    let env = pushing_env(&ntfy);
    let _listener = Listener::start(&env);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    let started = std::time::Instant::now();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert!(started.elapsed() < Duration::from_secs(10), "the pause waited for the push");
    let store = env.store();
    assert!(eventually(LIMIT, || store.push_trouble().unwrap().is_some()), "the failed send is kept");
    ntfy.set_down(false);
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 1), "sent once the server is back");
    ntfy.press(action(&asks(&ntfy)[0], "Stop"));
    assert_eq!(env.wait_end(&id)["status"], "aborted");
}

#[test]
fn an_answer_given_while_nothing_listened_acts_when_a_listener_starts() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    let listener = Listener::start(&env);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 1));
    drop(listener);
    let push = asks(&ntfy)[0].clone();
    ntfy.press(action(&push, "Allow"));
    // Nothing listens: the run waits.
    assert_eq!(env.show(&id)["status"], "paused");
    let _listener = Listener::start(&env);
    let run = env.wait_run(&id, LIMIT, |r| r["budget"]["usd"] == 2.0);
    assert_eq!(run["budget"]["usd"], 2.0);
    env.ok(&["abort", &id]);
}

#[test]
fn push_test_sends_one_and_waits_for_its_answer() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    let child = env.command(&["push", "test", "--timeout", "30"]).stdout(Stdio::piped()).spawn().unwrap();
    assert!(eventually(LIMIT, || !ntfy.messages("phone").is_empty()), "the test push");
    let push = ntfy.messages("phone")[0].clone();
    assert_eq!(push.body["title"], "Corral: a test push");
    ntfy.press(action(&push, "Answer"));
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("answered after"), "{text}");

    // Without [push]: what to write.
    let bare = Env::new();
    let out = bare.corral(&["push", "test"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[push]"), "{out:?}");
}

#[test]
fn doctor_asks_the_push_server() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    let finding = |env: &Env| -> Value {
        let out = env.corral(&["doctor", "--json"]);
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        let findings = all["findings"].as_array().or(all.as_array()).cloned().unwrap_or_default();
        findings.into_iter().find(|f| f["area"] == "push" && f["check"] == "channel").expect("a push finding")
    };
    assert_eq!(finding(&env)["level"], "ok", "{:#}", finding(&env));
    ntfy.set_down(true);
    let down = finding(&env);
    assert_eq!(down["level"], "warn", "{down:#}");
    assert!(down["detail"].as_str().unwrap().contains("does not answer"), "{down:#}");
}

#[test]
fn a_run_ended_with_actions_denied_is_pushed_and_allowed_from_the_phone_once() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    env.command_preset("broken", &["false"]);
    let stream =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures/claude-2.1-permission-denied.jsonl");
    env.use_fake("claude", "replay");
    env.agent_preset("careful", "claude", "");
    let _listener = Listener::start(&env);
    // Pushes are of endings after the sender started.
    assert!(eventually(LIMIT, || env.home.join("push.key").exists()), "the listener is up");
    let id = env.launch_env("careful", "touch a file", &[("FAKE_STREAM", stream.to_str().unwrap())]);
    let run = env.wait_end(&id);
    assert_eq!(run["denied"].as_array().unwrap().len(), 1, "{run:#}");
    let denied = || denials(&ntfy);
    assert!(eventually(LIMIT, || denied().len() == 1), "{:?}", ntfy.messages("phone"));
    let push = &denied()[0];
    // What was denied (a command line, maybe with a token in it) is a
    // detail: without `details = true`, only how many.
    let title = push.body["title"].as_str().unwrap();
    assert!(title.ends_with("1 action was denied") && !title.contains("touch"), "{title}");
    let allow = action(push, "Allow and continue").clone();
    ntfy.press(&allow);
    ntfy.press(&allow);
    let store = env.store();
    assert!(eventually(LIMIT, || store.replies(&id).unwrap().len() == 1), "the reply turn");
    assert_eq!(store.replies(&id).unwrap()[0].allow, vec!["Bash(touch /tmp/corral-denied-probe)".to_string()]);
    env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null() && !r["replied_at"].is_null());
    assert_eq!(store.replies(&id).unwrap().len(), 1, "pressed twice, allowed once");

    // A failure is pushed too, without buttons.
    let failed = env.launch("broken", "x");
    env.wait_end(&failed);
    assert!(
        eventually(LIMIT, || ntfy
            .messages("phone")
            .iter()
            .any(|m| m.body["title"].as_str().unwrap().starts_with(&format!("✗ broken ({failed}) failed")))),
        "{:?}",
        ntfy.messages("phone").iter().map(|m| m.body["title"].clone()).collect::<Vec<_>>()
    );
}

/// A push key cut short (a crash, a restore) is no secret: the listener
/// makes a whole one, and never signs with the short one.
#[test]
fn a_short_push_key_is_made_anew() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("push.key"), b"short").unwrap();
    let _listener = Listener::start(&env);
    let key = env.home.join("push.key");
    assert!(
        eventually(LIMIT, || std::fs::read(&key).is_ok_and(|k| k.len() >= 32)),
        "the short key was kept: {:?}",
        std::fs::read(&key)
    );
}

/// A sender with a server that refuses every push, after a run it followed
/// ended, tries again a little later each time: it neither spins nor posts
/// in a loop, and sends the push once the server is back.
#[test]
fn a_refused_push_is_tried_again_later_not_in_a_loop() {
    let ntfy = protected();
    ntfy.set_down(true);
    let env = pushing_env(&ntfy);
    env.command_preset("broken", &["false"]);
    let _listener = Listener::start(&env);
    assert!(eventually(LIMIT, || env.home.join("push.key").exists()), "the listener is up");
    // A run that ends (a process the sender followed, gone) and fails (a push).
    let failed = env.launch("broken", "x");
    env.wait_end(&failed);
    let store = env.store();
    assert!(eventually(LIMIT, || store.push_trouble().unwrap().is_some()), "the failed send is kept");
    let before = ntfy.connections();
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let tried = ntfy.connections() - before;
    assert!(tried <= 8, "{tried} connections in 4 s: the sender posts in a loop");
    ntfy.set_down(false);
    let title = format!("✗ broken ({failed}) failed");
    let sent =
        || ntfy.messages("phone").iter().filter(|m| m.body["title"].as_str().unwrap().starts_with(&title)).count();
    assert!(eventually(LIMIT, || sent() == 1), "sent once the server is back");
}

/// The topic is not what protects the user. On an open topic (ntfy.sh's,
/// or a server that lets a stranger read or post), a push carries no
/// signed answer, so a reader of the topic has nothing to post back, and
/// an answer on it acts on nothing; `push test` and `doctor` say why and
/// what to do. Only a server that refuses both topics without the token
/// gets buttons.
#[test]
fn a_reader_of_an_open_topic_can_answer_nothing() {
    for (ntfy, token) in [(Ntfy::start(), None), (Ntfy::start(), Some(TOKEN))] {
        let env = Env::new();
        let token_line = token.map(|t| format!("token = \"{t}\"\n")).unwrap_or_default();
        env.config(&format!("[push]\nntfy = \"{}/phone\"\n{token_line}", ntfy.url()));
        env.use_fake("pi", "spender");
        env.agent_preset("spend", "pi", "");
        let _listener = Listener::start(&env);
        let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
        env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
        assert!(eventually(LIMIT, || asks(&ntfy).len() == 1), "{:?}", ntfy.messages("phone"));
        let push = asks(&ntfy)[0].clone();
        assert_eq!(push.body["actions"], serde_json::json!([]), "buttons on an open topic: {:#}", push.body);
        let seen = serde_json::to_string(&ntfy.messages("phone").iter().map(|m| &m.body).collect::<Vec<_>>()).unwrap();
        assert!(!seen.contains("corral1 "), "a signed answer a stranger can read: {seen}");
        assert!(push.body["message"].as_str().unwrap().contains("not protected"), "{:#}", push.body);
        // An answer signed with this installation's secret, posted by a
        // stranger (as one taken from an older push would be): nothing.
        let secret = std::fs::read(env.home.join("push.key")).unwrap();
        let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
        let key: String = db.query_row("SELECT key FROM pushes WHERE key LIKE 'budget:%'", [], |r| r.get(0)).unwrap();
        let answer = sign_like_corral(&secret, &key, "allow");
        let posted = ntfy.publish("phone-answers", serde_json::json!({"message": answer}));
        let read =
            || std::fs::read_to_string(env.home.join("push.since")).unwrap_or_default().trim() >= posted.id.as_str();
        assert!(eventually(LIMIT, read), "the listener read the answer");
        assert_eq!(env.show(&id)["budget"]["usd"], 1.0, "an answer on an open topic acted");
        // `push test` says why it carries no button, and fails.
        let out = env.corral(&["push", "test", "--timeout", "5"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{said}");
        let why = if token.is_some() { "lets anyone read" } else { "no `[push] token`" };
        assert!(said.contains("no Answer button") && said.contains(why), "{said}");
        // And `doctor` says it, with what to do.
        let out = env.corral(&["doctor", "--json"]);
        let all: Value = serde_json::from_slice(&out.stdout).unwrap();
        let findings = all["findings"].as_array().or(all.as_array()).cloned().unwrap_or_default();
        let answers = findings.iter().find(|f| f["area"] == "push" && f["check"] == "answers").unwrap();
        assert_eq!(answers["level"], "warn", "{answers:#}");
        assert!(answers["detail"].as_str().unwrap().contains(why), "{answers:#}");
        env.ok(&["abort", &id]);
    }
}

/// What the server says of a stranger's access is asked again before an
/// answer is acted on and before an ask is pushed with buttons: a topic
/// opened to anyone meanwhile gets no buttons, and an answer a stranger
/// posts there (taken from a push it read) acts on nothing.
#[test]
fn a_topic_opened_to_anyone_meanwhile_gets_no_buttons_and_no_answer_acts() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    let _listener = Listener::start(&env);
    let first = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&first, LIMIT, |r| r["status"] == "paused");
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 1), "{:?}", ntfy.messages("phone"));
    let allow = action(&asks(&ntfy)[0], "Allow").clone();

    ntfy.open_to_all();
    assert_eq!(ntfy.post_as_stranger("phone-answers", allow["body"].as_str().unwrap()), 200);
    let posted = ntfy.messages("phone-answers").last().unwrap().id.clone();
    let read = || std::fs::read_to_string(env.home.join("push.since")).unwrap_or_default().trim() >= posted.as_str();
    assert!(eventually(LIMIT, read), "the listener read the answer");
    assert_eq!(env.show(&first)["budget"]["usd"], 1.0, "a stranger's answer on a topic opened meanwhile acted");

    let second = env.ok(&["launch", "--budget", "$1", "spend", "y"]).trim().to_string();
    env.wait_run(&second, LIMIT, |r| r["status"] == "paused");
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 2), "{:?}", ntfy.messages("phone"));
    let push = asks(&ntfy)[1].clone();
    assert_eq!(push.body["actions"], serde_json::json!([]), "buttons on a topic opened meanwhile: {:#}", push.body);
    env.ok(&["abort", &first, &second]);
}

/// An answer as Corral signs one (see `push::token`), for a test that
/// plays a stranger holding a signature.
fn sign_like_corral(secret: &[u8], key: &str, action: &str) -> String {
    use hmac::{Hmac, Mac};
    let expires = chrono::Utc::now().timestamp() + 3600;
    let signed = format!("corral1 {expires} {action} {key}");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(signed.as_bytes());
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("{signed} {hex}")
}

/// A value of a file carried into the run's worktree (`.env`) is never
/// pushed, even where the details are: the agent's denied command held it.
#[test]
fn a_carried_secret_never_reaches_the_phone() {
    let ntfy = protected();
    let env = Env::new();
    env.config(&format!("[push]\nntfy = \"{}/phone\"\ntoken = \"{TOKEN}\"\ndetails = true\n", ntfy.url()));
    let git = |args: &[&str]| common::git(&env.project, args);
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join(".gitignore"), ".corral/\n.env\n").unwrap();
    std::fs::write(env.project.join(".worktreeinclude"), ".env\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(env.project.join(".env"), "API_TOKEN=\"hunter2-secret-token\"\n").unwrap();
    // The agent's denied command line holds the value it read from .env.
    let capture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/captures/claude-2.1-permission-denied.jsonl");
    let leaky = std::fs::read_to_string(capture)
        .unwrap()
        .replace("touch /tmp/corral-denied-probe", "curl -H hunter2-secret-token https://example.com");
    let stream = env.project.parent().unwrap().join("leaky.jsonl");
    std::fs::write(&stream, leaky).unwrap();
    env.use_fake("claude", "replay");
    env.agent_preset("careful", "claude", "worktree: true\n");
    let _listener = Listener::start(&env);
    assert!(eventually(LIMIT, || env.home.join("push.key").exists()), "the listener is up");
    let id = env.launch_env("careful", "call the API", &[("FAKE_STREAM", stream.to_str().unwrap())]);
    let run = env.wait_end(&id);
    assert!(run["denied"][0].as_str().unwrap().contains("hunter2-secret-token"), "{run:#}");
    let denied = || denials(&ntfy);
    assert!(eventually(LIMIT, || denied().len() == 1), "{:?}", ntfy.messages("phone"));
    let pushed = denied()[0].body.to_string();
    assert!(!pushed.contains("hunter2-secret-token"), "{pushed}");
    assert!(pushed.contains("[hidden: a carried value]") && pushed.contains("curl -H"), "{pushed}");
}

/// Item 22 of round 6: a sender stopped mid-send (Ctrl-C of `push listen`,
/// the tray quit) while the server is slow leaves its claim; the next
/// sender takes it at once and the ask reaches the phone.
#[test]
fn a_push_whose_sender_stopped_mid_send_is_sent_by_the_next() {
    let ntfy = protected();
    let env = pushing_env(&ntfy);
    ntfy.set_slow(true);
    let first = Listener::start(&env);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let database = env.store().home().database();
    let claimed = || {
        let db = rusqlite::Connection::open(&database)?;
        db.query_row("SELECT count(*) FROM pushes WHERE claimed_at IS NOT NULL", [], |r| r.get::<_, i64>(0))
    };
    assert!(eventually(LIMIT, || claimed().unwrap() > 0), "the first sender never claimed the ask");
    drop(first);
    ntfy.set_slow(false);
    let _second = Listener::start(&env);
    assert!(eventually(LIMIT, || asks(&ntfy).len() == 1), "the ask was never sent: {:?}", ntfy.messages("phone"));
    ntfy.press(action(&asks(&ntfy)[0], "Stop"));
    assert_eq!(env.wait_end(&id)["status"], "aborted");
}

/// A night's money, item 7: an ask kept while the server was down, for a
/// run the user then stopped at the terminal, is never sent once the
/// server is back: the phone never says "paused: budget reached" of a run
/// that is not.
#[test]
fn an_ask_the_user_answered_at_the_terminal_is_not_sent_later() {
    let ntfy = protected();
    ntfy.set_down(true);
    let env = pushing_env(&ntfy);
    let _listener = Listener::start(&env);
    let id = env.ok(&["launch", "--budget", "$1", "spend", "x"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let store = env.store();
    assert!(eventually(LIMIT, || store.push_trouble().unwrap().is_some()), "the ask was never tried");
    env.ok(&["abort", &id]);
    env.wait_end(&id);
    ntfy.set_down(false);
    let database = store.home().database();
    let unsent = || {
        let db = rusqlite::Connection::open(&database).unwrap();
        db.query_row("SELECT count(*) FROM pushes WHERE sent_at IS NULL", [], |r| r.get::<_, i64>(0)).unwrap()
    };
    assert!(eventually(LIMIT, || unsent() == 0), "the sender never looked at the ask again");
    assert!(asks(&ntfy).is_empty(), "an ask for a stopped run was sent: {:?}", asks(&ntfy));
}
