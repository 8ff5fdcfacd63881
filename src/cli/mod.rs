//! Argument parsing and dispatch. One file per verb; this one maps errors to
//! messages and exit codes in one place.

mod abort;
mod about;
mod colour;
mod diff;
mod discard;
mod doctor;
mod du;
mod hosts;
mod launch;
mod ls;
mod merge;
mod pause;
mod presets;
mod prune;
mod relaunch;
mod reply;
mod rm;
mod search;
mod show;
mod table;
mod tail;
mod wait;
mod watch;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use corral::queue::ShepherdCommand;

/// Exit code for errors (bad input, unknown run, store failure).
pub const EXIT_ERROR: i32 = 2;

/// Run coding agents in the background, supervised to a truthful end.
#[derive(Debug, Parser)]
#[command(name = "corral", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `corral presets` does besides listing.
#[derive(Debug, Subcommand)]
enum PresetsAction {
    /// Trust the project's presets that run a command, a setup or
    /// arguments of their own, as their files are now (a changed file is
    /// asked about again). Read them first: they are the repository's code.
    Trust {
        /// The project folder (default: the current one).
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the presets in effect (and files that could not be used).
    Presets {
        #[command(subcommand)]
        action: Option<PresetsAction>,
        /// Find project presets from this folder (default: the current one).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Launch a preset with a task in the background.
    Launch(launch::Args),
    /// List runs, newest first.
    Ls {
        /// Every run, cleared ones too (default: the latest 20 not cleared).
        #[arg(long)]
        all: bool,
        /// The latest N runs.
        #[arg(short = 'n', long = "lines", value_name = "N")]
        count: Option<usize>,
        /// Only runs with this status (repeatable: queued, starting,
        /// running, waiting, paused, completed, failed, aborted, lost).
        #[arg(long)]
        status: Vec<corral::RunStatus>,
        /// Only runs of this preset.
        #[arg(long)]
        preset: Option<String>,
        /// Only runs launched in this folder or below it.
        #[arg(long, value_name = "DIR", conflicts_with = "here")]
        cwd: Option<PathBuf>,
        /// Only runs launched in the current folder or below it.
        #[arg(long)]
        here: bool,
        /// Only runs created since: a time (RFC 3339) or an age (`2h`, `3d`).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only runs of this host of config.toml (`local`: this machine's).
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one run: status, result, usage, timestamps.
    Show {
        /// Run id (or a unique prefix).
        run: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's transcript.
    Tail {
        /// Run ids (or unique prefixes); several are interleaved by time,
        /// each line with its run's id.
        #[arg(required = true)]
        runs: Vec<String>,
        /// The last N lines of each run, or `all` (default 10; with
        /// --since, all since then).
        #[arg(short = 'n', long = "lines", value_name = "N|all")]
        lines: Option<String>,
        /// Show when each line came.
        #[arg(short, long)]
        timestamps: bool,
        /// Only what came since: a time (RFC 3339) or an age (`10m`, `2h`).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Keep printing until every run ends; exit 0 if all completed, 1
        /// otherwise (as `wait`).
        #[arg(short, long)]
        follow: bool,
        /// One JSON object per line: {"id", "at", "kind", "text"}; with
        /// --follow, one per run at the end ({"id", "status", ...}).
        #[arg(long)]
        json: bool,
    },
    /// Block until runs end. Exit 0: all completed; 1: any other end; 124: timed out.
    Wait {
        /// Run ids (or unique prefixes).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Give up after this many seconds.
        #[arg(long)]
        timeout: Option<f64>,
        /// Print JSON (an array of run objects).
        #[arg(long)]
        json: bool,
    },
    /// Freeze runs: every process stopped, clocks stopped, no slot held.
    Pause {
        /// Run ids (or unique prefixes).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Print JSON (an array of run objects).
        #[arg(long)]
        json: bool,
    },
    /// Thaw paused runs (each takes a slot back before any queued run).
    Resume {
        /// Run ids (or unique prefixes).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Print JSON (an array of run objects).
        #[arg(long)]
        json: bool,
    },
    /// Stop runs and every process they started.
    Abort {
        /// Run ids (or unique prefixes).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Print JSON (an array of run objects).
        #[arg(long)]
        json: bool,
    },
    /// Show what a run with a worktree changed: its commits, uncommitted and untracked files.
    Diff {
        /// Run id (or a unique prefix).
        run: String,
        /// Files with added and removed line counts only.
        #[arg(long)]
        stat: bool,
        /// Print JSON: files with counts (and the diff, without --stat).
        #[arg(long)]
        json: bool,
    },
    /// Bring a run's changes into the branch it started from, as one commit.
    Merge {
        /// Run id (or a unique prefix).
        run: String,
        /// Keep the agent's commits (a merge commit) instead of one commit.
        #[arg(long)]
        no_squash: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a run's worktree and its branch.
    Discard {
        /// Run id (or a unique prefix).
        run: String,
        /// Print the run as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Launch a run again: the same preset, task, folder, model, worktree
    /// choice and environment.
    Relaunch {
        /// Run id (or a unique prefix).
        run: String,
        /// Edit the task first, in $VISUAL or $EDITOR.
        #[arg(long)]
        edit: bool,
        /// Print the new run as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Say one more thing to a run's agent, in a new turn of its own session.
    Reply(reply::Args),
    /// Remove ended runs for good, with the runs they launched: rows,
    /// transcripts, folders, and worktrees holding nothing unmerged.
    Rm {
        /// Run ids (or unique prefixes).
        #[arg(required = true)]
        runs: Vec<String>,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Where Corral's disk space goes: database, run folders, worktrees,
    /// and the largest runs.
    Du {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove ended runs older than an age (as `rm`, top-level runs with
    /// the runs they launched).
    Prune {
        /// How long ago they ended: 30d, 12h (default: `[retention]` of
        /// config.toml, applied now).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
        /// Only runs with this status (repeatable).
        #[arg(long)]
        status: Vec<corral::RunStatus>,
        /// Only runs of this preset.
        #[arg(long)]
        preset: Option<String>,
        /// Say what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every change to a run as it happens, each with the store's change
    /// number (never one missed); `--since N` first sends each run changed
    /// after change N (0: every run).
    Watch {
        /// One JSON object per line: {"seq", "run"}, {"seq", "removed"},
        /// and {"caught_up": N} once the changes before now are sent.
        #[arg(long)]
        json: bool,
        /// Start after this change number.
        #[arg(long, value_name = "SEQ")]
        since: Option<i64>,
        /// Stop once caught up (what a one-off catch-up reads).
        #[arg(long, hide = true)]
        until_caught_up: bool,
    },
    /// This machine as Corral sees it: version, OS, runs, latest change.
    About {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The other machines runs are launched on (`[hosts.NAME]` in
    /// config.toml), each asked now: reachable, version, runs.
    Hosts {
        #[command(subcommand)]
        action: Option<hosts::Action>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Search tasks, results and transcripts.
    Search {
        /// Words to find.
        #[arg(required = true)]
        text: Vec<String>,
        /// Only this machine's runs (not the hosts of config.toml).
        #[arg(long)]
        local: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Say what works on this machine (containment, desktop, agent CLIs and
    /// their sign-in, sandboxes, git, the store, settings) and how to fix
    /// what does not. Exit 1 if something fails.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve Corral's tools to an agent over MCP on stdio.
    Mcp,
    /// Print a shell completion script: `corral completions bash >
    /// ~/.local/share/bash-completion/completions/corral`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `corral man | man -l -`.
    Man,
    /// Supervise one run (started by `launch`; not for direct use).
    #[command(hide = true)]
    Shepherd {
        /// The run to supervise.
        run: String,
    },
    /// Carry out a command another machine's Corral sent over SSH, its
    /// words on standard input where no login shell reads them (not for
    /// direct use).
    #[command(hide = true)]
    RemoteExec,
}

/// The command another machine's Corral sent (see `remote-exec`), read
/// from standard input, with its `CORRAL_HOME` set; else the exit code of
/// its refusal. Both outputs start with `remote::BEGIN`: a login shell's
/// banner before it is not read as the answer.
fn remote_command() -> Result<Cli, i32> {
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

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let mut cli = Cli::parse();
    if let Command::RemoteExec = &cli.command {
        cli = match remote_command() {
            Ok(cli) => cli,
            Err(code) => return code,
        };
    }
    // Before logging, a store or a thread: the launched run's shepherd is a
    // copy of this process, not a second program start.
    let forked = match &cli.command {
        Command::Launch(args) if args.is_local() => corral::shepherd::forked::fork_ahead(),
        _ => None,
    };
    init_logging(matches!(cli.command, Command::Shepherd { .. }));
    match dispatch(cli.command, forked) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            eprintln!("corral: {}", message(&e));
            EXIT_ERROR
        }
    }
}

fn dispatch(command: Command, forked: Option<corral::queue::Handoff>) -> anyhow::Result<i32> {
    // Generated from the command line's own definition; no store needed.
    match &command {
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "corral",
                &mut std::io::stdout(),
            );
            return Ok(0);
        }
        Command::Man => {
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut std::io::stdout().lock())?;
            return Ok(0);
        }
        _ => {}
    }
    let home = corral::caller::home()?;
    if let Command::Shepherd { run } = &command {
        corral::shepherd::shepherd(&home, run).with_context(|| format!("shepherd of run {run}"))?;
        return Ok(0);
    }
    if let Command::Mcp = &command {
        corral::mcp::serve_stdio(home)?;
        return Ok(0);
    }
    // Before the store is opened: a store that cannot be is a finding.
    if let Command::Doctor { json } = &command {
        return doctor::run(&home, *json, &mut std::io::stdout().lock());
    }
    let shepherd = ShepherdCommand::current_exe().context("finding the corral executable")?;
    let mut store = corral::heal::open_healed(&home, &shepherd)?;
    let shepherd = shepherd.with_forked(forked);
    // A verb on runs of another host is that host's to carry out.
    if let Some(host) = remote_target(&home, &mut store, &command)? {
        if let Command::Wait { runs, timeout, json } = &command {
            return remote_wait(&home, &host, runs, *timeout, *json);
        }
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        return match (remote_verb(&home, &host, &args), &command) {
            // Unreachable: the run as last seen, said so.
            (Err(e), Command::Show { run, json }) if e.downcast_ref::<corral::remote::SshError>().is_some() => {
                let Some(seen) = store.find_remote_run(run)? else { return Err(e) };
                eprintln!("corral: {e}; the run as last seen:");
                show::print(&store, &seen, *json, &mut std::io::stdout().lock())
            }
            (result, _) => result,
        };
    }
    let mut out = std::io::stdout().lock();
    let code = match command {
        Command::Presets { action: Some(PresetsAction::Trust { dir }), .. } => {
            presets::trust(&mut store, dir, &mut out)?
        }
        Command::Presets { action: None, cwd, json } => presets::run(&store, cwd, json, &mut out)?,
        Command::Launch(args) => launch::run(&home, &mut store, args, &shepherd, &mut out)?,
        Command::Ls { all, count, status, preset, cwd, here, since, host, json } => {
            let folder = match (cwd, here) {
                (Some(dir), _) => Some(std::path::absolute(&dir).unwrap_or(dir)),
                (None, true) => Some(corral::launch::working_folder()?),
                (None, false) => None,
            };
            let filter = corral::store::RunFilter {
                include_dismissed: all,
                limit: if all && count.is_none() { None } else { Some(count.unwrap_or(ls::DEFAULT_COUNT)) },
                statuses: status,
                preset,
                folder: folder.map(|f| f.to_string_lossy().into_owned()),
                created_since: since.as_deref().map(since_arg).transpose()?,
                ..Default::default()
            };
            ls::run(&home, &mut store, &filter, host.as_deref(), json, &mut out)?
        }
        Command::Show { run, json } => show::run(&mut store, &run, json, &mut out)?,
        Command::Tail { runs, lines, timestamps, since, follow, json } => {
            let mut options = tail_options(lines.as_deref(), timestamps, since.as_deref(), follow)?;
            options.json = json;
            tail::run(&mut store, &runs, &options, &shepherd, &mut out)?
        }
        Command::Wait { runs, timeout, json } => wait::run(&mut store, &runs, timeout, json, &shepherd, &mut out)?,
        Command::Abort { runs, json } => abort::run(&mut store, &runs, json, &shepherd, &mut out)?,
        Command::Pause { runs, json } => pause::run(&mut store, &runs, true, json, &shepherd, &mut out)?,
        Command::Resume { runs, json } => pause::run(&mut store, &runs, false, json, &shepherd, &mut out)?,
        Command::Diff { run, stat, json } => diff::run(&mut store, &run, stat, json, &mut out)?,
        Command::Merge { run, no_squash, json } => merge::run(&mut store, &run, no_squash, json, &mut out)?,
        Command::Discard { run, json } => discard::run(&mut store, &run, json, &mut out)?,
        Command::Reply(args) => reply::run(&mut store, args, &shepherd, &mut out)?,
        Command::Relaunch { run, edit, json } => relaunch::run(&mut store, &run, edit, json, &shepherd, &mut out)?,
        Command::Du { json } => du::run(&store, json, &mut out)?,
        Command::Rm { runs, dry_run, json } => rm::run(&mut store, &runs, dry_run, json, &mut out)?,
        Command::Prune { older_than, status, preset, dry_run, json } => {
            let rule = prune::Rule { older_than, status, preset };
            prune::run(&mut store, rule, dry_run, json, &mut out)?
        }
        Command::Search { text, local, json } => search::run(&store, &text.join(" "), local, json, &mut out)?,
        Command::Watch { json, since, until_caught_up } => {
            watch::run(&mut store, watch::Options { json, since, until_caught_up }, &shepherd, &mut out)?
        }
        Command::About { json } => about::run(&store, json, &mut out)?,
        Command::Hosts { action: None, json } => hosts::list(&home, &store, json, &mut out)?,
        Command::Hosts { action: Some(action), .. } => hosts::act(&home, action, &mut out)?,
        Command::Mcp
        | Command::Shepherd { .. }
        | Command::RemoteExec
        | Command::Completions { .. }
        | Command::Man
        | Command::Doctor { .. } => {
            unreachable!("handled above")
        }
    };
    out.flush()?;
    Ok(code)
}

/// The host whose runs `command` names, if it names runs of another host;
/// an error if it mixes machines.
fn remote_target(home: &corral::Home, store: &mut corral::Store, command: &Command) -> anyhow::Result<Option<String>> {
    let ids: Vec<&String> = match command {
        Command::Show { run, .. }
        | Command::Diff { run, .. }
        | Command::Merge { run, .. }
        | Command::Discard { run, .. }
        | Command::Relaunch { run, .. } => vec![run],
        Command::Tail { runs, .. }
        | Command::Wait { runs, .. }
        | Command::Abort { runs, .. }
        | Command::Pause { runs, .. }
        | Command::Resume { runs, .. }
        | Command::Rm { runs, .. } => runs.iter().collect(),
        Command::Reply(args) => vec![args.run()],
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
fn remote_verb(home: &corral::Home, host: &str, args: &[std::ffi::OsString]) -> anyhow::Result<i32> {
    let config = corral::config::Config::load(home)?;
    let host = config.host(host)?;
    let ssh = corral::remote::Ssh::new(home, host);
    // Standard input carries only the command: ssh never reads the
    // caller's (a script's `while read` loop keeps its lines).
    let mut child = ssh.spawn_corral(args, None, std::process::Stdio::piped(), std::process::Stdio::piped())?;
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut said = Vec::new();
            let _ = std::io::Read::read_to_end(&mut err, &mut said);
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
    if let Some(e) = ssh.failure(status.code(), &said) {
        return Err(e.into());
    }
    if json {
        std::io::stdout().write_all(&with_host(&printed, &host.name))?;
    }
    std::io::stderr().write_all(corral::remote::after_banner(&said))?;
    Ok(status.code().unwrap_or(EXIT_ERROR))
}

/// Copies `from` to `to` as it comes, each piece flushed.
fn pass_on(from: &mut impl std::io::BufRead, to: &mut impl Write) -> std::io::Result<()> {
    loop {
        let piece = from.fill_buf()?;
        if piece.is_empty() {
            return Ok(());
        }
        let n = piece.len();
        to.write_all(piece)?;
        to.flush()?;
        from.consume(n);
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
fn remote_wait(
    home: &corral::Home,
    host: &str,
    runs: &[String],
    timeout: Option<f64>,
    json: bool,
) -> anyhow::Result<i32> {
    use std::time::{Duration, Instant};
    let deadline = match timeout {
        Some(t) if !(t.is_finite() && t >= 0.0) => anyhow::bail!("--timeout {t}: write a number of seconds"),
        Some(t) => Some(Instant::now() + Duration::try_from_secs_f64(t).unwrap_or(corral::time::LONGEST)),
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
        match remote_verb(home, host, &args) {
            Err(e) if is_unreachable(&e) => {
                if deadline.is_some_and(|at| Instant::now() >= at) {
                    eprintln!("corral: {e}; the wait timed out");
                    return Ok(wait::EXIT_TIMEOUT);
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

/// Prints one JSON document.
fn print_json(out: &mut impl Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// The error and its causes, each said once: Corral's errors already name
/// their cause in their message.
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

/// The terminal's width, if output goes to one.
fn terminal_width() -> Option<usize> {
    corral::process::terminal_width()
}

/// `tail`'s options from the command line, each checked.
fn tail_options(
    lines: Option<&str>,
    timestamps: bool,
    since: Option<&str>,
    follow: bool,
) -> anyhow::Result<tail::Options> {
    let lines = match lines {
        Some("all") => None,
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|_| anyhow::anyhow!("-n {n} is not a number of lines: write e.g. -n 50, or -n all"))?,
        ),
        None if since.is_some() => None,
        None => Some(tail::DEFAULT_LINES),
    };
    let since = since.map(since_arg).transpose()?;
    Ok(tail::Options { lines, timestamps, since, follow, json: false })
}

/// `--since`: a time (RFC 3339) or an age before now (`10m`, `2h`), as the
/// store's time text.
fn since_arg(text: &str) -> anyhow::Result<String> {
    if let Some(at) = corral::time::parse(text) {
        return Ok(corral::time::format(at));
    }
    let too_long = || anyhow::anyhow!("--since {text} is too long ago");
    let age = humantime::parse_duration(text)
        .map_err(|_| anyhow::anyhow!("--since {text} is neither a time (2026-11-23T10:00:00Z) nor an age (10m, 2h)"))?;
    let age = chrono::Duration::from_std(age).map_err(|_| too_long())?;
    Ok(corral::time::format(corral::time::now().checked_sub_signed(age).ok_or_else(too_long)?))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == BrokenPipe)
            // JSON is written through serde_json, which wraps the error.
            || cause.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind) == Some(BrokenPipe)
    })
}

fn init_logging(shepherd: bool) {
    if shepherd {
        corral::logging::init(corral::shepherd::LOG_LEVEL);
    } else {
        corral::logging::init_for_command();
    }
}
