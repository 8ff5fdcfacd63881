//! Running `corral` on a host with the user's own OpenSSH: their keys,
//! agent, `~/.ssh/config` and known hosts, one multiplexed connection per
//! host (ControlMaster), never a prompt (BatchMode), host key checking as
//! the user's SSH configures it.
//!
//! SSH joins the remote command's words into one line for the user's login
//! shell there, which may be sh, bash, zsh, fish or csh, each quoting
//! differently. So no word of a command crosses that shell: the line is
//! always `exec CORRAL remote-exec`, `CORRAL` a plain path (checked in
//! config.toml), and the command's words (and the remote `CORRAL_HOME`)
//! cross first on standard input, length first ([`read_payload`]), so no
//! argument limit applies; what the command itself reads (a task) follows,
//! byte for byte. A login shell that prints a banner before the command
//! runs cannot garble the answer: the remote Corral starts both of its
//! outputs with [`BEGIN`], and what came before it is dropped here. Each
//! host entry has a connection of its own, its socket in a short private
//! folder.

use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use super::words::quote;
use crate::home::config::HostConfig;
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

/// What the remote `corral remote-exec` prints first on its standard
/// output and error: whatever a login shell printed before (a banner) ends
/// there.
pub const BEGIN: &[u8] = b"\x1ecorral-remote-exec\x1e\n";

/// The longest command payload read (the words of one command line).
const PAYLOAD_AT_MOST: usize = 64 << 20;

/// A host's `ssh` invocations.
#[derive(Debug, Clone)]
pub struct Ssh {
    host: HostConfig,
    /// Where the control sockets live (see [`socket_folder`]).
    sockets: PathBuf,
    /// The installation's data folder: its entries' sockets are its own.
    installation: PathBuf,
    /// Seconds to wait for a connection.
    connect_timeout: u32,
    /// The longest a command there may take to answer (a host whose
    /// connection is up and whose `corral` never answers); `None`: as
    /// long as it takes (a wait without a timeout).
    answer_within: Option<std::time::Duration>,
}

/// How long a command there has to answer, unless told otherwise.
pub const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// The most a command there may print that is kept: a host that prints
/// without end is cut off, never followed into memory.
const MOST_KEPT: u64 = 64 << 20;

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
        "host '{host}' ({dest}): its host key is not known or changed: run `{login}` once and check the key; \
         if it changed on purpose, forget the old one first (ssh-keygen -R '{known}') (Corral never turns host \
         key checking off)"
    )]
    HostKey { host: String, dest: String, login: String, known: String },
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
    /// The `corral` there predates this one's way of sending commands.
    #[error(
        "host '{host}' has an older corral ({corral}) that cannot read this one's commands: install this version \
         there (on a machine alike: scp \"$(command -v corral)\" {dest}:.local/bin/corral; `corral hosts add … \
         --install` does it)"
    )]
    OtherCorral { host: String, dest: String, corral: String },
    /// Any other failure of `ssh` (exit 255), with what it said.
    #[error("host '{host}' ({dest}): ssh failed: {detail}")]
    Failed { host: String, dest: String, detail: String },
}

impl SshError {
    /// True when the host could not be reached at all (as opposed to a
    /// refusal that waiting will not fix).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, SshError::Unreachable { .. })
    }

    /// True if the command may have run there before the failure: the
    /// connection was up and then dropped (or ssh failed some other way),
    /// as opposed to one that never connected.
    pub fn may_have_run(&self) -> bool {
        const DROPPED: [&str; 4] = ["closed by remote host", "Connection closed", "Broken pipe", "not responding"];
        match self {
            SshError::Failed { .. } => true,
            SshError::Unreachable { detail, .. } => DROPPED.iter().any(|s| detail.contains(s)),
            _ => false,
        }
    }
}

impl Ssh {
    /// The invocations of `host` of the installation `home`.
    pub fn new(home: &Home, host: &HostConfig) -> Ssh {
        Ssh {
            host: host.clone(),
            sockets: socket_folder(),
            installation: home.data_dir().to_path_buf(),
            connect_timeout: CONNECT_TIMEOUT_SECONDS,
            answer_within: Some(ANSWER_WITHIN),
        }
    }

