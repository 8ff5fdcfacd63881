//! Running `corral` on a host with the user's own OpenSSH: their keys,
//! agent, `~/.ssh/config` and known hosts, one multiplexed connection per
//! host (ControlMaster), never a prompt (BatchMode), host key checking as
//! the user's SSH configures it.
//!
//! SSH joins the remote command's words into one shell line, so each word
//! crosses single-quoted; text that may hold anything (a task) crosses on
//! standard input instead, byte for byte.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::config::HostConfig;
use crate::home::Home;

/// How long to wait for a connection before saying the host is unreachable.
const CONNECT_TIMEOUT_SECONDS: u32 = 10;

/// What ssh says when a connection failed before anything ran remotely.
const NEVER_BEGAN: [&str; 4] = [
    "kex_exchange_identification",
    "Connection reset by",
    "Session open refused by peer",
    "mux_client_request_session",
];

/// A host's `ssh` invocations.
#[derive(Debug, Clone)]
pub struct Ssh {
    host: HostConfig,
    /// Where the control sockets live (one per host and user).
    sockets: PathBuf,
    /// Seconds to wait for a connection.
    connect_timeout: u32,
}

/// Why a command on a host could not run, in words that say what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshError {
    /// `ssh` itself is not installed here.
    #[error("cannot run ssh: {0}; install OpenSSH's client (Debian: apt install openssh-client)")]
    NoClient(String),
    /// The host name does not resolve.
    #[error("host '{host}' ({dest}): the name does not resolve: fix `ssh` in [hosts.{host}] of config.toml")]
    UnknownName { host: String, dest: String },
    /// Nothing listens, or the network is down.
    #[error("host '{host}' ({dest}) is unreachable: {detail}")]
    Unreachable { host: String, dest: String, detail: String },
    /// The host's key is not known (or changed).
    #[error(
        "host '{host}' ({dest}): its host key is not known or changed: run `ssh {dest}` once and check the key \
         (Corral never turns host key checking off)"
    )]
    HostKey { host: String, dest: String },
    /// The key was refused.
    #[error(
        "host '{host}' ({dest}) refused the key: add yours to its ~/.ssh/authorized_keys \
         (ssh-copy-id {dest}), or set identity_file in [hosts.{host}]"
    )]
    Refused { host: String, dest: String },
    /// Corral is not installed there.
    #[error(
        "host '{host}' has no `{corral}`: install Corral there (on a machine alike: scp \"$(command -v corral)\" \
         {dest}:.local/bin/corral, with corral = \"~/.local/bin/corral\" in [hosts.{host}]; `corral hosts add … \
         --install` does it when adding a host), or set `corral` in [hosts.{host}] to its path"
    )]
    NoCorral { host: String, dest: String, corral: String },
    /// Any other failure of `ssh` (exit 255), with what it said.
    #[error("host '{host}' ({dest}): ssh failed: {detail}")]
    Failed { host: String, dest: String, detail: String },
}

impl SshError {
    /// True when the host could not be reached at all (as opposed to a
    /// refusal that waiting will not fix).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, SshError::Unreachable { .. } | SshError::Failed { .. })
    }
}

impl Ssh {
    /// The invocations of `host`, with control sockets under `home`.
    pub fn new(home: &Home, host: &HostConfig) -> Ssh {
        Ssh { host: host.clone(), sockets: home.data_dir().join("ssh"), connect_timeout: CONNECT_TIMEOUT_SECONDS }
    }

    /// The same, giving up on a connection after `seconds` (a look that
    /// must not hold a command up).
    pub fn connecting_within(mut self, seconds: u32) -> Ssh {
        self.connect_timeout = seconds;
        self
    }

    /// The host's configuration.
    pub fn host(&self) -> &HostConfig {
        &self.host
    }

    /// `ssh … HOST -- CORRAL ARGS…` with the remote `CORRAL_HOME`, standard
    /// streams to be set by the caller.
    pub fn corral(&self, args: &[OsString]) -> Command {
        let mut words = vec![OsString::from("exec"), OsString::from("env")];
        if let Some(home) = &self.host.home {
            let mut assignment = OsString::from("CORRAL_HOME=");
            assignment.push(home);
            words.push(assignment);
        }
        words.push(OsString::from(&self.host.corral));
        words.extend(args.iter().cloned());
        self.shell_line(&words)
    }

