//! Following a host: its `corral watch --json --since N` read over SSH and
//! applied to this store's mirror, each change with the host's position in
//! one transaction, so nothing is missed or applied twice across
//! reconnects. One follower per host and store (a lock file): the tray
//! holds it while it runs; a command that needs the host current (`ls`)
//! catches up itself when nobody follows.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{about, RemoteError, Ssh, SshError};
use crate::home::config::HostConfig;
use crate::home::{self, Home};
use crate::run::Run;
use crate::store::{Change, HostHistory, Store};

/// The longest pause between two tries to reach a host.
const RETRY_AT_MOST: Duration = Duration::from_secs(10);

/// One line of `corral watch --json`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum WatchLine {
    Run { seq: i64, run: Box<Run> },
    Removed { seq: i64, removed: String },
    CaughtUp { caught_up: i64 },
}

/// The right to follow one host for one store, held while it is followed.
#[derive(Debug)]
pub struct FollowLock {
    _lock: crate::process::FileLock,
}

impl FollowLock {
    /// Takes the lock of `host`, if no one holds it.
    pub fn try_take(home: &Home, host: &str) -> Option<FollowLock> {
        let dir = home.data_dir().join("hosts");
        home::ensure_private_dir(&dir).ok()?;
        let file = home::open_private_append(&dir.join(format!("{host}.lock"))).ok()?;
        crate::process::FileLock::try_exclusive(file).map(|lock| FollowLock { _lock: lock })
    }
}

/// A follower at work, to stop from another thread.
#[derive(Debug, Clone, Default)]
pub struct Following {
    stop: Arc<AtomicBool>,
    child: Arc<Mutex<Option<crate::process::ProcessId>>>,
}

impl Following {
    /// Ends the follower: its connection is closed now.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(child) = *self.child.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = child.signal(crate::process::Sig::Term);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Follows `host` into the store of `home` until `following` is stopped:
/// connects, checks the remote Corral, streams its changes, and when the
/// connection ends records the host unreachable (since when, and why) and
/// tries again after 1 s, doubling to 10 s. Holds `lock` throughout.
pub fn follow(home: &Home, host: &HostConfig, following: &Following, lock: FollowLock) {
    let ssh = Ssh::new(home, host);
    let mut pause = Duration::from_secs(1);
    while !following.stopped() {
        let started = Instant::now();
        let ended = match Store::open(home) {
            Ok(mut store) => session(&mut store, &ssh, following, None),
            Err(e) => Err(e.into()),
        };
        if following.stopped() {
            break;
        }
        if let Err(e) = &ended {
            tracing::info!(host = %host.name, "not following: {e}");
            if let (Some(trouble), Ok(mut store)) = (e.trouble(), Store::open(home)) {
                let _ = store.record_host_trouble(&host.name, trouble, &e.to_string());
            }
        }
        // A connection that lasted is a new outage: try again soon.
        if started.elapsed() > RETRY_AT_MOST {
            pause = Duration::from_secs(1);
        }
        let until = Instant::now() + pause;
        while !following.stopped() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100).min(until.saturating_duration_since(Instant::now())));
        }
        pause = (pause * 2).min(RETRY_AT_MOST);
    }
    drop(lock);
}

/// Brings the mirror of `host` up to date once and returns, unless someone
/// follows it already (then they keep it current). An unreachable host is
/// recorded so, and is not an error: its runs say so.
pub fn catch_up(home: &Home, store: &mut Store, host: &HostConfig, within: Duration) -> Result<(), RemoteError> {
    let Some(_lock) = FollowLock::try_take(home, &host.name) else { return Ok(()) };
    let seconds = within.as_secs().clamp(1, 10) as u32;
    let ssh = Ssh::new(home, host).connecting_within(seconds);
    let following = Following::default();
    let deadline = Instant::now() + within;
    match session(store, &ssh, &following, Some(deadline)) {
        Ok(()) => Ok(()),
        Err(e) => match e.trouble() {
            Some(trouble) => {
                store.record_host_trouble(&host.name, trouble, &e.to_string())?;
                Ok(())
            }
            None => Err(e),
        },
    }
}

