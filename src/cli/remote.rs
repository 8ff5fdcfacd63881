//! Verbs on another machine's runs, and this machine's side of a remote
//! command: the CLI's remote dispatch, apart from the verbs themselves.
//! `show`, `tail`, `wait`, `abort`… on a run of a host are carried out by
//! the host's own `corral` (`verb`); `wait` goes on through a connection
//! that drops (`wait_there`); `remote-exec` reads what another machine
//! sent (`command`).

use std::io::Write;

use clap::Parser;

use super::{Cli, Command, EXIT_ERROR};

/// The command another machine's Corral sent (see `remote-exec`), read
/// from standard input, with its `CORRAL_HOME` set; else the exit code of
/// its refusal. Both outputs start with `remote::BEGIN`: a login shell's
/// banner before it is not read as the answer.
pub(super) fn command() -> Result<Cli, i32> {
    let _ = std::io::stdout().write_all(corral::remote::BEGIN).and_then(|()| std::io::stdout().flush());
    let _ = std::io::stderr().write_all(corral::remote::BEGIN);
    // Through the process's one buffered standard input: what the payload
    // leaves in its buffer is what the command (a task) reads next.
    let payload = corral::remote::read_payload(&mut std::io::stdin().lock())
        .and_then(|payload| corral::remote::decode_payload(&payload));
    let (home, args) = payload.map_err(|e| {
        eprintln!("corral: a remote command that cannot be read ({e}): is the other machine's Corral this version?");
        EXIT_ERROR
    })?;
    if let Some(home) = home {
        // SAFETY: set before any thread starts; read by this process and
        // its children alone.
        unsafe { std::env::set_var(corral::home::HOME_ENV, home) };
    }
    let words = std::iter::once(std::ffi::OsString::from("corral")).chain(args);
    match Cli::try_parse_from(words) {
        Ok(Cli { command: Command::RemoteExec }) => {
            eprintln!("corral: a remote command cannot send another");
            Err(EXIT_ERROR)
        }
        Ok(cli) => Ok(cli),
        Err(e) => {
            let _ = e.print();
            Err(e.exit_code())
        }
    }
}

