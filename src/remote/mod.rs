//! Runs on other machines (`[hosts.NAME]` of `config.toml`), over SSH.
//!
//! A remote host runs the same `corral`: its runs are detached shepherds
//! and a store on that machine, so they never depend on the connection.
//! This machine launches there (`launch`), acts there (`act`, `call`: the
//! same verb, run by the remote `corral`), and follows the host's change stream
//! (`follow`: `corral watch --json --since N` over one multiplexed
//! connection) into its own store's mirror, which `ls`, the tray and the
//! window read. Nothing of Corral's listens on a network.

mod fleet;
mod follow;
mod ssh;
pub mod words;

use std::ffi::OsString;

use serde::{Deserialize, Serialize};

pub use fleet::Fleet;
pub use follow::{catch_up, follow, FollowLock, Following};
pub use ssh::{after_banner, decode_payload, read_payload, skip_banner, Ssh, SshError, BEGIN};
pub use words::{is_plain_word, quote};

use crate::home::config::{ConfigError, HostConfig};
use crate::home::Home;
use crate::run::Run;
use crate::store::{HostTrouble, Store, StoreError};

/// What `corral about --json` says of a machine: enough to check a host
/// before following it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct About {
    /// `corral --version`'s number.
    pub version: String,
    /// The operating system (`linux`).
    pub os: String,
    /// The processor architecture (`x86_64`).
    pub arch: String,
    /// Runs not ended.
    pub running: u64,
    /// Runs in the store, not cleared.
    pub total: u64,
    /// The store's latest change number.
    pub seq: i64,
    /// The store's identity: another one is another history.
    #[serde(default)]
    pub store: String,
}

impl About {
    /// This machine, as its store says.
    pub fn here(store: &Store) -> Result<About, StoreError> {
        let counts = store.local_counts()?;
        Ok(About {
            version: env!("CARGO_PKG_VERSION").to_string(),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            running: counts.running,
            total: counts.total,
            seq: store.change_seq()?,
            store: store.identity()?,
        })
    }
}

/// What went wrong with a host.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The connection or the remote command failed.
    #[error(transparent)]
    Ssh(#[from] SshError),
    /// The host runs another version of Corral.
    #[error(
        "host '{host}' runs corral {theirs}, this is {ours}: install this version there (on a machine alike: \
         scp \"$(command -v corral)\" {dest}:.local/bin/corral, with corral = \"~/.local/bin/corral\" in \
         [hosts.{host}]; `corral hosts add … --install` does it when adding a host)"
    )]
    Version { host: String, dest: String, theirs: String, ours: String },
    /// The budget over the launching run is spent.
    #[error("{0}, so no run is launched under it: the user is asked (`corral resume RUN --budget +N` allows more)")]
    BudgetSpent(String),
    /// The remote `corral` refused (its own words, e.g. an unknown preset).
    #[error("on host '{host}': {message}")]
    Refused { host: String, message: String },
    /// The remote `corral` printed what this one cannot read.
    #[error("host '{host}' answered what this Corral cannot read ({what}): {detail}")]
    Garbled { host: String, what: &'static str, detail: String },
    /// The run's host is no longer in config.toml, and no host there has
    /// its store.
    #[error(
        "run {run} is on host '{host}', which config.toml no longer has (and no host there has its store): \
         add it back (corral hosts add {host} USER@NAME) to act on it"
    )]
    HostGone { host: String, run: String },
    /// This store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Asked from inside a sandboxed run: a run on another machine would
    /// not be in its sandbox.
    #[error("run {0} is sandboxed, and a run on another machine would not be: launch there from your own terminal")]
    Sandboxed(String),
}

