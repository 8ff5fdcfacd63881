//! Corral's own verbs from inside a sandbox, carried out outside it.
//!
//! Inside a sandbox Corral's data folder is read-only: an agent that could
//! write the store could widen its own sandbox, queue a run with another
//! preset for a process outside to start, or change the environment
//! another run starts with. Yet an agent launches, awaits and aborts runs
//! of its own, from its shell and over MCP. So every `corral` started
//! inside a sandbox hands its arguments, its folder and its standard
//! input, output and error to the run's shepherd over the run's
//! `corral.sock` ([`forward`]), and the shepherd's broker ([`Broker`])
//! runs that `corral` outside, as the run's own, with the run's
//! environment (the one it was launched with, never the agent's), and
//! tells the exit code back. Outside, such a process may do only what a
//! run's agent may ([`may_forward`]); a run it launches starts in the
//! sandbox of the run that asked (see `launch`).

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::process::{self, PidFd, ProcessId, Sig};

/// Set inside a sandbox: the socket its `corral` forwards through.
pub const SOCKET_ENV: &str = "CORRAL_BROKER";

/// Where the run's broker socket is inside its sandbox (its `/run` is its
/// own): the only broker socket it can reach.
pub const SOCKET_INSIDE: &str = "/run/corral/broker.sock";

/// Set by the broker on the `corral` it runs outside: the run it runs for.
const FORWARDED_ENV: &str = "CORRAL_FORWARDED";

/// Set by the broker: the descriptor the forwarded `corral` writes its
/// exit code to (the connection, at 3).
const EXIT_FD_ENV: &str = "CORRAL_EXIT_FD";

/// The descriptor the exit code is written to.
const EXIT_FD: i32 = 3;

/// The most `corral`s of one run carried out at once (each holds a thread
/// of the shepherd's while it runs: a `corral wait`, an MCP server).
const MAX_AT_ONCE: usize = 32;

/// How long a forwarded `corral` whose caller went away has after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// How long a forwarded `corral` whose caller went away may take to end
/// by itself before it is stopped: one that wrote its exit code is ending.
const ENDING: Duration = Duration::from_millis(100);

/// The longest request (arguments and folder) read.
const MAX_REQUEST: u64 = 1 << 20;

/// The socket in the run's folder a sandbox's `corral` forwards through.
pub fn socket_in(run_dir: &Path) -> PathBuf {
    run_dir.join("corral.sock")
}

/// What the sandbox's `corral` asks.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    /// Its arguments, after the program's name.
    args: Vec<String>,
    /// Its working folder (the same path outside: the sandbox binds the
    /// folders it shows where they are).
    cwd: String,
}

/// How the broker runs what it is asked.
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// The `corral` program.
    pub program: PathBuf,
    /// The run the forwarded `corral`s run for.
    pub run_id: String,
    /// Their environment: the run's own (what it was launched with).
    pub env: Vec<(OsString, OsString)>,
    /// Whether the run has a cgroup of its own: then a caller must be in it.
    pub cgroup: bool,
}

/// The shepherd's broker for one sandboxed run: listens on `corral.sock`
/// while the shepherd lives.
pub struct Broker {
    socket: PathBuf,
}