/// Carries out `command`, which names runs of `host`, there: its output and
/// exit code as if here. A `show` of a host that does not answer shows the
/// run as last seen, and says so.
pub(super) fn carry_out(
    home: &corral::Home,
    store: &mut corral::Store,
    host: &str,
    command: &Command,
) -> anyhow::Result<i32> {
    if let Command::Wait(args) = command {
        return wait_there(home, host, &args.runs, args.timeout, args.json);
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match (verb(home, host, &args), command) {
        // Unreachable: the run as last seen, said so.
        (Err(e), Command::Show(args)) if e.downcast_ref::<corral::remote::SshError>().is_some() => {
            let Some(seen) = store.find_remote_run(&args.run)? else { return Err(e) };
            eprintln!("corral: {e}; the run as last seen:");
            super::show::print(store, &seen, args.json, &mut std::io::stdout().lock())
        }
        (result, _) => result,
    }
}

/// The host whose runs `command` names, if it names runs of another host;
/// an error if it mixes machines.
pub(super) fn target(
    home: &corral::Home,
    store: &mut corral::Store,
    command: &Command,
) -> anyhow::Result<Option<String>> {
    let ids: Vec<&String> = match command {
        Command::Show(args) => vec![&args.run],
        Command::Diff(args) => args.runs.iter().collect(),
        Command::Conflicts(args) => args.runs.iter().collect(),
        Command::Merge(args) => args.runs.iter().collect(),
        Command::Discard(args) => args.runs.iter().collect(),
        Command::Relaunch(args) => vec![&args.run],
        Command::Tail(args) => args.runs.iter().collect(),
        Command::Wait(args) => args.runs.iter().collect(),
        Command::Abort(args) => args.runs.iter().collect(),
        Command::Pause(args) => args.runs.iter().collect(),
        Command::Resume(args) => args.runs.iter().collect(),
        Command::Rm(args) => args.runs.iter().collect(),
        Command::Reply(args) => vec![args.run()],
        Command::Allow(args) => vec![args.run()],
        _ => return Ok(None),
    };
    let mut hosts = Vec::new();
    for id in ids {
        let here = match store.find_run(id) {
            Ok(run) => Some(run),
            Err(corral::store::StoreError::UnknownRun(_)) => None,
            Err(e) => return Err(e.into()),
        };
        let there = match (store.find_remote_run(id), &here) {
            (Err(corral::store::StoreError::AmbiguousRun { prefix, matches }), Some(mine)) if mine.id != *id => {
                let matches = format!("{} here, {matches}", mine.id);
                return Err(corral::store::StoreError::AmbiguousRun { prefix, matches }.into());
            }
            (there, _) => there?,
        };
        // An exact id wins wherever it is; a prefix of runs on two machines
        // is ambiguous, never taken as this machine's.
        let host = match (here, there) {
            (Some(run), _) if run.id == *id => None,
            (_, Some(run)) if run.id == *id => Some(corral::remote::host_of(home, store, &run)?),
            (Some(mine), Some(theirs)) => {
                return Err(corral::store::StoreError::AmbiguousRun {
                    prefix: id.clone(),
                    matches: format!("{} here, {} on {}", mine.id, theirs.id, theirs.host.unwrap_or_default()),
                }
                .into())
            }
            (Some(_), None) => None,
            (None, Some(run)) => Some(corral::remote::host_of(home, store, &run)?),
            (None, None) => continue, // said by the verb itself, as unknown
        };
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    match hosts.as_slice() {
        [] | [None] => Ok(None),
        [Some(host)] => Ok(Some(host.clone())),
        _ => anyhow::bail!("these runs are on different machines: give the runs of one machine at a time"),
    }
}

/// Carries out `args` (a command line) on `host`, with its output and exit
/// code; a connection that fails says what to do.
fn verb(home: &corral::Home, host: &str, args: &[std::ffi::OsString]) -> anyhow::Result<i32> {
    let config = corral::home::config::Config::load(home)?;
    let host = config.host(host)?;
    let ssh = corral::remote::Ssh::new(home, host);
    // Standard input carries only the command: ssh never reads the
    // caller's (a script's `while read` loop keeps its lines).
    let mut child = ssh.spawn_corral(args, None, std::process::Stdio::piped(), std::process::Stdio::piped())?;
    // A host connected and silent is ended at the verb's deadline (said as
    // not responding, which a wait waits out), never waited for without
    // end.
    let silent = corral::remote::answer_within(args).map(|within| {
        let held = corral::process::ProcessId::of(child.id() as i32)
            .and_then(|p| corral::process::PidFd::open(p).ok().flatten());
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if let (Err(std::sync::mpsc::RecvTimeoutError::Timeout), Some(held)) = (stopped.recv_timeout(within), held)
            {
                let _ = held.signal(corral::process::Sig::Kill);
                return true;
            }
            false
        });
        (stop, watchdog)
    });
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            // What a host says is bounded: a megabyte kept, the rest read
            // and dropped (so its ssh never blocks on a full pipe).
            let mut said = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::Read::take(&mut err, 1 << 20), &mut said);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
            said
        })
    });
    // A run object in JSON says its host here, as everywhere; anything
    // else is passed on as it comes (`tail --follow`).
    let json =
        args.iter().any(|a| a == "--json") && matches!(args.first().and_then(|a| a.to_str()), Some("show" | "wait"));
    let mut printed = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        let mut reader = std::io::BufReader::new(stdout);
        if corral::remote::skip_banner(&mut reader)? {
            if json {
                std::io::Read::read_to_end(&mut reader, &mut printed)?;
            } else {
                pass_on(&mut reader, &mut std::io::stdout())?;
            }
        }
    }
    let status = child.wait()?;
    let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let timed_out = silent.is_some_and(|(stop, watchdog)| {
        let _ = stop.send(());
        watchdog.join().unwrap_or(false)
    });
    if timed_out {
        return Err(corral::remote::SshError::Unreachable {
            host: host.name.clone(),
            dest: host.ssh.clone(),
            detail: "its corral did not answer in time (not responding)".into(),
        }
        .into());
    }
    if let Some(e) = ssh.failure(status.code(), &said) {
        return Err(e.into());
    }
    if json {
        let shown = with_host(&printed, &host.name);
        std::io::stdout().write_all(super::table::printable(&String::from_utf8_lossy(&shown)).as_bytes())?;
    }
    let said = String::from_utf8_lossy(corral::remote::after_banner(&said)).into_owned();
    std::io::stderr().write_all(super::table::printable(&said).as_bytes())?;
    Ok(status.code().unwrap_or(EXIT_ERROR))
}

