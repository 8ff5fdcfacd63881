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
mod remote;
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

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let mut cli = Cli::parse();
    if let Command::RemoteExec = &cli.command {
        cli = match remote::command() {
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
    if let Some(host) = remote::target(&home, &mut store, &command)? {
        return remote::carry_out(&home, &mut store, &host, &command);
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