/// One connection: the remote checked, then its changes applied until the
/// stream ends (or, with `until`, until caught up or past it).
fn session(store: &mut Store, ssh: &Ssh, following: &Following, until: Option<Instant>) -> Result<(), RemoteError> {
    let host = ssh.host().name.clone();
    let remote = about(ssh)?;
    store.record_host_answers(&host, Some(&remote.version))?;
    let configured: Vec<String> = crate::home::config::Config::load(store.home())
        .map(|c| c.hosts.iter().map(|h| h.name.clone()).collect())
        .unwrap_or_default();
    let position = match store.host_store_seen(&host, &remote.store, remote.seq, &configured)? {
        HostHistory::Same { seq } => seq,
        HostHistory::Renamed { from, seq } => {
            tracing::info!(host = %host, "the runs of '{from}' are this host's: the same store");
            seq
        }
        HostHistory::Replaced { lost } => {
            tracing::warn!(host = %host, "its store was replaced: reading it anew ({lost} active runs gone from it)");
            0
        }
    };
    let first = position == 0;
    let mut args = vec!["watch".into(), "--json".into(), "--since".into(), position.to_string().into()];
    if until.is_some() {
        args.push("--until-caught-up".into());
    }
    let mut child = ssh.spawn_corral(&args, None, Stdio::piped(), Stdio::piped())?;
    *following.child.lock().unwrap_or_else(|e| e.into_inner()) = crate::process::ProcessId::of(child.id() as i32);
    let result = read_stream(store, &host, &mut child, position, first, until);
    *following.child.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let _ = child.kill();
    let status = child.wait().ok();
    let mut stderr = Vec::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_end(&mut stderr);
    }
    result?;
    if following.stopped() || until.is_some() {
        return Ok(());
    }
    // The stream ended by itself: the connection (or the remote) is gone.
    Err(match ssh.failure(status.and_then(|s| s.code()), &stderr) {
        Some(e) => e.into(),
        None => SshError::Unreachable {
            host: host.clone(),
            dest: ssh.host().ssh.clone(),
            detail: "the connection ended".to_string(),
        }
        .into(),
    })
}

/// Applies each line of the stream as it comes.
/// The longest line of a host's stream of changes: a run as JSON, its
/// final text and all, is far smaller.
const LONGEST_LINE: usize = 16 << 20;

fn read_stream(
    store: &mut Store,
    host: &str,
    child: &mut Child,
    mut position: i64,
    first: bool,
    until: Option<Instant>,
) -> Result<(), RemoteError> {
    let Some(stdout) = child.stdout.take() else { return Ok(()) };
    let mut stdout = BufReader::new(stdout);
    if !super::ssh::skip_banner(&mut stdout).unwrap_or(false) {
        return Ok(()); // ended before Corral began there: said by its exit
    }
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        // One line at most [`LONGEST_LINE`]: a host that sends one without
        // end is garbled, never followed into memory.
        let read = (&mut stdout).take(LONGEST_LINE as u64 + 1).read_until(b'\n', &mut buffer);
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buffer.len() > LONGEST_LINE && !buffer.ends_with(b"\n") {
            return Err(RemoteError::Garbled {
                host: host.to_string(),
                what: "corral watch --json",
                detail: format!("a line longer than {} MiB", LONGEST_LINE >> 20),
            });
        }
        let line = String::from_utf8_lossy(&buffer);
        if until.is_some_and(|at| Instant::now() > at) {
            break;
        }
        let parsed: WatchLine = serde_json::from_str(&line).map_err(|e| RemoteError::Garbled {
            host: host.to_string(),
            what: "corral watch --json",
            detail: e.to_string(),
        })?;
        match parsed {
            WatchLine::Run { seq, run } => {
                store.apply_remote_changes(host, &[Change::Run { seq, run }], seq)?;
                position = seq;
            }
            WatchLine::Removed { seq, removed } => {
                store.apply_remote_changes(host, &[Change::Removed { seq, removed }], seq)?;
                position = seq;
            }
            WatchLine::CaughtUp { caught_up } => {
                store.apply_remote_changes(host, &[], position.max(caught_up))?;
                if first {
                    // What the host ran before it was followed is not news.
                    store.mark_remote_endings_known(host)?;
                }
                if until.is_some() {
                    break;
                }
            }
        }
    }
    Ok(())
}