impl RemoteError {
    /// What kind of trouble this is for the host's followers: `None` when
    /// it is this machine's own (its store).
    pub fn trouble(&self) -> Option<HostTrouble> {
        Some(match self {
            RemoteError::Ssh(SshError::HostKey { .. }) => HostTrouble::HostKey,
            RemoteError::Ssh(SshError::Refused { .. } | SshError::UnknownName { .. }) => HostTrouble::Refused,
            RemoteError::Ssh(SshError::NoCorral { .. }) => HostTrouble::NoCorral,
            RemoteError::Ssh(SshError::OtherCorral { .. }) | RemoteError::Version { .. } => HostTrouble::OtherVersion,
            RemoteError::Ssh(_) | RemoteError::Refused { .. } | RemoteError::Garbled { .. } => HostTrouble::Unreachable,
            RemoteError::Store(_)
            | RemoteError::Config(_)
            | RemoteError::HostGone { .. }
            | RemoteError::Sandboxed(_)
            | RemoteError::BudgetSpent(_) => return None,
        })
    }
}

/// Asks `host` what it is, and checks it runs this version of Corral.
pub fn about(ssh: &Ssh) -> Result<About, RemoteError> {
    let host = ssh.host();
    let output = ssh.run(&["about".into(), "--json".into()], None)?;
    if !output.status.success() {
        return Err(refused(host, &output.stderr));
    }
    let about: About = serde_json::from_slice(&output.stdout).map_err(|e| RemoteError::Garbled {
        host: host.name.clone(),
        what: "corral about --json",
        detail: e.to_string(),
    })?;
    let ours = env!("CARGO_PKG_VERSION");
    if about.version != ours {
        return Err(RemoteError::Version {
            host: host.name.clone(),
            dest: host.ssh.clone(),
            theirs: about.version,
            ours: ours.to_string(),
        });
    }
    Ok(about)
}

/// What a launch on a host needs besides the preset and task.
#[derive(Debug, Clone, Default)]
pub struct RemoteLaunch {
    /// The remote working folder (default: the remote user's home).
    pub cwd: Option<String>,
    /// Model override.
    pub model: Option<String>,
    /// A worktree of its own (`Some(true)`), or not (`Some(false)`).
    pub worktree: Option<bool>,
    /// The commit its worktree starts from.
    pub base: Option<String>,
    /// What it may spend (kept by the host's shepherd).
    pub budget: Option<crate::cost::budget::Budget>,
    /// The schedule's fire launching it, and its precheck line: recorded
    /// here in the same write as the run's mirror.
    pub fire: Option<(i64, Option<String>)>,
}

/// Launches `preset` with `task` on `host`, records the run in this
/// store's mirror (so it shows at once) and returns it. The task crosses
/// on standard input, byte for byte.
pub fn launch(
    home: &Home,
    store: &mut Store,
    host: &HostConfig,
    preset: &str,
    task: &str,
    options: &RemoteLaunch,
) -> Result<Run, RemoteError> {
    launch_for(home, store, host, (preset, task), options, None)
}

