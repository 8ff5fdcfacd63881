//! Settings from `config.toml` in Corral's config folder.
//!
//! Every setting has a default, so the file is optional; a file that cannot
//! be read is an error that names the file and the key, never a silent
//! fallback.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::adapter::AgentKind;
use crate::cost::resources::{LimitValue, ResourceLimits, WrittenLimits};
use crate::home::Home;
use crate::preset::Preset;

/// Corral's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Most runs starting or running at once; more wait as `queued`.
    pub max_parallel: usize,
    /// How long an agent may take to exit by itself after its outcome.
    pub exit_grace: Duration,
    /// How long after SIGTERM (or SIGINT) before SIGKILL.
    pub stop_grace: Duration,
    /// Limits for agent presets (not `command`) that set none themselves.
    pub agent_limits: Limits,
    /// How long a run whose turn ended waits for its child runs, unless its
    /// preset says otherwise.
    pub children_timeout: Option<Duration>,
    /// Most continuation turns one run may get.
    pub max_continuations: usize,
    /// Limits on each run's process tree, for presets that set none
    /// (`[limits]`: none by default).
    pub resource_limits: ResourceLimits,
    /// Give each run a cgroup where one can be made (`cgroups = false`
    /// follows the process tree instead, as where none can be).
    pub cgroups: bool,
    /// Keep launches at a terminal warm with a launch template
    /// (`corral::shepherd::template`): a process of the user's that ends after ten
    /// idle minutes. Off unless asked: it saves about a millisecond of a
    /// launch's 12 (BENCHMARKS.md, "A run that costs a fork").
    pub launch_template: bool,
    /// How much of each run's transcript is kept (`[transcripts]`).
    pub transcripts: TranscriptLimits,
    /// Which ended runs the tray removes once a day (`[retention]`; none
    /// unless set: nothing is deleted unasked).
    pub retention: Option<Retention>,
    /// Other machines runs are launched on and followed from here
    /// (`[hosts.NAME]`), by name.
    pub hosts: Vec<HostConfig>,
    /// `[schedules] systemd_timers = true`: each schedule gets a systemd
    /// user timer of Corral's making (see `schedule::timers`), so its slots
    /// fire with no Corral process running.
    pub systemd_timers: bool,
    /// `[budget]`: what a run may spend when its preset and its launch say
    /// nothing; unlimited by default.
    pub budget: Option<crate::cost::budget::Budget>,
    /// `[budget] on_budget`: what crossing a budget does, for presets that
    /// do not say (pause and ask by default).
    pub on_budget: crate::cost::budget::OnBudget,
    /// `[sandbox]`: what runs may touch when their preset says nothing;
    /// unsandboxed by default.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// `[usage_limits] retry`: how long a run whose agent's limit said no
    /// reset time waits before trying again (doubled each time).
    pub usage_limit_retry: Duration,
    /// `[usage_limits] tries`: how many times such a run is tried again
    /// before it fails with `usage_limit`.
    pub usage_limit_tries: u32,
    /// `[push]`: what needs the user, pushed to their phone (none unless
    /// set; see `push`).
    pub push: Option<PushConfig>,
    /// `ports = N`: a block of N ports for every run whose preset asks for
    /// none (see `ports`); none unless set.
    pub ports: Option<u16>,
}

/// `[push]`: a push channel to the user's phone.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushConfig {
    /// An ntfy topic's address (`https://ntfy.sh/<random topic>`, or a
    /// self-hosted server's): pushes go there, and answers come back on
    /// the topic of the same name ending `-answers`.
    #[serde(default)]
    pub ntfy: Option<String>,
    /// An access token of the ntfy server (`tk_…`) that may publish to the
    /// topic and read and write its `-answers` topic. Answers come from
    /// the phone only where the server refuses both topics to anyone
    /// without a token: the topic is then not what protects the user.
    #[serde(default)]
    pub token: Option<String>,
    /// An address each push is also POSTed to, as JSON.
    #[serde(default)]
    pub webhook: Option<String>,
    /// Put the task and what the agent said in pushes (off: only the
    /// preset, the run id and what is asked).
    #[serde(default)]
    pub details: bool,
    /// What is pushed: `budget` (a budget reached, with Allow more and
    /// Stop), `denied` (a run that ended with actions denied, with Allow
    /// and continue), `failed` (a run that failed), `usage_limit` (runs
    /// paused at a limit), `pull_request` (what the forge asks of a run's
    /// pull request, with Send to the run, or its end there). Default: all.
    #[serde(default = "PushConfig::everything")]
    pub send: Vec<String>,
}

