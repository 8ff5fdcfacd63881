//! A local server that speaks the part of ntfy's protocol Corral uses (a
//! test fixture; no ntfy server is packaged here): publish as JSON (`POST
//! /` with the topic in the body) or as a plain body (`POST /TOPIC`, which
//! is what a phone's `http` action does), follow a topic (`GET
//! /TOPIC/json?since=all|ID|UNIX_TIME`, one JSON object per line, kept
//! open), and `/v1/health`. It can be taken down and brought back up, and
//! started protected: every topic refused (403) to a request without its
//! token, as a server with `auth-default-access: deny-all` does.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// One message as the server keeps it.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub time: i64,
    pub topic: String,
    /// What was published (the JSON body, or `{"message": BODY}`).
    pub body: Value,
}

#[derive(Default)]
struct State {
    messages: Mutex<Vec<Message>>,
    arrived: Condvar,
    down: AtomicBool,
    /// Publishes are held, unanswered, while it is set (a slow server).
    slow: AtomicBool,
    next: AtomicU64,
    /// Connections made to it, whatever they asked.
    connections: AtomicU64,
    /// The token every topic asks for (`None`: open to anyone).
    token: Mutex<Option<String>>,
}

/// The running fixture; it stops with the test process.
pub struct Ntfy {
    port: u16,
    state: Arc<State>,
}

impl Ntfy {
    /// A server whose topics anyone may read and write (ntfy.sh's).
    pub fn start() -> Ntfy {
        Ntfy::serve(None)
    }

    /// A server whose topics only `token`'s holder may read and write.
    #[allow(dead_code)]
    pub fn start_protected(token: &str) -> Ntfy {
        Ntfy::serve(Some(token.to_string()))
    }

