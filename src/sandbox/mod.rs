//! What an agent may touch: the files it may write, the files it may not
//! read, the hosts it may reach and the variables it keeps, per preset
//! (`sandbox:`) or for every run (`[sandbox]` in config.toml).
//!
//! Corral decides and shows; existing engines enforce. The file system view
//! and the namespaces are bubblewrap's ([`bwrap`]); a host allowlist is a
//! proxy of the shepherd's, reached from inside the sandbox's own network
//! ([`proxy`]). Where no engine works, a run that asks for a sandbox does
//! not start ([`engine`]) unless its preset says the sandbox is optional.
//! What the sandbox refused is recognised in the agent's own words and
//! shown as a denial ([`denial`]).

pub mod broker;
pub mod bwrap;
pub mod denial;
pub mod engine;
pub mod own;
pub mod proxy;
mod within;
mod written;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use within::Folders;
pub use written::{host_name, is_full_path, Asked, BadSandbox, WrittenRules, WrittenSandbox};

/// What a sandboxed run may touch, as decided before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// The profile it came from, if any (for `show`).
    pub profile: Option<String>,
    /// What it may write besides what its agent needs to run.
    pub write: Vec<Place>,
    /// What it may read.
    pub read: Read,
    /// Places hidden whatever `read` says: what the sandbox a run was
    /// launched from denies, inside what the run's own `read: only` lists
    /// (`only [~]` inside a sandbox that hides `~/.ssh` reads `~` but it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<String>,
    /// Under `read: deny`, the places of the home it reads besides its own
    /// folder, what it writes and the toolchains ([`TOOLCHAINS`]): the
    /// rest of the home is hidden (`home: [~/notes]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub home: Vec<String>,
    /// Where it may connect.
    pub network: Network,
    /// The only variables it keeps (besides those its agent needs); `None`
    /// keeps the launcher's environment.
    pub env_keep: Option<Vec<String>>,
    /// Runs unsandboxed where no engine works here, instead of failing.
    pub optional: bool,
}

/// A place a run may write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// The run's working folder: its worktree when it has one.
    Worktree,
    /// A path; `~` is the user's home.
    Path(String),
}

/// What a run may read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Read {
    /// Everything but these (`~` is the user's home).
    Deny(Vec<String>),
    /// Only these, the system's programs and libraries, and what its agent
    /// needs.
    Only(Vec<String>),
}

/// Where a run may connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// Nowhere: the sandbox has only its own loopback.
    None,
    /// Anywhere, as unsandboxed.
    All,
    /// Only these hosts (`*.example.com` for its subdomains; `agent` for
    /// its agent's API), through the shepherd's proxy.
    Hosts(Vec<String>),
}

/// Secrets no sandboxed agent reads unless its sandbox says `read: only`
/// with them listed: keys, cloud and registry credentials.
pub const SECRETS: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.azure",
    "~/.kube",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
    "~/.password-store",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.vault-token",
    "~/.config/rclone",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.config/hub",
    "~/.config/op",
    "~/.local/share/keyrings",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    // Agents of keys that sign on request (a read-only bind keeps a socket
    // connectable), git's own credential store, shell and REPL histories
    // (tokens typed at a prompt).
    "~/.1password",
    "~/.bitwarden-ssh-agent.sock",
    "~/.docker/run",
    "~/.docker/desktop",
    "~/.config/git/credentials",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.local/share/fish/fish_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    // The agents' own: each agent reads its own (read-only), no other.
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.gemini/oauth_creds.json",
    "~/.gemini/google_accounts.json",
    "~/.local/share/opencode/auth.json",
    "~/.pi/agent/auth.json",
];