impl PushConfig {
    /// Every kind of push.
    pub const KINDS: &'static [&'static str] = &["budget", "denied", "failed", "usage_limit", "pull_request"];

    fn everything() -> Vec<String> {
        Self::KINDS.iter().map(|k| k.to_string()).collect()
    }

    /// True if pushes of `kind` are sent.
    pub fn sends(&self, kind: &str) -> bool {
        self.send.iter().any(|k| k == kind)
    }
}

/// A machine reached over SSH (`[hosts.NAME]`), running its own Corral.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Its name here (the table's key).
    #[serde(skip)]
    pub name: String,
    /// `user@host`, or a `Host` of `~/.ssh/config`.
    pub ssh: String,
    /// Its SSH port, if not the default or the one `~/.ssh/config` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The private key to use, if not the SSH agent's or the usual ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<String>,
    /// More `ssh` arguments (e.g. `["-o", "ProxyJump=bastion"]`), before
    /// Corral's own, so they win.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// The remote `corral` (default: `corral` on the remote PATH; `~/` is
    /// the remote home).
    #[serde(default = "default_remote_corral")]
    pub corral: String,
    /// The remote `CORRAL_HOME`, if not the remote user's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

fn default_remote_corral() -> String {
    "corral".to_string()
}

/// How much of a transcript is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptLimits {
    /// Most bytes of events kept per run (None: no cap). Past it, events are
    /// counted, not kept, and the run says so; its outcome is still read.
    pub max_bytes: Option<u64>,
    /// Bytes of each raw stream kept in the run's folder (`stdout.log`,
    /// `stderr.log`) to diagnose an agent's format (0, the default: none;
    /// the transcript is the store's events, which hold all of it).
    pub raw_log_bytes: u64,
}

impl Default for TranscriptLimits {
    fn default() -> Self {
        TranscriptLimits { max_bytes: Some(100 << 20), raw_log_bytes: 0 }
    }
}

/// The runs `[retention]` removes: ended, older than `older_than`, and of
/// one of `status` when given.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// Age past which an ended run goes (counted from its end).
    pub older_than: Duration,
    /// Only runs that ended so (empty: any end).
    pub status: Vec<crate::RunStatus>,
}

/// The time limits of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Limit on silence after the first output (a tool call in flight is
    /// not silence).
    pub idle_timeout: Option<Duration>,
    /// Limit on the wait for the first output.
    pub startup_timeout: Option<Duration>,
    /// Limit on waiting for child runs after the agent's turn ended.
    pub children_timeout: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_parallel: 8,
            exit_grace: Duration::from_secs(1),
            stop_grace: Duration::from_secs(3),
            agent_limits: Limits {
                timeout: Some(Duration::from_secs(4 * 3600)),
                idle_timeout: Some(Duration::from_secs(20 * 60)),
                startup_timeout: Some(Duration::from_secs(3 * 60)),
                children_timeout: None,
            },
            children_timeout: Some(Duration::from_secs(3600)),
            max_continuations: 3,
            resource_limits: ResourceLimits::default(),
            cgroups: true,
            launch_template: false,
            transcripts: TranscriptLimits::default(),
            retention: None,
            hosts: Vec::new(),
            systemd_timers: false,
            budget: None,
            sandbox: None,
            on_budget: crate::cost::budget::OnBudget::Pause,
            usage_limit_retry: Duration::from_secs(300),
            usage_limit_tries: 3,
            push: None,
            ports: None,
        }
    }
}

/// A host name that `config.toml` does not have.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "no host '{name}' in config.toml ({}): add it with `corral hosts add {name} user@host`",
    if known.is_empty() { "it has none".to_string() } else { format!("it has {known}") }
)]
pub struct UnknownHost {
    /// The name asked for.
    pub name: String,
    /// The configured names, comma-separated.
    pub known: String,
}

/// Why `name` cannot name a host (it names files and SSH sockets).
pub fn host_name_problem(name: &str) -> Option<String> {
    let fine =
        !name.is_empty() && name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if name == "local" {
        // `ls --host local` means this machine.
        return Some("'local' names this machine: choose another host name".to_string());
    }
    (!fine).then(|| format!("'{name}' is not a host name: use up to 32 letters, digits, '-' or '_'"))
}