    /// This host entry's control socket: one per entry of one installation
    /// (two entries for `user@name` behind two jump hosts are two machines),
    /// a short name in a short folder (a socket path has at most 108 bytes).
    fn socket(&self) -> PathBuf {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.installation.as_os_str().as_encoded_bytes());
        hash.update([0]);
        hash.update(self.host.name.as_bytes());
        let id: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        self.sockets.join(id)
    }

    /// The same, giving up on a connection after `seconds` (a look that
    /// must not hold a command up).
    pub fn connecting_within(mut self, seconds: u32) -> Ssh {
        self.connect_timeout = seconds;
        self
    }

    /// The same, its commands given `within` to answer (`None`: as long as
    /// they take).
    pub fn answering_within(mut self, within: Option<std::time::Duration>) -> Ssh {
        self.answer_within = within;
        self
    }

    /// The host's configuration.
    pub fn host(&self) -> &HostConfig {
        &self.host
    }

    /// Starts `corral ARGS…` there with the remote `CORRAL_HOME`, whatever
    /// the login shell (`ssh … HOST -- exec CORRAL remote-exec`, the words
    /// on standard input), then `input` on its standard input, which is
    /// closed after it: no caller's input is ever read by ssh. Its output
    /// starts with what a login shell printed, up to [`BEGIN`] (see
    /// [`skip_banner`] and [`after_banner`]).
    pub fn spawn_corral(
        &self,
        args: &[OsString],
        input: Option<&[u8]>,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<Child, SshError> {
        let mut command = self.line(&format!("exec {} remote-exec", self.host.corral));
        command.stdin(Stdio::piped()).stdout(stdout).stderr(stderr);
        crate::process::die_with_parent(&mut command);
        let mut child = command.spawn().map_err(|e| SshError::NoClient(e.to_string()))?;
        let payload = encode_payload(self.host.home.as_deref(), args);
        if let Some(mut stdin) = child.stdin.take() {
            // A remote end that stops reading early fails on its own, in
            // its words (its exit status and standard error).
            let _ = stdin
                .write_all(format!("{:016x}", payload.len()).as_bytes())
                .and_then(|()| stdin.write_all(payload.as_bytes()))
                .and_then(|()| stdin.write_all(input.unwrap_or_default()));
        }
        Ok(child)
    }

    /// `ssh … HOST -- WORDS` for a fixed command of Corral's own (each word
    /// quoted for a POSIX shell: never a word from the user or an agent).
    pub fn shell_line(&self, words: &[OsString]) -> Command {
        self.line(&words.iter().map(|w| quote(&w.to_string_lossy())).collect::<Vec<_>>().join(" "))
    }

    /// `ssh … HOST -- LINE`.
    fn line(&self, line: &str) -> Command {
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
            .arg(if within_a_run() { "ControlMaster=no" } else { "ControlMaster=auto" })
            .arg("-o")
            .arg(format!("ControlPath={}", self.socket().display()))
            .arg("-o")
            .arg("ControlPersist=60");
        if let Some(port) = self.host.port {
            command.arg("-p").arg(port.to_string());
        }
        if let Some(key) = &self.host.identity_file {
            command.arg("-i").arg(expand_local_home(key));
        }
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
        use std::io::Read;
        let mut child = self.spawn_corral(args, input, Stdio::piped(), Stdio::piped())?;
        // Each stream read on a thread of its own, a bounded amount kept
        // (the rest read and dropped, so the host never blocks on a pipe).
        let reader = |stream: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                if let Some(mut stream) = stream {
                    let _ = (&mut stream).take(MOST_KEPT).read_to_end(&mut kept);
                    let _ = std::io::copy(&mut stream, &mut std::io::sink());
                }
                kept
            })
        };
        let out = reader(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
        let err = reader(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
        // Held by a pidfd while unreaped: ended at the deadline, it is this
        // very ssh.
        let held = crate::process::ProcessId::of(child.id() as i32)
            .and_then(|p| crate::process::PidFd::open(p).ok().flatten());
        let (done, ended) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(child.wait());
        });
        let waited = match self.answer_within {
            Some(within) => ended.recv_timeout(within).ok(),
            None => ended.recv().ok(),
        };
        let status = match waited {
            Some(status) => status.map_err(|e| SshError::NoClient(e.to_string()))?,
            None => {
                // Connected and silent: ended here (its connection goes
                // with it), said as a host that does not answer.
                if let Some(held) = &held {
                    let _ = held.signal(crate::process::Sig::Kill);
                }
                let within = self.answer_within.unwrap_or_default().as_secs();
                return Err(SshError::Unreachable {
                    host: self.host.name.clone(),
                    dest: self.host.ssh.clone(),
                    detail: format!("its corral did not answer within {within} s (not responding)"),
                });
            }
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        Ok(Output { status, stdout: after_banner(&stdout).to_vec(), stderr: after_banner(&stderr).to_vec() })
    }

    /// What went wrong, if ssh (exit 255) or the remote shell (127: no
    /// such command) failed; `None` when the remote `corral` ran.
    pub fn failure(&self, code: Option<i32>, stderr: &[u8]) -> Option<SshError> {
        let said = String::from_utf8_lossy(after_banner(stderr));
        let host = self.host.name.clone();
        let dest = self.host.ssh.clone();
        match code {
            Some(127) => Some(SshError::NoCorral { host, dest, corral: self.host.corral.clone() }),
            Some(2) if said.contains("'remote-exec'") => {
                Some(SshError::OtherCorral { host, dest, corral: self.host.corral.clone() })
            }
            Some(255) | None => {
                let detail = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no message").trim().to_string();
                Some(if said.contains("Could not resolve hostname") {
                    SshError::UnknownName { host, dest }
                } else if said.contains("Host key verification failed")
                    || said.contains("HOST IDENTIFICATION HAS CHANGED")
                {
                    let name = dest.rsplit('@').next().unwrap_or(&dest).to_string();
                    let (login, known) = match self.host.port {
                        Some(port) => (format!("ssh -p {port} {dest}"), format!("[{name}]:{port}")),
                        None => (format!("ssh {dest}"), name),
                    };
                    SshError::HostKey { host, dest, login, known }
                } else if said.contains("Permission denied") {
                    SshError::Refused { host, dest }
                } else if said.contains("Connection refused")
                    || said.contains("timed out")
                    || said.contains("No route to host")
                    || said.contains("Network is unreachable")
                    || said.contains("Connection closed")
                    || said.contains("closed by remote host")
                    || said.contains("Connection reset")
                    || said.contains("not responding")
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

/// True in a process of a run (its agent's commands, its shepherd): it
/// uses the host's shared connection if one is up, and never starts it.
/// The connection is Corral's, not the run's: started inside, it would be
/// frozen by the run's pause (hanging every command to that host) and
/// killed with the run's processes (cutting every command over it).
fn within_a_run() -> bool {
    static WITHIN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WITHIN.get_or_init(|| {
        std::env::var_os(crate::run::env::RUN_ID_ENV).is_some()
            || std::env::var_os(crate::run::env::SHEPHERD_ENV).is_some()
            || crate::process::cgroup::run_of(std::process::id() as i32).is_some()
    })
}

/// `printed` after [`BEGIN`]: without what a login shell printed before
/// the remote Corral ran; all of it if Corral never began (ssh's or the
/// shell's own words).
pub fn after_banner(printed: &[u8]) -> &[u8] {
    match printed.windows(BEGIN.len()).position(|w| w == BEGIN) {
        Some(at) => &printed[at + BEGIN.len()..],
        None => printed,
    }
}

/// Reads a remote Corral's output up to and with [`BEGIN`], so that what
/// follows is its own; false if the output ended first.
pub fn skip_banner(reader: &mut impl BufRead) -> std::io::Result<bool> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(false);
        }
        // A banner without a newline ends on the same line.
        if line.ends_with(BEGIN) {
            return Ok(true);
        }
    }
}

/// The payload of `corral remote-exec`, read from `input` (its standard
/// input): 16 hex digits of length, then that many bytes, and not one byte
/// more, so the command reads the rest (a task) as sent.
pub fn read_payload(input: &mut impl Read) -> Result<String, String> {
    let mut length = [0u8; 16];
    input.read_exact(&mut length).map_err(|e| format!("no payload length: {e}"))?;
    let length = std::str::from_utf8(&length)
        .ok()
        .and_then(|l| usize::from_str_radix(l, 16).ok())
        .filter(|l| *l <= PAYLOAD_AT_MOST)
        .ok_or("a payload length that is not one")?;
    let mut payload = vec![0u8; length];
    input.read_exact(&mut payload).map_err(|e| format!("a payload cut short: {e}"))?;
    String::from_utf8(payload).map_err(|_| "a payload that is not text".to_string())
}

/// The command's words (and the remote `CORRAL_HOME`) as one plain word:
/// each field in hex, fields joined by `.`; the first is `h` and the home,
/// or `n` for none.
fn encode_payload(home: Option<&str>, args: &[OsString]) -> String {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut fields = vec![match home {
        Some(home) => format!("h{}", hex(home.as_bytes())),
        None => "n".to_string(),
    }];
    fields.extend(args.iter().map(|a| hex(a.as_encoded_bytes())));
    fields.join(".")
}

/// The remote `CORRAL_HOME` (a leading `~/` in this user's home) and the
/// command's words sent by another machine's Corral.
pub fn decode_payload(payload: &str) -> Result<(Option<OsString>, Vec<OsString>), String> {
    use std::os::unix::ffi::OsStringExt;
    let unhex = |field: &str| -> Result<OsString, String> {
        if field.len() % 2 != 0 {
            return Err("a field of odd length".into());
        }
        (0..field.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&field[i..i + 2], 16).map_err(|_| "not hex".to_string()))
            .collect::<Result<Vec<u8>, _>>()
            .map(OsString::from_vec)
    };
    let mut fields = payload.split('.');
    let home = match fields.next() {
        Some("n") => None,
        Some(h) if h.starts_with('h') => {
            let home = unhex(&h[1..])?;
            Some(match (home.to_str().and_then(|h| h.strip_prefix("~/")), std::env::var_os("HOME")) {
                (Some(rest), Some(mine)) => PathBuf::from(mine).join(rest).into_os_string(),
                _ => home,
            })
        }
        _ => return Err("no home field".into()),
    };
    let args = fields.map(unhex).collect::<Result<Vec<_>, _>>()?;
    Ok((home, args))
}