    /// `ssh … HOST -- WORDS` (each word quoted for the remote shell).
    pub fn shell_line(&self, words: &[OsString]) -> Command {
        let _ = crate::home::ensure_private_dir(&self.sockets);
        let mut command = Command::new("ssh");
        // The user's options first: for `-o`, ssh takes the first value.
        command.args(&self.host.ssh_options);
        command
            .arg("-o")
            .arg("BatchMode=yes")
            .arg("-o")
            .arg(format!("ConnectTimeout={}", self.connect_timeout))
            .arg("-o")
            .arg("ServerAliveInterval=5")
            .arg("-o")
            .arg("ServerAliveCountMax=3")
            .arg("-o")
            .arg("ControlMaster=auto")
            .arg("-o")
            .arg(format!("ControlPath={}/%C", self.sockets.display()))
            .arg("-o")
            .arg("ControlPersist=60");
        if let Some(port) = self.host.port {
            command.arg("-p").arg(port.to_string());
        }
        if let Some(key) = &self.host.identity_file {
            command.arg("-i").arg(expand_local_home(key));
        }
        let line = words.iter().map(|w| quote(&w.to_string_lossy())).collect::<Vec<_>>().join(" ");
        command.arg("--").arg(&self.host.ssh).arg(line);
        command.stdin(Stdio::null());
        command
    }

    /// Runs `corral ARGS` there with `input` on its standard input, and
    /// returns its output; an SSH failure is said in words.
    pub fn run(&self, args: &[OsString], input: Option<&[u8]>) -> Result<Output, SshError> {
        // A connection refused before it began (sshd's MaxStartups when
        // many connect at once, a full multiplexed connection) ran nothing:
        // try again shortly, by then through the one connection made.
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            let output = self.run_once(args, input)?;
            let said = String::from_utf8_lossy(&output.stderr);
            let never_began = output.status.code() == Some(255) && NEVER_BEGAN.iter().any(|s| said.contains(s));
            if !never_began || pause > std::time::Duration::from_secs(2) {
                return match self.failure(output.status.code(), &output.stderr) {
                    Some(e) => Err(e),
                    None => Ok(output),
                };
            }
            std::thread::sleep(pause + std::time::Duration::from_millis(u64::from(std::process::id() % 50)));
            pause *= 2;
        }
    }

    fn run_once(&self, args: &[OsString], input: Option<&[u8]>) -> Result<Output, SshError> {
        let mut command = self.corral(args);
        command.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| SshError::NoClient(e.to_string()))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            // A remote end that stops reading early fails below, with its words.
            let _ = std::io::Write::write_all(&mut stdin, input);
        }
        child.wait_with_output().map_err(|e| SshError::NoClient(e.to_string()))
    }

    /// What went wrong, if ssh (exit 255) or the remote shell (127: no
    /// such command) failed; `None` when the remote `corral` ran.
    pub fn failure(&self, code: Option<i32>, stderr: &[u8]) -> Option<SshError> {
        let said = String::from_utf8_lossy(stderr);
        let host = self.host.name.clone();
        let dest = self.host.ssh.clone();
        match code {
            Some(127) => Some(SshError::NoCorral { host, dest, corral: self.host.corral.clone() }),
            Some(255) | None => {
                let detail = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no message").trim().to_string();
                Some(if said.contains("Could not resolve hostname") {
                    SshError::UnknownName { host, dest }
                } else if said.contains("Host key verification failed")
                    || said.contains("HOST IDENTIFICATION HAS CHANGED")
                {
                    SshError::HostKey { host, dest }
                } else if said.contains("Permission denied") {
                    SshError::Refused { host, dest }
                } else if said.contains("Connection refused")
                    || said.contains("timed out")
                    || said.contains("No route to host")
                    || said.contains("Network is unreachable")
                    || said.contains("Connection closed")
                    || said.contains("Broken pipe")
                {
                    SshError::Unreachable { host, dest, detail }
                } else {
                    SshError::Failed { host, dest, detail }
                })
            }
            _ => None,
        }
    }
}

/// `word` for a POSIX shell (and fish): single-quoted, each `'` as `'\''`;
/// a leading `~/` stays the remote home (`"$HOME"`).
pub fn quote(word: &str) -> String {
    let single = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    match word.strip_prefix("~/") {
        Some(rest) => format!("\"$HOME\"/{}", single(rest)),
        None => {
            // Assignments for `env` (NAME=value) keep `~/` in the value too.
            match word.split_once("=~/") {
                Some((name, rest))
                    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    format!("{name}=\"$HOME\"/{}", single(rest))
                }
                _ => single(word),
            }
        }
    }
}

/// `~/x` of a local path, in this user's home.
fn expand_local_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_crosses_the_remote_shell_as_written() {
        let hostile = [
            "it's",
            "$(touch /tmp/x) `id` ; rm -rf ~ && echo $HOME",
            "line one\nline two",
            "back\\slash \"quoted\"",
            "",
            "*?[a]{b,c}",
        ];
        for word in hostile {
            let line = format!("printf '%s' {}", quote(word));
            let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{line}");
        }
        let out = Command::new("sh").arg("-c").arg(format!("printf '%s' {}", quote("~/bin/corral"))).output().unwrap();
        let home = std::env::var("HOME").unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{home}/bin/corral"));
    }
}