/// A settings file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It exists but could not be read.
    #[error("cannot read the settings file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// Another local user could have written it.
    #[error(transparent)]
    NotYours(#[from] crate::trust::ownership::NotYours),
    /// It is not valid TOML of the expected shape.
    #[error("invalid settings file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ConfigFile {
    max_parallel: Option<usize>,
    ports: Option<u16>,
    max_continuations: Option<usize>,
    children_timeout: Option<String>,
    exit_grace: Option<String>,
    stop_grace: Option<String>,
    agent_defaults: LimitsFile,
    limits: WrittenLimits,
    cgroups: Option<bool>,
    launch_template: Option<bool>,
    transcripts: TranscriptsFile,
    retention: Option<RetentionFile>,
    hosts: std::collections::BTreeMap<String, HostConfig>,
    schedules: SchedulesFile,
    budget: Option<BudgetFile>,
    sandbox: Option<crate::sandbox::WrittenRules>,
    usage_limits: UsageLimitsFile,
    push: Option<PushConfig>,
}

/// `[usage_limits]`: how a limit without a reset time is tried again.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct UsageLimitsFile {
    retry: Option<String>,
    tries: Option<u32>,
}

/// `[budget]`: the budget of a run whose preset and launch give none.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct BudgetFile {
    usd: Option<crate::cost::resources::LimitValue>,
    tokens: Option<crate::cost::resources::LimitValue>,
    on_budget: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SchedulesFile {
    systemd_timers: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TranscriptsFile {
    max: Option<LimitValue>,
    raw_logs: Option<LimitValue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionFile {
    older_than: String,
    #[serde(default)]
    status: Vec<String>,
}

/// `"none"` (or `"off"`) turns a default limit off.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LimitsFile {
    timeout: Option<String>,
    idle_timeout: Option<String>,
    startup_timeout: Option<String>,
}

impl Config {
    /// Reads `config.toml` of `home`, or the defaults if there is none.
    pub fn load(home: &Home) -> Result<Config, ConfigError> {
        Config::load_file(&home.config_file())
    }

    /// Reads one settings file, or the defaults if it does not exist.
    pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => return Err(ConfigError::Read { path: path.to_path_buf(), source }),
        };
        crate::trust::ownership::check(path)?;
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        let file: ConfigFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let duration = |key: &str, value: &str| {
            let d = humantime::parse_duration(value)
                .map_err(|e| invalid(format!("`{key} = \"{value}\"` is not a duration ({e}); write e.g. \"3s\"")))?;
            match crate::text::time::too_long(d) {
                Some(why) => Err(invalid(format!("`{key} = \"{value}\"`: {why}; write e.g. \"4h\", or \"none\""))),
                None => Ok(d),
            }
        };
        let limit = |key: &str, value: &Option<String>, default: Option<Duration>| match value.as_deref() {
            None => Ok(default),
            Some("none" | "off") => Ok(None),
            Some(v) => duration(key, v).map(Some),
        };
        let mut config = Config::default();
        if let Some(n) = file.max_parallel {
            if n == 0 {
                return Err(invalid("`max_parallel = 0` would never start a run; use 1 or more".into()));
            }
            config.max_parallel = n;
        }
        if let Some(n) = file.max_continuations {
            config.max_continuations = n;
        }
        if let Some(n) = file.ports {
            if n > crate::run::ports::MOST {
                return Err(invalid(format!("`ports = {n}`: at most {} ports a run", crate::run::ports::MOST)));
            }
            config.ports = Some(n).filter(|&n| n > 0);
        }
        config.children_timeout = limit("children_timeout", &file.children_timeout, config.children_timeout)?;
        if let Some(v) = &file.exit_grace {
            config.exit_grace = duration("exit_grace", v)?;
        }
        if let Some(v) = &file.stop_grace {
            config.stop_grace = duration("stop_grace", v)?;
        }
        let d = config.agent_limits;
        let f = &file.agent_defaults;
        config.agent_limits = Limits {
            timeout: limit("agent_defaults.timeout", &f.timeout, d.timeout)?,
            idle_timeout: limit("agent_defaults.idle_timeout", &f.idle_timeout, d.idle_timeout)?,
            startup_timeout: limit("agent_defaults.startup_timeout", &f.startup_timeout, d.startup_timeout)?,
            children_timeout: None,
        };
        config.cgroups = file.cgroups.unwrap_or(true);
        config.launch_template = file.launch_template.unwrap_or(false);
        config.resource_limits = ResourceLimits::parse(&file.limits).map_err(|e| invalid(e.to_string()))?;
        let size = |key: &'static str, value: &LimitValue| {
            crate::cost::resources::parse_size(key, value).map_err(|e| invalid(format!("`[transcripts] {e}`")))
        };
        if let Some(v) = &file.transcripts.max {
            config.transcripts.max_bytes = size("max", v)?;
        }
        if let Some(v) = &file.transcripts.raw_logs {
            config.transcripts.raw_log_bytes = size("raw_logs", v)?.unwrap_or(0);
        }
        if let Some(r) = &file.retention {
            let status = r
                .status
                .iter()
                .map(|s| match s.parse::<crate::RunStatus>() {
                    Ok(status) if status.is_terminal() => Ok(status),
                    _ => Err(invalid(format!(
                        "`[retention] status` has \"{s}\": write ended statuses (completed, failed, aborted, lost)"
                    ))),
                })
                .collect::<Result<_, _>>()?;
            config.retention = Some(Retention { older_than: duration("retention.older_than", &r.older_than)?, status });
        }
        config.systemd_timers = file.schedules.systemd_timers.unwrap_or(false);
        if let Some(push) = file.push {
            for (key, url) in [("ntfy", &push.ntfy), ("webhook", &push.webhook)] {
                if let Some(url) = url {
                    if !(url.starts_with("https://") || url.starts_with("http://")) {
                        return Err(invalid(format!(
                            "`[push] {key} = \"{url}\"` is not an address: write e.g. \"https://ntfy.sh/<a random topic>\""
                        )));
                    }
                }
            }
            if push.ntfy.is_none() && push.webhook.is_none() {
                return Err(invalid(
                    "`[push]` needs `ntfy = \"https://ntfy.sh/<a random topic>\"` or `webhook = …`".into(),
                ));
            }
            if let Some(kind) = push.send.iter().find(|k| !PushConfig::KINDS.contains(&k.as_str())) {
                return Err(invalid(format!(
                    "`[push] send` has \"{kind}\": write some of {}",
                    PushConfig::KINDS.join(", ")
                )));
            }
            config.push = Some(push);
        }
        if let Some(v) = &file.usage_limits.retry {
            config.usage_limit_retry = duration("usage_limits.retry", v)?;
        }
        if let Some(n) = file.usage_limits.tries {
            config.usage_limit_tries = n;
        }
        if let Some(b) = &file.budget {
            if b.usd.is_some() || b.tokens.is_some() {
                let written = crate::cost::budget::WrittenBudget::Keys { usd: b.usd.clone(), tokens: b.tokens.clone() };
                config.budget = Some(written.read().map_err(|e| invalid(format!("`[budget]`: {e}")))?);
            }
            if let Some(word) = &b.on_budget {
                config.on_budget = word.trim().parse().map_err(|e| invalid(format!("`[budget] on_budget`: {e}")))?;
            }
        }
        if let Some(rules) = &file.sandbox {
            config.sandbox = Some(rules.read().map_err(|e| invalid(format!("`[sandbox]`: {e}")))?);
        }
        for (name, host) in file.hosts {
            if let Some(why) = host_name_problem(&name) {
                return Err(invalid(format!("`[hosts.{name}]`: {why}")));
            }
            if host.ssh.trim().is_empty() || host.ssh.starts_with('-') {
                return Err(invalid(format!(
                    "`[hosts.{name}] ssh = \"{}\"` is not a destination: write `user@host` or a Host of ~/.ssh/config",
                    host.ssh
                )));
            }
            // It crosses the host's login shell as a bare word, whatever that
            // shell is (sh, fish, csh): only characters no shell reads.
            if !crate::remote::words::is_plain_word(&host.corral) {
                return Err(invalid(format!(
                    "`[hosts.{name}] corral = \"{}\"` is not a plain path: use letters, digits and / . _ + - \
                     (a leading ~/ is the remote home)",
                    host.corral
                )));
            }
            config.hosts.push(HostConfig { name, ..host });
        }
        Ok(config)
    }

    /// The host named `name`, or an error listing the configured ones.
    pub fn host(&self, name: &str) -> Result<&HostConfig, UnknownHost> {
        self.hosts.iter().find(|h| h.name == name).ok_or_else(|| UnknownHost {
            name: name.to_string(),
            known: self.hosts.iter().map(|h| h.name.clone()).collect::<Vec<_>>().join(", "),
        })
    }

    /// The budget a run of `preset` gets: the launch's (`--budget`), else
    /// the preset's, else `[budget]`'s; and what crossing it does.
    pub fn budget_for(
        &self,
        preset: &Preset,
        asked: Option<crate::cost::budget::Budget>,
    ) -> Option<(crate::cost::budget::Budget, crate::cost::budget::OnBudget)> {
        let budget = asked.or(preset.budget).or(self.budget)?;
        Some((budget, preset.on_budget.unwrap_or(self.on_budget)))
    }

    /// How many ports a run of `preset` gets: the preset's `ports:`, else
    /// `ports =`'s; none unless one says.
    pub fn ports_for(&self, preset: &Preset) -> Option<u16> {
        preset.ports.or(self.ports).map(|n| n.min(crate::run::ports::MOST))
    }

    /// What a run of `preset` may touch: the preset's `sandbox:`, else
    /// `[sandbox]`'s; `None` runs it unsandboxed. `sandbox: optional` takes
    /// `[sandbox]`'s rules, else writes its worktree and /tmp and reaches
    /// any host, where an engine works.
    pub fn sandbox_for(&self, preset: &Preset) -> Option<crate::sandbox::Sandbox> {
        use crate::sandbox::{Asked, Sandbox};
        match &preset.sandbox {
            Some(Asked::Rules(rules)) => Some(rules.clone()),
            Some(Asked::None) => None,
            Some(Asked::Optional) => {
                let builder = || Sandbox {
                    network: crate::sandbox::Network::All,
                    ..Sandbox::profile("builder").expect("builder is shipped")
                };
                Some(Sandbox { optional: true, ..self.sandbox.clone().unwrap_or_else(builder) })
            }
            None => self.sandbox.clone(),
        }
    }

    /// The resource limits a run of `preset` gets: the preset's own, else
    /// `[limits]`; a preset's `none` lifts a default. Also says where each came from.
    pub fn resource_limits_for(&self, preset: &Preset) -> (ResourceLimits, Vec<String>) {
        preset.limits.over(&self.resource_limits)
    }

    /// The limits a run of `preset` gets: the preset's own, else (for agent
    /// presets) the configured defaults. `command` runs have no default
    /// limits: a test suite may be silent and long.
    pub fn limits_for(&self, preset: &Preset) -> Limits {
        let defaults = if preset.agent == AgentKind::Command { Limits::default() } else { self.agent_limits };
        Limits {
            timeout: preset.timeout.or(defaults.timeout),
            idle_timeout: preset.idle_timeout.or(defaults.idle_timeout),
            startup_timeout: preset.startup_timeout.or(defaults.startup_timeout),
            children_timeout: preset.children_timeout.or(self.children_timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_key_and_explains_mistakes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "max_parallel = 2\nexit_grace = \"200ms\"\n[agent_defaults]\nidle_timeout = \"none\"\ntimeout = \"1h\"\n",
        )
        .unwrap();
        let c = Config::load_file(&path).unwrap();
        assert_eq!(c.max_parallel, 2);
        assert_eq!(c.exit_grace, Duration::from_millis(200));
        assert_eq!(c.stop_grace, Duration::from_secs(3));
        assert_eq!(c.agent_limits.idle_timeout, None);
        assert_eq!(c.agent_limits.timeout, Some(Duration::from_secs(3600)));
        assert_eq!(c.agent_limits.startup_timeout, Some(Duration::from_secs(180)));

        for (text, want) in [
            ("max_parallel = 0", "never start"),
            ("stop_grace = \"soon\"", "not a duration"),
            ("max_paralel = 3", "unknown field"),
            ("[hosts.local]\nssh = \"me@box\"", "names this machine"),
            ("[hosts.\"a b\"]\nssh = \"me@box\"", "not a host name"),
            ("[hosts.box]\nssh = \"-oProxyCommand=x\"", "not a destination"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = Config::load_file(&path).unwrap_err().to_string();
            assert!(err.contains(want) && err.contains("config.toml"), "{text}: {err}");
        }
    }
}