/// The folder of the control sockets: short and private, so that a long
/// `CORRAL_HOME`, or one with a space, never breaks a socket path
/// (`$XDG_RUNTIME_DIR/corral-ssh`, else `/tmp/corral-ssh-UID`).
fn socket_folder() -> PathBuf {
    let uid = nix::unistd::geteuid().as_raw();
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_absolute() && d.is_dir());
    let folder = match runtime {
        Some(dir) if dir.as_os_str().len() < 40 && !dir.to_string_lossy().contains(' ') => dir.join("corral-ssh"),
        _ => PathBuf::from(format!("/tmp/corral-ssh-{uid}")),
    };
    // Another user's folder (made first, in /tmp) is never used.
    let _ = crate::home::ensure_private_dir(&folder);
    if crate::trust::ownership::check(&folder).is_err() {
        return PathBuf::from(format!("/tmp/corral-ssh-{uid}-{}", std::process::id()));
    }
    folder
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
    }

    #[test]
    fn a_command_crosses_any_login_shell_as_plain_words_and_comes_back_whole() {
        let args: Vec<OsString> =
            ["reply", "RUN", "it's \\' (touch x) `id` $HOME ~/notes", ""].iter().map(OsString::from).collect();
        let payload = encode_payload(Some("~/data/corral"), &args);
        assert!(payload.chars().all(|c| c.is_ascii_hexdigit() || c == '.' || c == 'h' || c == 'n'), "{payload}");
        let (home, back) = decode_payload(&payload).unwrap();
        assert_eq!(back, args);
        let mine = std::env::var("HOME").unwrap();
        assert_eq!(home.unwrap(), OsString::from(format!("{mine}/data/corral")));
        assert_eq!(decode_payload(&encode_payload(None, &args)).unwrap().0, None);
    }

    #[test]
    fn the_payload_is_read_to_its_last_byte_and_not_one_more() {
        let payload = encode_payload(None, &["launch".into(), "p".into(), "-".into()]);
        let mut sent = format!("{:016x}{payload}", payload.len()).into_bytes();
        sent.extend_from_slice(b"the task\n");
        let mut input = std::io::Cursor::new(sent);
        assert_eq!(read_payload(&mut input).unwrap(), payload);
        let mut rest = String::new();
        input.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "the task\n");
        assert!(read_payload(&mut std::io::Cursor::new(b"zz")).is_err());
        assert!(read_payload(&mut std::io::Cursor::new(b"00000000000000ffshort")).is_err());
    }

    #[test]
    fn what_a_login_shell_printed_before_corral_began_is_dropped() {
        let mut printed = b"Welcome\n{\"half\"".to_vec();
        printed.extend_from_slice(BEGIN);
        printed.extend_from_slice(b"{\"id\": 1}\n");
        assert_eq!(after_banner(&printed), b"{\"id\": 1}\n");
        assert_eq!(after_banner(b"sh: corral: not found\n"), b"sh: corral: not found\n");
        let mut reader = std::io::Cursor::new(printed);
        assert!(skip_banner(&mut reader).unwrap());
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "{\"id\": 1}\n");
        assert!(!skip_banner(&mut std::io::Cursor::new(b"no corral here\n")).unwrap());
    }
}