impl Broker {
    /// Listens on `socket` and carries out what comes, as `forwarding` says.
    pub fn start(socket: PathBuf, forwarding: Forwarding) -> io::Result<Broker> {
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        let forwarding = Arc::new(forwarding);
        let serving = Arc::new(AtomicUsize::new(0));
        std::thread::Builder::new().name("broker".into()).spawn(move || {
            for conn in listener.incoming().flatten() {
                let Some(slot) = Slot::take(&serving) else {
                    let _ = refuse(&conn, &format!("more than {MAX_AT_ONCE} corral commands of this run at once"));
                    continue;
                };
                let forwarding = Arc::clone(&forwarding);
                let _ = std::thread::Builder::new().name("broker-conn".into()).spawn(move || {
                    let _slot = slot;
                    if let Err(e) = serve(&conn, &forwarding) {
                        let _ = refuse(&conn, &e.to_string());
                    }
                });
            }
        })?;
        Ok(Broker { socket })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// One of the [`MAX_AT_ONCE`] requests carried out at once, given back
/// when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(serving: &Arc<AtomicUsize>) -> Option<Slot> {
        let taken = serving.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_AT_ONCE).then_some(n + 1));
        taken.ok().map(|_| Slot(Arc::clone(serving)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Tells the caller it was refused: its message, and exit code 2.
fn refuse(mut conn: &UnixStream, why: &str) -> io::Result<()> {
    conn.write_all(format!("refused {}\n", why.replace('\n', " ")).as_bytes())
}

/// Carries out one request: the caller's standard descriptors, then its
/// request; the `corral` it asks for runs until it exits (it writes its
/// exit code to the caller itself) or the caller goes away (then it is
/// stopped).
fn serve(conn: &UnixStream, forwarding: &Forwarding) -> io::Result<()> {
    // Only the run's own processes: its sandbox alone shows the socket,
    // and where the run has a cgroup the kernel says whose the caller is.
    if forwarding.cgroup {
        let peer = process::peer_pid(conn)?;
        let of = process::cgroup::run_of(peer);
        if of.as_deref() != Some(forwarding.run_id.as_str()) {
            return Err(io::Error::other(format!(
                "this socket carries out corral for run {} only, and the caller is not one of its processes",
                forwarding.run_id
            )));
        }
    }
    let fds = process::recv_fds(conn, 3)?;
    let [stdin, stdout, stderr]: [OwnedFd; 3] =
        fds.try_into().map_err(|_| io::Error::other("the caller sent no standard descriptors"))?;
    let mut line = String::new();
    BufReader::new(conn.take(MAX_REQUEST)).read_line(&mut line)?;
    let request: Request =
        serde_json::from_str(&line).map_err(|e| io::Error::other(format!("a request Corral cannot read: {e}")))?;
    let cwd = if Path::new(&request.cwd).is_dir() { request.cwd.as_str() } else { "/" };
    let mut command = Command::new(&forwarding.program);
    command
        .args(&request.args)
        .current_dir(cwd)
        .env_clear()
        .envs(forwarding.env.iter().map(|(k, v)| (k, v)))
        .env(FORWARDED_ENV, &forwarding.run_id)
        .env(crate::run::env::RUN_ID_ENV, &forwarding.run_id)
        .env(EXIT_FD_ENV, EXIT_FD.to_string())
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    let conn_fd = conn.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls: prctl,
    // dup2, fcntl.
    unsafe {
        command.pre_exec(move || {
            // Never outlives the shepherd (its run).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            let ok = match conn_fd == EXIT_FD {
                true => libc::fcntl(EXIT_FD, libc::F_SETFD, 0),
                false => libc::dup2(conn_fd, EXIT_FD),
            };
            if ok < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Never waited for here: the shepherd reaps every child of its own.
    let child = command.spawn()?;
    let exit = ProcessId::of(child.id() as i32).map(PidFd::open).transpose()?.flatten();
    drop(child);
    let mut sink = [0u8; 64];
    if let Some(exit) = &exit {
        // The caller goes (having read the exit code, or killed), or the
        // command ends first.
        loop {
            let ready = process::wait_readable(&[conn.as_fd(), exit.as_fd()], None)?;
            if ready[1] {
                break;
            }
            if ready[0] && !matches!((&*conn).read(&mut sink), Ok(n) if n > 0) {
                stop(exit);
                return Ok(());
            }
        }
    }
    // Ended: after its own exit code, if it wrote one (a process killed,
    // or that failed to start, did not), the caller is told it ended.
    (&*conn).write_all(b"ended\n")?;
    while matches!((&*conn).read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

/// Stops a forwarded `corral` whose caller went away, with what it
/// started in its process group, unless it is ending by itself.
fn stop(exit: &PidFd) {
    let ended = |within| process::wait_readable(&[exit.as_fd()], Some(within)).is_ok_and(|ready| ready[0]);
    if ended(ENDING) || !exit.process.is_alive() {
        return;
    }
    let _ = process::signal_group(exit.process.pid, Sig::Term);
    if !ended(STOP_GRACE) && exit.process.is_alive_or_zombie() {
        let _ = process::signal_group(exit.process.pid, Sig::Kill);
    }
}

/// The socket this process must forward through, if it is a `corral`
/// inside a sandbox: the one its sandbox names, or, where its agent
/// scrubbed the environment (Codex does, for MCP servers), the one every
/// sandbox has at [`SOCKET_INSIDE`], or its run's (found from its cgroup:
/// only a sandboxed run has one).
pub fn socket_for_this_process() -> Option<PathBuf> {
    if let Some(socket) = std::env::var_os(SOCKET_ENV).filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(socket));
    }
    let inside = Path::new(SOCKET_INSIDE);
    if inside.symlink_metadata().is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
        return Some(inside.to_path_buf());
    }
    let run = process::cgroup::run_of(std::process::id() as i32)?;
    let home = crate::run::caller::home().ok()?;
    Some(socket_in(&home.run_dir(&run))).filter(|socket| socket.exists())
}

/// Inside a sandbox: has the shepherd carry out `corral ARGS` outside it,
/// with this process's standard descriptors and folder, and returns its
/// exit code.
pub fn forward(socket: &Path, args: &[OsString]) -> i32 {
    let args = match read_here(args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("corral: {e}");
            return 2;
        }
    };
    match forwarded(socket, &args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "corral: cannot reach this run's shepherd at {} (it runs Corral outside the sandbox): {e}",
                socket.display()
            );
            2
        }
    }
}