    fn serve(token: Option<String>) -> Ntfy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the ntfy fixture");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State { token: Mutex::new(token), ..State::default() });
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Ntfy { port, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every message published to `topic`, oldest first.
    pub fn messages(&self, topic: &str) -> Vec<Message> {
        self.state.messages.lock().unwrap().iter().filter(|m| m.topic == topic).cloned().collect()
    }

    /// What a phone does when its button is pressed: the action's body
    /// POSTed to the action's address (a topic of this server).
    pub fn press(&self, action: &Value) {
        let url = action["url"].as_str().expect("an http action");
        let topic = url.rsplit('/').next().unwrap();
        if let Some(token) = self.state.token.lock().unwrap().clone() {
            let sent = action["headers"]["Authorization"].as_str();
            assert_eq!(sent, Some(format!("Bearer {token}").as_str()), "the server refuses this press: {action:#}");
        }
        self.publish(topic, json!({"message": action["body"]}));
    }

    /// What a stranger's POST of `body` to `topic` gets: its HTTP status.
    #[allow(dead_code)]
    pub fn post_as_stranger(&self, topic: &str, body: &str) -> u16 {
        use std::io::Read;
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let request = format!(
            "POST /{topic} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// Publishes `body` to `topic` as the server would take it.
    pub fn publish(&self, topic: &str, body: Value) -> Message {
        let n = self.state.next.fetch_add(1, Ordering::SeqCst) + 1;
        let time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let message = Message { id: format!("m{n:06}"), time, topic: topic.to_string(), body };
        self.state.messages.lock().unwrap().push(message.clone());
        self.state.arrived.notify_all();
        message
    }

    /// How many connections were made to it.
    #[allow(dead_code)]
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Opens every topic to anyone from now on (an administrator who
    /// loosened the server's access rules).
    #[allow(dead_code)]
    pub fn open_to_all(&self) {
        *self.state.token.lock().unwrap() = None;
    }

    /// Holds every publish unanswered (and unkept) while `slow` is set, as
    /// a server that takes its time.
    #[allow(dead_code)]
    pub fn set_slow(&self, slow: bool) {
        self.state.slow.store(slow, Ordering::SeqCst);
    }

    /// Takes the server down (connections refused, followers cut) or
    /// brings it back.
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
        self.state.arrived.notify_all();
    }
}

fn serve(mut stream: TcpStream, state: &Arc<State>) {
    state.connections.fetch_add(1, Ordering::SeqCst);
    if state.down.load(Ordering::SeqCst) {
        return; // closed at once, as a server that is down
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Some((method, path, authorization, body)) = super::http::read_request_authorized(&mut stream) else {
        return;
    };
    let fixture = Ntfy { port: 0, state: Arc::clone(state) };
    let route = path.split('?').next().unwrap_or("");
    let token = state.token.lock().unwrap().clone();
    let known = token.is_none_or(|t| authorization.as_deref() == Some(format!("Bearer {t}").as_str()));
    if !known && route != "/v1/health" {
        return respond_status(&mut stream, "403 Forbidden");
    }
    if method == "POST" && state.slow.load(Ordering::SeqCst) {
        while state.slow.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        return; // the sender gave up or went: nothing kept
    }
    match (method.as_str(), route) {
        ("GET", "/v1/health") => respond(&mut stream, &json!({"healthy": true})),
        ("POST", "/") => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let Some(topic) = body["topic"].as_str().map(str::to_string) else {
                return respond_status(&mut stream, "400 Bad Request");
            };
            let m = fixture.publish(&topic, body);
            respond(&mut stream, &json!({"id": m.id, "time": m.time, "event": "message", "topic": m.topic}));
        }
        ("POST", topic) => {
            let text = String::from_utf8_lossy(&body).into_owned();
            let m = fixture.publish(topic.trim_start_matches('/'), json!({"message": text}));
            respond(&mut stream, &json!({"id": m.id, "time": m.time, "event": "message", "topic": m.topic}));
        }
        ("GET", route) if route.ends_with("/json") => {
            let topic = route.trim_start_matches('/').trim_end_matches("/json").to_string();
            let since = path.split("since=").nth(1).map(|s| s.split('&').next().unwrap_or("")).unwrap_or("all");
            follow(&mut stream, state, &topic, since);
        }
        _ => respond_status(&mut stream, "404 Not Found"),
    }
}

/// Streams `topic`'s messages after `since`, then each new one, until the
/// client goes or the server is taken down.
fn follow(stream: &mut TcpStream, state: &State, topic: &str, since: &str) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\nconnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut sent = {
        let all = state.messages.lock().unwrap();
        match since {
            "all" => 0,
            id if id.starts_with('m') => all.iter().position(|m| m.id == id).map_or(0, |at| at + 1),
            time => {
                let time: i64 = time.parse().unwrap_or(0);
                all.iter().position(|m| m.time >= time).unwrap_or(all.len())
            }
        }
    };
    let open = json!({"id": "open", "event": "open", "topic": topic});
    if stream.write_all(format!("{open}\n").as_bytes()).is_err() {
        return;
    }
    loop {
        let batch: Vec<Message> = {
            let mut all = state.messages.lock().unwrap();
            while all.len() <= sent && !state.down.load(Ordering::SeqCst) {
                let (guard, timeout) = state.arrived.wait_timeout(all, Duration::from_secs(1)).unwrap();
                all = guard;
                if timeout.timed_out() {
                    break;
                }
            }
            if state.down.load(Ordering::SeqCst) {
                return;
            }
            let batch = all[sent..].to_vec();
            sent = all.len();
            batch
        };
        let mut lines = String::new();
        for m in batch.iter().filter(|m| m.topic == topic) {
            let event = json!({"id": m.id, "time": m.time, "event": "message", "topic": m.topic,
                "message": m.body["message"]});
            lines.push_str(&format!("{event}\n"));
        }
        if lines.is_empty() {
            lines = format!("{}\n", json!({"event": "keepalive", "topic": topic}));
        }
        if stream.write_all(lines.as_bytes()).and_then(|_| stream.flush()).is_err() {
            return;
        }
    }
}

fn respond(stream: &mut TcpStream, body: &Value) {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
}

fn respond_status(stream: &mut TcpStream, status: &str) {
    let _ = stream.write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes());
}