/// The longest piece of a host's output held before it is shown: a line
/// that never ends is shown in pieces, never kept whole.
const PIECE: usize = 64 * 1024;

/// Copies `from` (what a host printed) to `to` as it comes, line by line,
/// each flushed: escaped as every word another machine chose is (its
/// bytes cannot rewrite the terminal, set its title or its clipboard),
/// and held [`PIECE`] bytes at most.
fn pass_on(from: &mut impl std::io::BufRead, to: &mut impl Write) -> std::io::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = std::io::BufRead::read_until(&mut std::io::Read::take(&mut *from, PIECE as u64), b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(super::table::printable(&String::from_utf8_lossy(&line)).as_bytes())?;
        to.flush()?;
    }
}

/// `printed` (a run object, or a list of them, in JSON) with `host` as
/// each run's host; anything else as it is.
fn with_host(printed: &[u8], host: &str) -> Vec<u8> {
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(printed) else { return printed.to_vec() };
    let mut mark = |run: &mut serde_json::Value| {
        if let Some(run) = run.as_object_mut().filter(|r| r.contains_key("id")) {
            run.insert("host".into(), host.into());
        }
    };
    match &mut value {
        serde_json::Value::Array(runs) => runs.iter_mut().for_each(&mut mark),
        run => mark(run),
    }
    let mut out = serde_json::to_vec_pretty(&value).unwrap_or_else(|_| printed.to_vec());
    out.push(b'\n');
    out
}

/// `wait` on runs of `host`: waits there, and through a connection that
/// drops, waits for the host to answer again (saying so) until the runs
/// end or the timeout passes. The runs go on there meanwhile.
pub(super) fn wait_there(
    home: &corral::Home,
    host: &str,
    runs: &[String],
    timeout: Option<f64>,
    json: bool,
) -> anyhow::Result<i32> {
    use std::time::{Duration, Instant};
    let deadline = match timeout {
        Some(t) if !(t.is_finite() && t >= 0.0) => anyhow::bail!("--timeout {t}: write a number of seconds"),
        Some(t) => Some(Instant::now() + Duration::try_from_secs_f64(t).unwrap_or(corral::text::time::LONGEST)),
        None => None,
    };
    let mut pause = Duration::from_secs(1);
    loop {
        let mut args: Vec<std::ffi::OsString> = vec!["wait".into()];
        args.extend(runs.iter().map(Into::into));
        if let Some(at) = deadline {
            args.extend([
                "--timeout".into(),
                format!("{:.3}", at.saturating_duration_since(Instant::now()).as_secs_f64()).into(),
            ]);
        }
        if json {
            args.push("--json".into());
        }
        match verb(home, host, &args) {
            Err(e) if is_unreachable(&e) => {
                if deadline.is_some_and(|at| Instant::now() >= at) {
                    eprintln!("corral: {e}; the wait timed out");
                    return Ok(corral::verbs::wait::EXIT_TIMEOUT);
                }
                eprintln!("corral: {e}; waiting for it to answer again (the runs go on there)");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(30));
            }
            other => return other,
        }
    }
}

/// True if `e` says a host could not be reached (waiting may fix it).
fn is_unreachable(e: &anyhow::Error) -> bool {
    e.downcast_ref::<corral::remote::SshError>().is_some_and(corral::remote::SshError::is_unreachable)
}