/// What of the home every sandbox that reads "all but" shows, read-only,
/// besides the run's folder, what it writes and its agent's own files:
/// the toolchains and caches an agent's builds need, and git's settings
/// (who commits). The rest of the home — sockets of key agents, shell
/// histories, credential stores no list names yet — is not there.
pub const TOOLCHAINS: &[&str] = &[
    "~/.cargo",
    "~/.rustup",
    "~/.npm",
    "~/.nvm",
    "~/.volta",
    "~/.bun",
    "~/.deno",
    "~/.yarn",
    "~/.cache/pip",
    "~/.cache/uv",
    "~/.pyenv",
    "~/.local/bin",
    "~/.local/lib",
    "~/go",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.gradle/wrapper",
    "~/.gitconfig",
    "~/.config/git/config",
    "~/.config/git/ignore",
    "~/.config/git/attributes",
];

/// Variables that name a socket of the host's (an agent of keys, a session
/// bus, a display, a container engine): a sandbox shows none of them, so
/// it is not handed their names either.
pub const HOST_SOCKETS: &[&str] = &[
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "TMUX",
    "STY",
    "KRB5CCNAME",
    "XDG_RUNTIME_DIR",
];

/// The package registries a builder reaches.
const REGISTRIES: &[&str] = &[
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "deb.debian.org",
];

impl Sandbox {
    /// The profiles shipped, by name: `reviewer` reads the project, writes
    /// nothing and reaches only its agent's API; `builder` writes its
    /// worktree and /tmp and reaches its API and the package registries.
    pub fn profile(name: &str) -> Option<Sandbox> {
        let secrets = || Read::Deny(SECRETS.iter().map(|s| s.to_string()).collect());
        match name {
            "reviewer" => Some(Sandbox {
                profile: Some("reviewer".into()),
                write: Vec::new(),
                read: secrets(),
                masked: Vec::new(),
                home: Vec::new(),
                network: Network::Hosts(vec!["agent".into()]),
                env_keep: None,
                optional: false,
            }),
            "builder" => Some(Sandbox {
                profile: Some("builder".into()),
                write: vec![Place::Worktree, Place::Path("/tmp".into())],
                read: secrets(),
                masked: Vec::new(),
                home: Vec::new(),
                network: Network::Hosts(
                    std::iter::once("agent").chain(REGISTRIES.iter().copied()).map(str::to_string).collect(),
                ),
                env_keep: None,
                optional: false,
            }),
            _ => None,
        }
    }

    /// What it may write that does not exist here, so is not writable, in
    /// words (`show` says it; a worktree is made after this is asked).
    pub fn missing_writes(&self, home: &Path) -> Vec<String> {
        let paths = self.write.iter().filter_map(|p| match p {
            Place::Path(path) => Some(expand(path, home)),
            Place::Worktree => None,
        });
        paths.filter(|p| !p.exists()).map(|p| not_writable(&p)).collect()
    }

    /// This sandbox with the places it writes as they are on disk now
    /// (`~` made `home`, links resolved): fixed at launch, so a link put
    /// in a place's stead later is refused at the next turn, never
    /// followed (see `bwrap`).
    pub fn resolved(&self, home: &Path) -> Sandbox {
        let write = self
            .write
            .iter()
            .map(|place| match place {
                Place::Worktree => Place::Worktree,
                Place::Path(path) => Place::Path(on_disk(path, home).to_string_lossy().into_owned()),
            })
            .collect();
        Sandbox { write, ..self.clone() }
    }

    /// One line for `show`: what it may write and reach.
    pub fn describe(&self) -> String {
        let write: Vec<String> = self.write.iter().map(Place::to_string).collect();
        let write = if write.is_empty() { "nothing".to_string() } else { write.join(", ") };
        let network = match &self.network {
            Network::None => "no network".to_string(),
            Network::All => "any host".to_string(),
            Network::Hosts(hosts) => hosts.join(", "),
        };
        let read = match &self.read {
            Read::Deny(list) if self.home.is_empty() => {
                format!("reads the system, its folder and the toolchains of the home but {} places", list.len())
            }
            Read::Deny(list) => format!(
                "reads the system, its folder, the toolchains and {} of the home but {} places",
                self.home.join(", "),
                list.len()
            ),
            Read::Only(list) => format!("reads only {}", list.join(", ")),
        };
        let read = match self.masked.len() {
            0 => read,
            n => format!("{read} but {n} places hidden"),
        };
        let profile = self.profile.as_deref().map(|p| format!("{p}: ")).unwrap_or_default();
        format!("{profile}writes {write}; {read}; reaches {network}")
    }
}

