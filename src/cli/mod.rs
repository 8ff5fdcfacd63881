//! Argument parsing and dispatch. One file per verb; this one maps errors to
//! messages and exit codes in one place.

mod abort;
mod about;
mod allow;
mod colour;
mod conflicts;
mod diff;
mod discard;
mod doctor;
mod du;
mod hosts;
mod launch;
mod ls;
mod merge;
mod needs;
mod pause;
mod pr;
mod presets;
mod prune;
mod push;
mod relaunch;
mod remote;
mod reply;
mod rm;
mod schedule;
mod search;
mod show;
mod table;
mod tail;
mod top;
mod wait;
mod watch;

use std::io::Write;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use corral::upkeep::queue::ShepherdCommand;

/// Exit code for errors (bad input, unknown run, store failure).
pub const EXIT_ERROR: i32 = 2;

/// Run coding agents in the background, supervised to a truthful end.
#[derive(Debug, Parser)]
#[command(name = "corral", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// The command line of a verb run often and in crowds (`launch`,
    /// `wait`), parsed by a parser of that verb alone: clap builds every
    /// verb's arguments before it parses, 0.45 ms of each launch. Anything
    /// it does not take as is (help, a mistake) is left to the whole
    /// parser, which says it as ever.
    fn of_hot_verb(args: &[std::ffi::OsString]) -> Option<Cli> {
        use clap::{Args as _, FromArgMatches as _};
        let verb = match args.first()?.to_str()? {
            "launch" => launch::Args::augment_args(clap::Command::new("launch")),
            "wait" => wait::Args::augment_args(clap::Command::new("wait")),
            _ => return None,
        };
        if args.iter().any(|a| a == "-h" || a == "--help") {
            return None;
        }
        let parser = clap::Command::new("corral").subcommand(verb);
        let matches = parser.try_get_matches_from(std::iter::once("corral".into()).chain(args.iter().cloned())).ok()?;
        Some(Cli { command: Command::from_arg_matches(&matches).ok()? })
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the presets in effect (and files that could not be used).
    Presets(presets::Args),
    /// Launch a preset with a task in the background.
    Launch(launch::Args),
    /// List runs, newest first.
    Ls(ls::Args),
    /// What needs you: runs paused at a budget or a usage limit, failed,
    /// refused something, or retrying, and schedules that paused
    /// themselves; each with why and the command that answers it.
    Needs(needs::Args),
    /// What needs you, the runs and the selected run's transcript, live in
    /// the terminal; keys act on them (q quits).
    Top(top::Args),
    /// Show one run: status, result, usage, timestamps.
    Show(show::Args),
    /// Print a run's transcript.
    Tail(tail::Args),
    /// Block until runs end. Exit 0: all completed; 1: any other end; 124: timed out.
    Wait(wait::Args),
    /// Freeze runs: every process stopped, clocks stopped, no slot held.
    Pause(pause::Args),
    /// Thaw paused runs (each takes a slot back before any queued run).
    Resume(pause::ResumeArgs),
    /// Stop runs and every process they started.
    Abort(abort::Args),
    /// Show what runs with a worktree changed: their commits, uncommitted and
    /// untracked files (several: grouped by file, each diff marked with its run).
    Diff(diff::Args),
    /// Which runs' unmerged work changes the same lines, pair by pair,
    /// before anything is merged. Exit 1 if two conflict.
    Conflicts(conflicts::Args),
    /// Bring runs' changes into the branch they started from, one commit
    /// each, in order; refused before any is merged if two conflict.
    Merge(merge::Args),
    /// Open a pull request (GitHub: gh) or merge request (GitLab: glab)
    /// from a run's worktree: its work committed, its branch pushed; run
    /// again, it pushes to the same one.
    Pr(pr::Args),
    /// Remove a run's worktree and its branch.
    Discard(discard::Args),
    /// Launch a run again: the same preset, task, folder, model, worktree
    /// choice and environment.
    Relaunch(relaunch::Args),
    /// Say one more thing to a run's agent, in a new turn of its own session.
    Reply(reply::Args),
    /// Widen a sandboxed run's sandbox (`--write PATH`, `--host HOST`) and
    /// let its agent go on in its session.
    Allow(allow::Args),
    /// Remove ended runs for good, with the runs they launched: rows,
    /// transcripts, folders, and worktrees holding nothing unmerged.
    Rm(rm::Args),
    /// Presets launched by a clock: add, ls, show, pause, resume, rm,
    /// run-now, fire (a timer's), run (the firer without the tray).
    Schedule(schedule::Args),
    /// Pushes to your phone (`[push]` in config.toml): `test` one, or
    /// `listen` for answers and send what needs you without the tray.
    Push(push::Args),
    /// Where Corral's disk space goes: database, run folders, worktrees,
    /// and the largest runs.
    Du(du::Args),
    /// Remove ended runs older than an age (as `rm`, top-level runs with
    /// the runs they launched).
    Prune(prune::Args),
    /// Every change to a run as it happens, each with the store's change
    /// number (never one missed); `--since N` first sends each run changed
    /// after change N (0: every run).
    Watch(watch::Args),
    /// This machine as Corral sees it: version, OS, runs, latest change.
    About(about::Args),
    /// The other machines runs are launched on (`[hosts.NAME]` in
    /// config.toml), each asked now: reachable, version, runs.
    Hosts(hosts::Args),
    /// Search tasks, results and transcripts.
    Search(search::Args),
    /// Say what works on this machine (containment, desktop, agent CLIs and
    /// their sign-in, sandboxes, git, the store, settings) and how to fix
    /// what does not. Exit 1 if something fails.
    Doctor(doctor::Args),
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
    /// Keep launches warm: the launch template (started by `launch`; not
    /// for direct use; `launch_template = true` in config.toml turns it
    /// on).
    #[command(hide = true)]
    Template,
    /// Supervise one run (started by `launch`; not for direct use).
    #[command(hide = true)]
    Shepherd {
        /// The run to supervise.
        run: String,
    },
    /// Run a run's preset's `teardown` (started by a discard or `rm` of its
    /// worktree; not for direct use).
    #[command(hide = true)]
    Teardown {
        /// The run whose teardown runs.
        run: String,
    },
    /// Start the runs queued behind a usage limit at its reset (started by
    /// a heal that finds one; not for direct use).
    #[command(hide = true)]
    LimitWake,
    /// Carry out a command another machine's Corral sent over SSH, its
    /// words on standard input where no login shell reads them (not for
    /// direct use).
    #[command(hide = true)]
    RemoteExec,
    /// Inside a run's sandbox: hand its loopback listener to the shepherd's
    /// proxy, then become the agent (not for direct use).
    #[command(hide = true)]
    SandboxNet {
        /// The shepherd's socket.
        socket: std::path::PathBuf,
        /// The agent's program.
        program: std::ffi::OsString,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let forwarded = corral::sandbox::broker::Forwarded::take();
    let code = run(&forwarded);
    forwarded.report(code);
    code
}

fn run(forwarded: &corral::sandbox::broker::Forwarded) -> i32 {
    use corral::sandbox::broker;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let verb = args.first().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
    // Inside a sandbox, Corral is carried out by the run's shepherd, outside
    // (but its proxy's helper, which is what starts the agent there).
    if forwarded.run.is_none() && verb != "sandbox-net" {
        if let Some(socket) = broker::socket_for_this_process() {
            return broker::forward(&socket, &args);
        }
    }
    let refuse = |what: &str, run: &str| {
        eprintln!(
            "corral: {what} is not done from inside the sandbox of run {run}: it would reach past it. \
             Do it in your own terminal"
        );
        EXIT_ERROR
    };
    if let Some(run) = &forwarded.run {
        if !(verb.starts_with('-') || verb == "help" || broker::may_forward(&verb)) {
            return refuse(&format!("corral {verb}"), run);
        }
    }
    // Parsed here, so its own errors and `--help` end through `report`.
    let mut cli = match Cli::of_hot_verb(&args).map_or_else(Cli::try_parse, Ok) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if let (Some(run), Command::Launch(args)) = (&forwarded.run, &cli.command) {
        if !args.is_local() {
            return refuse("a launch on another machine", run);
        }
        // Read inside the sandbox, by the `corral` that forwarded it (see
        // `broker::forward`); read here, it would be read as the user.
        if args.task_file().is_some_and(|f| f != std::path::Path::new("-")) {
            return refuse("reading a --task-file outside the sandbox", run);
        }
    }
    if let Command::SandboxNet { socket, program, args } = &cli.command {
        let e = corral::sandbox::proxy::enter(socket, program, args);
        eprintln!("corral: cannot start {} in its sandbox: {e}", program.to_string_lossy());
        return EXIT_ERROR;
    }
    if let Command::RemoteExec = &cli.command {
        cli = match remote::command() {
            Ok(cli) => cli,
            Err(code) => return code,
        };
    }
    // A launch of a person's, at a terminal: the template's warm spare
    // records and supervises it, if one waits.
    if let (None, Command::Launch(args)) = (&forwarded.run, &mut cli.command) {
        if let Some(code) = launch::warm(args) {
            return code;
        }
    }
    // Before logging, a store or a thread: the launched run's shepherd is a
    // copy of this process, not a second program start.
    let forked = match &cli.command {
        Command::Launch(args) if args.is_local() => corral::shepherd::forked::fork_ahead(),
        _ => None,
    };
    init_logging(matches!(cli.command, Command::Shepherd { .. } | Command::Template));
    match dispatch(cli.command, forked) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            // An error may name what an agent chose (a file, a path, a
            // preset): it cannot rewrite the terminal.
            eprintln!("corral: {}", table::printable(&message(&e)));
            EXIT_ERROR
        }
    }
}