fn forwarded(socket: &Path, args: &[OsString]) -> io::Result<i32> {
    let conn = UnixStream::connect(socket)?;
    let (stdin, stdout, stderr) = (io::stdin(), io::stdout(), io::stderr());
    let standard: [BorrowedFd<'_>; 3] = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    process::send_fds(&conn, &standard)?;
    let cwd = std::env::current_dir().map(|d| d.to_string_lossy().into_owned()).unwrap_or_else(|_| "/".into());
    let request = Request { args: args.iter().map(|a| a.to_string_lossy().into_owned()).collect(), cwd };
    let mut text = serde_json::to_string(&request).map_err(io::Error::other)?;
    text.push('\n');
    (&conn).write_all(text.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(&conn).read_line(&mut answer)?;
    let answer = answer.trim_end();
    if let Some(code) = answer.strip_prefix("exit ") {
        return code.parse().map_err(|_| io::Error::other(format!("an answer Corral cannot read: {answer}")));
    }
    if let Some(why) = answer.strip_prefix("refused ") {
        eprintln!("corral: {why}");
        return Ok(2);
    }
    eprintln!("corral: ended without an exit code (killed?)");
    Ok(1)
}

/// `args` with the file a launch's `--task-file` names read here, inside
/// the sandbox, as the agent may read it, and given as the task's words:
/// outside, the broker's `corral` would read it as the user (a denied key
/// would come back as the new run's task), so it reads none.
fn read_here(args: &[OsString]) -> io::Result<Vec<OsString>> {
    let words: Vec<&str> = args.iter().map(|a| a.to_str().unwrap_or("")).collect();
    let ends = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    let named = words[..ends].iter().enumerate().find_map(|(at, word)| match word.strip_prefix("--task-file") {
        Some("") => words.get(at + 1).map(|file| (at, 2, *file)),
        Some(rest) => rest.strip_prefix('=').map(|file| (at, 1, file)),
        None => None,
    });
    let Some((at, taken, file)) = named.filter(|(_, _, file)| *file != "-") else { return Ok(args.to_vec()) };
    if words.first() != Some(&"launch") || ends < words.len() {
        return Ok(args.to_vec());
    }
    let task = std::fs::read_to_string(file)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read the task file {file}: {e}")))?;
    let mut rewritten: Vec<OsString> = args[..at].to_vec();
    rewritten.extend(args[at + taken..].iter().cloned());
    rewritten.extend(["--".into(), task.into()]);
    Ok(rewritten)
}

/// What this process was given by the broker that runs it, taken out of
/// its environment (so nothing it starts inherits them): the run it runs
/// for, and where its exit code goes.
#[derive(Debug, Default)]
pub struct Forwarded {
    /// The run a sandbox's `corral` runs for, if this process is one.
    pub run: Option<String>,
    exit_fd: bool,
}

impl Forwarded {
    /// Reads and removes the broker's variables. Call first thing, while
    /// the process has one thread.
    pub fn take() -> Forwarded {
        let run = std::env::var(FORWARDED_ENV).ok().filter(|r| !r.is_empty());
        if let Some(run) = &run {
            crate::run::caller::works_for(run.clone());
        }
        let exit_fd = std::env::var(EXIT_FD_ENV).is_ok_and(|fd| fd == EXIT_FD.to_string());
        std::env::remove_var(FORWARDED_ENV);
        std::env::remove_var(EXIT_FD_ENV);
        if exit_fd {
            // Not passed on to what this process starts.
            // SAFETY: fcntl on a descriptor number; no memory is touched.
            unsafe { libc::fcntl(EXIT_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        Forwarded { run, exit_fd }
    }

    /// Tells the caller inside the sandbox this process's exit code.
    pub fn report(&self, code: i32) {
        if !self.exit_fd {
            return;
        }
        // SAFETY: descriptor 3 was handed to this process for this, and
        // stays open until it exits.
        let fd = unsafe { BorrowedFd::borrow_raw(EXIT_FD) };
        let _ = nix::unistd::write(fd, format!("exit {code}\n").as_bytes());
    }
}

/// Whether `verb` may be carried out for a sandbox's `corral`: what a run's
/// agent does with its own runs. Not what changes the user's repositories,
/// settings, schedules or other machines, nor Corral's hidden verbs.
pub fn may_forward(verb: &str) -> bool {
    matches!(
        verb,
        "launch"
            | "ls"
            | "show"
            | "tail"
            | "wait"
            | "abort"
            | "pause"
            | "resume"
            | "reply"
            | "diff"
            | "about"
            | "presets"
            | "mcp"
    )
}