impl Read {
    /// Whether everything under `path` may be read (`~` is `home`): no
    /// denied place lies in it or holds it, or a place listed holds it.
    pub fn reads_all_of(&self, path: &Path, home: &Path) -> bool {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let place = |p: &String| on_disk(p, home);
        match self {
            Read::Deny(denied) => !denied.iter().map(place).any(|d| d.starts_with(&path) || path.starts_with(&d)),
            Read::Only(listed) => listed.iter().map(place).any(|l| path.starts_with(&l)),
        }
    }
}

impl Sandbox {
    /// Whether everything under `path` may be read: its `read` allows it,
    /// nothing it masks lies in it or holds it, and under `read: deny` it
    /// is not in the hidden part of the home.
    pub fn reads_all_of(&self, path: &Path, home: &Path) -> bool {
        let shown = match self.read {
            Read::Deny(_) => self.shows_of_home(path, home),
            Read::Only(_) => true,
        };
        shown && self.reads_by_rules(path, home)
    }

    /// Whether its rules let it read all of `path` wherever it lies (its
    /// `read:` and what it masks, not the home's allow-list): what may be
    /// carried from the checkout into its worktree, which it does read.
    pub fn reads_by_rules(&self, path: &Path, home: &Path) -> bool {
        self.read.reads_all_of(path, home) && Read::Deny(self.masked.clone()).reads_all_of(path, home)
    }

    /// The places of the home `home` it shows under `read: deny`, as on
    /// disk: the toolchains, its `home:` list and what it writes there.
    pub fn home_shown(&self, home: &Path) -> Vec<PathBuf> {
        let place = |p: &str| on_disk(p, home);
        let written = self.write.iter().filter_map(|p| match p {
            Place::Path(p) => Some(p.as_str()),
            Place::Worktree => None,
        });
        let real_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        let places = TOOLCHAINS.iter().copied().chain(self.home.iter().map(String::as_str)).chain(written);
        places.map(place).filter(|p| p.starts_with(&real_home)).collect()
    }

    /// Whether `path` is out of the home `home`, or lies in a place of it
    /// this sandbox shows under `read: deny` (see [`Sandbox::home_shown`]).
    pub fn shows_of_home(&self, path: &Path, home: &Path) -> bool {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let real_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        if real_home.parent().is_none() || !path.starts_with(&real_home) {
            return true;
        }
        self.home_shown(home).iter().any(|shown| path.starts_with(shown))
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Worktree => f.write_str("worktree"),
            Place::Path(path) => f.write_str(path),
        }
    }
}

/// Why a place the sandbox lists is not writable.
pub fn not_writable(path: &Path) -> String {
    format!("sandbox: {} does not exist, so it is not writable (create it, then launch again)", path.display())
}

/// `path` with a leading `~` made the user's home `home`.
pub fn expand(path: &str, home: &Path) -> PathBuf {
    match path.strip_prefix('~') {
        Some("") => home.to_path_buf(),
        Some(rest) if rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(path),
    }
}

/// `path` (`~` is `home`) as it is on disk: links resolved, as far as it
/// exists (else as written).
pub fn on_disk(path: &str, home: &Path) -> PathBuf {
    let full = expand(path, home);
    std::fs::canonicalize(&full).unwrap_or(full)
}

/// The variables every sandboxed run keeps, whatever `env: keep` lists:
/// what programs need to start and find things, and Corral's own.
const ALWAYS_KEPT: &[&str] =
    &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_", "TERM", "TZ", "TMPDIR", "XDG_", "CORRAL_"];