/// How long a launch on a host is asked again while the host cannot be
/// reached (a connection dropped, a network coming back).
const LAUNCH_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// As [`launch`], for the agent of local run `launched_by` (MCP), which
/// may then see and act on it.
pub fn launch_for(
    home: &Home,
    store: &mut Store,
    host: &HostConfig,
    (preset, task): (&str, &str),
    options: &RemoteLaunch,
    launched_by: Option<&str>,
) -> Result<Run, RemoteError> {
    if let Some(run) = crate::run::caller::sandboxed_caller(store, &crate::home::config::Config::load(home)?)? {
        return Err(RemoteError::Sandboxed(run));
    }
    let ssh = Ssh::new(home, host);
    let mut args: Vec<OsString> = vec!["launch".into(), preset.into(), "-".into(), "--json".into()];
    // An agent whose scope is its own tree launches there a run whose scope
    // is its own tree too, whatever the host's preset says: a child's
    // scope never exceeds its parent's across a host.
    let caller = match launched_by {
        Some(run) => Some(run.to_string()),
        None => crate::run::caller::caller_run(store)?,
    };
    if let Some(caller) = caller {
        if !crate::run::scope::grants_all(store, &caller)? {
            args.push("--mcp-own".into());
        }
    }
    if let Some(cwd) = &options.cwd {
        args.extend(["--cwd".into(), cwd.into()]);
    }
    if let Some(model) = &options.model {
        args.extend(["--model".into(), model.into()]);
    }
    match options.worktree {
        Some(true) => args.push("--worktree".into()),
        Some(false) => args.push("--no-worktree".into()),
        None => {}
    }
    if let Some(base) = &options.base {
        args.extend(["--base".into(), base.into()]);
    }
    // Launched by a run, it is held to what the budgets over that run have
    // left: its spend reaches them only as its host's store says it.
    let left = match launched_by {
        Some(by) => store.budget_left(by)?,
        None => None,
    };
    if let Some(crossing) = launched_by.map(|by| store.budget_crossed(by)).transpose()?.flatten() {
        return Err(RemoteError::BudgetSpent(crossing.words(launched_by.unwrap_or_default())));
    }
    let budget = match (options.budget.filter(|b| !b.is_unlimited()), left) {
        (Some(asked), Some(left)) => Some(asked.least(&left)),
        (asked, left) => asked.or(left),
    };
    if let Some(budget) = budget {
        args.extend(["--budget".into(), budget.spec().into()]);
    }
    // The connection may drop after the run was made there and before its
    // answer came back: asked again under the same key, the host answers
    // with the run it made, never a second one.
    let key: String = (0..20).map(|_| fastrand::alphanumeric()).collect();
    args.extend(["--request".into(), format!("{}-{key}", host.name).into()]);
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(500);
    let mut reached = false;
    let output = loop {
        match ssh.run(&args, Some(task.as_bytes())) {
            // Never reached: nothing was made there, and a host that is
            // down is said at once.
            Err(e @ SshError::Unreachable { .. }) if !reached && !e.may_have_run() => return Err(e.into()),
            Err(e @ (SshError::Unreachable { .. } | SshError::Failed { .. })) => {
                reached = true;
                if started.elapsed() + pause > LAUNCH_RETRY_FOR {
                    return Err(e.into());
                }
                tracing::info!(host = %host.name, "launching there again under the same key: {e}");
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_secs(8));
            }
            answered => break answered?,
        }
    };
    if !output.status.success() {
        return Err(refused(host, &output.stderr));
    }
    let mut run: Run = serde_json::from_slice(&output.stdout).map_err(|e| RemoteError::Garbled {
        host: host.name.clone(),
        what: "corral launch --json",
        detail: e.to_string(),
    })?;
    // It answered: a trouble recorded a moment ago is over.
    let fire = options.fire.as_ref().map(|(fire, item)| crate::store::FireLink { fire: *fire, item: item.as_deref() });
    store.record_remote_launch(&host.name, &run, launched_by, fire.as_ref())?;
    run.host = Some(host.name.clone());
    Ok(run)
}

/// Runs `corral ARGS` on the host of `run` (a verb on it: `abort`, `reply`
/// …) and returns what it printed; its refusal is an error in its words.
pub fn act(home: &Home, run: &Run, args: &[OsString]) -> Result<Vec<u8>, RemoteError> {
    act_with_code(home, run, args).map(|(_, out)| out)
}

/// As [`act`], with the remote exit code (0, 1: a run that did not
/// complete, or 124: a wait that timed out).
pub fn act_with_code(home: &Home, run: &Run, args: &[OsString]) -> Result<(i32, Vec<u8>), RemoteError> {
    call(home, run.host.as_deref().unwrap_or_default(), args)
}