fn dispatch(command: Command, forked: Option<corral::upkeep::queue::Handoff>) -> anyhow::Result<i32> {
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
    let home = corral::run::caller::home()?;
    if let Command::Shepherd { run } = &command {
        corral::shepherd::shepherd(&home, run).with_context(|| format!("shepherd of run {run}"))?;
        return Ok(0);
    }
    if let Command::LimitWake = &command {
        let shepherd = ShepherdCommand::current_exe().context("finding the corral executable")?;
        corral::watch::limit_wake::serve(&home, &shepherd)?;
        return Ok(0);
    }
    if let Command::Template = &command {
        corral::shepherd::template::serve(&home)?;
        return Ok(0);
    }
    if let Command::Mcp = &command {
        corral::mcp::serve_stdio(home)?;
        return Ok(0);
    }
    // Before the store is opened: a store that cannot be is a finding.
    if let Command::Doctor(args) = &command {
        return doctor::run(&home, args.json, &mut std::io::stdout().lock());
    }
    let shepherd = ShepherdCommand::current_exe().context("finding the corral executable")?;
    let mut store = match &command {
        // A launch heals only when a process it checks is gone or no slot
        // is free (see `due_before_launch`), first thing. One naming a
        // parent is judged by scope before that: it heals first, as every
        // other door does before it refuses.
        Command::Launch(args) if args.parent().is_none() => corral::Store::open(&home)?,
        _ => corral::upkeep::heal::open_healed(&home, &shepherd)?,
    };
    let shepherd = shepherd.with_forked(forked);
    // An agent acts on its own tree only, at every door: a forwarded
    // `corral`, its own `corral`, its MCP server (a person's are free).
    within_scope(&store, &command)?;
    // A verb on runs of another host is that host's to carry out.
    if let Some(host) = remote::target(&home, &mut store, &command)? {
        return remote::carry_out(&home, &mut store, &host, &command);
    }
    let mut out = std::io::stdout().lock();
    let code = match command {
        Command::Presets(args) => presets::run(&mut store, args, &mut out)?,
        Command::Launch(args) => launch::run(&home, &mut store, args, &shepherd, &mut out)?,
        Command::Ls(args) => ls::run(&home, &mut store, args, &mut out)?,
        Command::Needs(args) => needs::run(&mut store, args, &mut out)?,
        Command::Top(args) => top::run(&mut store, args, &shepherd)?,
        Command::Show(args) => show::run(&mut store, &args.run, args.json, &mut out)?,
        Command::Tail(args) => tail::run(&mut store, args, &shepherd, &mut out)?,
        Command::Wait(args) => wait::run(&mut store, &args.runs, args.timeout, args.json, &shepherd, &mut out)?,
        Command::Abort(args) => abort::run(&mut store, &args.runs, args.json, &shepherd, &mut out)?,
        Command::Pause(args) => pause::run(&mut store, &args.runs, true, args.json, None, &shepherd, &mut out)?,
        Command::Resume(args) => {
            pause::run(&mut store, &args.runs, false, args.json, args.budget, &shepherd, &mut out)?
        }
        Command::Diff(args) => diff::run(&mut store, args, &mut out)?,
        Command::Conflicts(args) => conflicts::run(&mut store, args, &mut out)?,
        Command::Merge(args) => merge::run(&mut store, args, &mut out)?,
        Command::Pr(args) => pr::run(&mut store, args, &shepherd, &mut out)?,
        Command::Discard(args) => discard::run(&mut store, args, &mut out)?,
        Command::Reply(args) => reply::run(&mut store, args, &shepherd, &mut out)?,
        Command::Allow(args) => allow::run(&mut store, args, &shepherd, &mut out)?,
        Command::Relaunch(args) => relaunch::run(&mut store, args, &shepherd, &mut out)?,
        Command::Du(args) => du::run(&store, args, &mut out)?,
        Command::Schedule(args) => schedule::run(&mut store, args, &shepherd, &mut out)?,
        Command::Push(args) => push::run(args)?,
        Command::Rm(args) => rm::run(&mut store, args, &mut out)?,
        Command::Prune(args) => prune::run(&mut store, args, &mut out)?,
        Command::Search(args) => search::run(&store, args, &mut out)?,
        Command::Watch(args) => watch::run(&mut store, args, &shepherd, &mut out)?,
        Command::About(args) => about::run(&store, args, &mut out)?,
        Command::Hosts(args) => hosts::run(&home, &store, args, &mut out)?,
        Command::Teardown { run } => {
            if let Some(said) = corral::shepherd::teardown::teardown(&home, &mut store, &run)? {
                writeln!(out, "{said}")?;
            }
            0
        }
        Command::Mcp
        | Command::Template
        | Command::LimitWake
        | Command::Shepherd { .. }
        | Command::RemoteExec
        | Command::SandboxNet { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Doctor(_) => {
            unreachable!("handled above")
        }
    };
    out.flush()?;
    // The process ends now. Closing the store would finalise its statements
    // and free its pages, which the exit does anyway (a close checkpoints
    // nothing: see `store`): a third of a woken waiter's work, saved.
    std::mem::forget(store);
    Ok(code)
}

/// A sandboxed agent's `corral`, carried out outside by its run's broker,
/// touches only what the agent's MCP server may (one rule, `scope`): it
/// acts on the runs its run launched, and their runs, and sees those and
/// its own run; a launch's `--parent` is one of them.
fn within_scope(store: &corral::Store, command: &Command) -> anyhow::Result<()> {
    use corral::run::scope::Access::{Act, Read};
    let (ids, access): (Vec<&String>, _) = match command {
        Command::Show(args) => (vec![&args.run], Read),
        Command::Diff(args) => (args.runs.iter().collect(), Read),
        Command::Conflicts(args) => (args.runs.iter().collect(), Read),
        Command::Tail(args) => (args.runs.iter().collect(), Read),
        Command::Wait(args) => (args.runs.iter().collect(), Read),
        Command::Abort(args) => (args.runs.iter().collect(), Act),
        Command::Pause(args) => (args.runs.iter().collect(), Act),
        Command::Resume(args) => (args.runs.iter().collect(), Act),
        Command::Reply(args) => (vec![args.run()], Act),
        Command::Merge(args) => (args.runs.iter().collect(), Act),
        Command::Pr(args) => (args.runs.iter().collect(), Act),
        Command::Discard(args) => (args.runs.iter().collect(), Act),
        Command::Relaunch(args) => (vec![&args.run], Read),
        Command::Rm(args) => (args.runs.iter().collect(), Act),
        Command::Launch(args) => (args.parent().into_iter().collect(), Act),
        // Started by a discard or `rm`, which are scoped: asked directly
        // from inside a run, only for a run of its tree.
        Command::Teardown { run } => (vec![run], Act),
        // A run's sandbox is widened from outside every run (`allow`
        // refuses inside one itself).
        Command::Allow(args) => (vec![args.run()], Act),
        // Every tree's runs: refused inside a run, below.
        Command::Prune(_) => (Vec::new(), Act),
        // Dismissing a run's failure is acting on it.
        Command::Needs(args) if args.dismiss.is_some() => (args.dismiss.iter().collect(), Act),
        // Every verb says which runs it reads or acts on: a new one must
        // be placed here, or it does not build.
        Command::Presets(_)
        | Command::Ls(_)
        | Command::Needs(_)
        | Command::Top(_)
        | Command::Schedule(_)
        | Command::Push(_)
        | Command::Du(_)
        | Command::Watch(_)
        | Command::About(_)
        | Command::Hosts(_)
        | Command::Search(_)
        | Command::Doctor(_)
        | Command::Mcp
        | Command::Completions { .. }
        | Command::Man
        | Command::Template
        | Command::LimitWake
        | Command::Shepherd { .. }
        | Command::RemoteExec
        | Command::SandboxNet { .. } => return Ok(()),
    };
    // Nothing named, nothing to judge (a launch without --parent): the
    // caller is not looked for.
    if ids.is_empty() && !matches!(command, Command::Prune(_)) {
        return Ok(());
    }
    // A person's `corral` is free.
    let caller = match corral::run::caller::forwarded_run() {
        Some(run) => Some(run.to_string()),
        None => corral::run::caller::caller_run(store)?,
    };
    let Some(caller) = caller else { return Ok(()) };
    // Removing every tree's old runs is the user's housekeeping: an agent
    // removes its own tree's with `rm`.
    if matches!(command, Command::Prune(_)) {
        anyhow::bail!(
            "prune removes the runs of every tree, and run {caller} may act only on its own: `corral rm` its own \
             runs, or prune in your own terminal"
        );
    }
    for id in ids {
        corral::run::scope::may(store, id, access)?;
    }
    Ok(())
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

/// `--since`: a time (RFC 3339) or an age before now (`10m`, `2h`), as the
/// store's time text.
pub(super) fn since_arg(text: &str) -> anyhow::Result<String> {
    if let Some(at) = corral::text::time::parse(text) {
        return Ok(corral::text::time::format(at));
    }
    let too_long = || anyhow::anyhow!("--since {text} is too long ago");
    let age = humantime::parse_duration(text)
        .map_err(|_| anyhow::anyhow!("--since {text} is neither a time (2026-11-23T10:00:00Z) nor an age (10m, 2h)"))?;
    let age = chrono::Duration::from_std(age).map_err(|_| too_long())?;
    Ok(corral::text::time::format(corral::text::time::now().checked_sub_signed(age).ok_or_else(too_long)?))
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
        corral::home::logging::init(corral::shepherd::LOG_LEVEL);
    } else {
        corral::home::logging::init_for_command();
    }
}