/// Whether a sandbox that keeps `keep` keeps variable `name`, for an agent
/// that reads the variables starting with `own`.
pub fn keeps(keep: &[String], name: &str, own: &[&str]) -> bool {
    let prefix = |p: &&str| if p.ends_with('_') { name.starts_with(*p) } else { name == *p };
    keep.iter().any(|k| k == name) || ALWAYS_KEPT.iter().any(prefix) || own.iter().any(prefix)
}

/// What an agent's API hosts are read from: the run's environment and the
/// user's home.
pub struct AgentEnv<'a> {
    /// The run's environment.
    pub vars: &'a [(std::ffi::OsString, std::ffi::OsString)],
    /// The user's home.
    pub home: &'a Path,
}

impl AgentEnv<'_> {
    /// `vendors`, and the host of each URL in variables `urls` that is set.
    pub fn hosts(&self, vendors: &[&str], urls: &[&str]) -> Vec<String> {
        let set =
            urls.iter().filter_map(|name| self.vars.iter().find(|(k, _)| k == name)?.1.to_str().and_then(url_host));
        vendors.iter().map(|v| v.to_string()).chain(set).collect()
    }
}

/// A URL's host as a network allowlist entry: `https://host/path` →
/// `host`, `http://127.0.0.1:4000` → `127.0.0.1:4000` (a port of its own is
/// the only one it opens; without one, the web's).
pub fn url_host(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return None;
    }
    let host = host.to_ascii_lowercase();
    let default: u16 = if scheme.eq_ignore_ascii_case("http") { 80 } else { 443 };
    let port: u16 = match port.filter(|p| !p.is_empty()) {
        Some(port) => port.parse().ok()?,
        None => default,
    };
    Some(match (port == default, host.contains(':')) {
        (true, _) => host,
        (false, true) => format!("[{host}]:{port}"),
        (false, false) => format!("{host}:{port}"),
    })
}

impl Network {
    /// The hosts allowed, `agent` made its agent's API hosts (`None`: no
    /// list — none or all).
    pub fn hosts_for(&self, agent_hosts: impl FnOnce() -> Vec<String>) -> Option<Vec<String>> {
        let Network::Hosts(hosts) = self else { return None };
        let mut all: Vec<String> = hosts.iter().filter(|h| *h != "agent").cloned().collect();
        if hosts.iter().any(|h| h == "agent") {
            all.extend(agent_hosts());
        }
        all.sort();
        all.dedup();
        Some(all)
    }
}

/// What a run's sandbox was widened to after it started (`corral allow`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Widening {
    /// Full paths it may write too.
    pub write: Vec<String>,
    /// Hosts it may reach too.
    pub hosts: Vec<String>,
}

impl Widening {
    /// Each allowance as the store keeps it: (`write` | `host`, value).
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.write.iter().map(|w| ("write", w.as_str())).chain(self.hosts.iter().map(|h| ("host", h.as_str())))
    }

    /// True if it allows nothing.
    pub fn is_empty(&self) -> bool {
        self.write.is_empty() && self.hosts.is_empty()
    }
}

impl Sandbox {
    /// This sandbox with `widening` allowed too: its paths writable, its
    /// hosts reachable (a run without the network gets only them).
    pub fn widened(&self, widening: &Widening) -> Sandbox {
        let mut sandbox = self.clone();
        for path in &widening.write {
            let place = Place::Path(path.clone());
            if !sandbox.write.contains(&place) {
                sandbox.write.push(place);
            }
        }
        if !widening.hosts.is_empty() {
            sandbox.network = match &sandbox.network {
                Network::All => Network::All,
                Network::None => Network::Hosts(widening.hosts.clone()),
                Network::Hosts(hosts) => {
                    let mut all = hosts.clone();
                    all.extend(widening.hosts.iter().filter(|h| !hosts.contains(h)).cloned());
                    Network::Hosts(all)
                }
            };
        }
        sandbox
    }
}