/// Runs `corral ARGS` on host `name` of config.toml; its exit code (0, 1
/// or 124) and what it printed, or its refusal in its words.
pub fn call(home: &Home, name: &str, args: &[OsString]) -> Result<(i32, Vec<u8>), RemoteError> {
    let config = crate::home::config::Config::load(home)?;
    let host =
        config.host(name).map_err(|e| RemoteError::Refused { host: name.to_string(), message: e.to_string() })?;
    let output = Ssh::new(home, host).answering_within(answer_within(args)).run(args, None)?;
    match output.status.code() {
        Some(code @ (0 | 1 | 124)) => Ok((code, output.stdout)),
        _ => Err(refused(host, &output.stderr)),
    }
}

/// How long `corral ARGS` there has to answer: a wait its own timeout and
/// a little more (a wait with none, as long as it takes), any other verb
/// [`ssh::ANSWER_WITHIN`]: a host whose connection is up and whose
/// `corral` never answers is said so, never waited for without end.
pub fn answer_within(args: &[OsString]) -> Option<std::time::Duration> {
    let words: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let timeout = words.iter().position(|w| *w == "--timeout").and_then(|i| words.get(i + 1)?.parse::<f64>().ok());
    match (words.first().copied(), timeout) {
        (Some("wait"), Some(t)) => std::time::Duration::try_from_secs_f64(t.max(0.0)).ok().map(|t| t + WAIT_GRACE),
        (Some("wait" | "tail"), None) => None,
        _ if words.contains(&"--wait") || words.contains(&"--follow") || words.contains(&"-f") => None,
        _ => Some(ssh::ANSWER_WITHIN),
    }
}

/// What a wait there is given past its own timeout to answer.
const WAIT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The host of config.toml that has `run` (a mirrored run) now: its own;
/// or, when config.toml no longer names that host, the host whose store it
/// came from (renamed): the hosts not followed yet are caught up, and the
/// run's rows move to the one with its store.
pub fn host_of(home: &Home, store: &mut Store, run: &Run) -> Result<String, RemoteError> {
    let config = crate::home::config::Config::load(home)?;
    let named = |name: &Option<String>| name.as_ref().filter(|n| config.host(n).is_ok()).cloned();
    if let Some(host) = named(&run.host) {
        return Ok(host);
    }
    for host in &config.hosts {
        if store.host_state(&host.name)?.and_then(|s| s.store).is_none() {
            catch_up(home, store, host, std::time::Duration::from_secs(3))?;
        }
    }
    let moved = store.find_remote_run(&run.id)?.and_then(|r| named(&r.host));
    moved.ok_or_else(|| RemoteError::HostGone { host: run.host.clone().unwrap_or_default(), run: run.id.clone() })
}

/// The transcript of a run of another host, fetched now (the last `lines`
/// lines), numbered from 1 as this store numbers its own.
pub fn transcript(home: &Home, run: &Run, lines: usize) -> Result<Vec<crate::store::StoredEvent>, RemoteError> {
    #[derive(Deserialize)]
    struct Line {
        at: String,
        kind: crate::adapter::EventKind,
        text: String,
    }
    let args = ["tail".into(), run.id.clone().into(), "-n".into(), lines.to_string().into(), "--json".into()];
    let printed = act(home, run, &args)?;
    let host = run.host.clone().unwrap_or_default();
    String::from_utf8_lossy(&printed)
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let line: Line = serde_json::from_str(line).map_err(|e| RemoteError::Garbled {
                host: host.clone(),
                what: "corral tail --json",
                detail: e.to_string(),
            })?;
            Ok(crate::store::StoredEvent {
                seq: i as i64 + 1,
                at: line.at,
                kind: line.kind,
                text: line.text,
                json: None,
            })
        })
        .collect()
}

/// The remote `corral`'s own error, without its `corral: ` prefix.
fn refused(host: &HostConfig, stderr: &[u8]) -> RemoteError {
    let said = String::from_utf8_lossy(stderr);
    let message = said.trim().strip_prefix("corral: ").unwrap_or(said.trim()).to_string();
    RemoteError::Refused { host: host.name.clone(), message }
}
