//! `corral launch PRESET TASK...`: start a run in the background and print
//! its id (or, with `--wait`, block until it ends).

use corral::run::blocking::Waiter;
use std::io::Write;
use std::path::PathBuf;

use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::launch::{launch, LaunchRequest};
use corral::Store;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The preset to run (see `corral presets`).
    preset: String,
    /// What the agent should do. Several words are joined with spaces; `-`
    /// reads it from standard input.
    #[arg(required_unless_present_any = ["task_file", "issue", "pr"], num_args = 1..)]
    task: Vec<String>,
    /// An issue of the repository as the task (its number, or its page):
    /// its title, body and comments, read with `gh` (GitLab: `glab`),
    /// framed as the forge's words; words given too come first.
    #[arg(long, value_name = "NUMBER|URL", conflicts_with_all = ["task_file", "host"])]
    issue: Option<String>,
    /// Start on a pull request's own branch (its number, or its page), in
    /// a worktree: `corral pr RUN` then pushes the run's work to that pull
    /// request.
    #[arg(long, value_name = "NUMBER|URL", conflicts_with_all = ["host", "issue", "base", "no_worktree"])]
    pr: Option<String>,
    /// Read the task from this file (a long brief).
    #[arg(long, value_name = "FILE", conflicts_with = "task")]
    task_file: Option<PathBuf>,
    /// Model to use instead of the preset's.
    #[arg(long)]
    model: Option<String>,
    /// Working folder (default: the current one; with --host, a folder of
    /// that host, default its user's home).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Launch on this host of config.toml (`[hosts.NAME]`), over SSH.
    #[arg(long, value_name = "NAME", conflicts_with = "parent")]
    host: Option<String>,
    /// Parent run (default: the run this command runs inside, if any).
    #[arg(long)]
    parent: Option<String>,
    /// Run in a git worktree of its own, on branch corral/<id> (uncommitted
    /// work in your tree is not copied).
    #[arg(long, overrides_with = "no_worktree")]
    worktree: bool,
    /// Run in the folder itself even if the preset asks for a worktree.
    #[arg(long)]
    no_worktree: bool,
    /// With a worktree: the commit or branch to start from (default: HEAD).
    #[arg(long, value_name = "REF")]
    base: Option<String>,
    /// What the run, with the runs it launches, may spend before it is
    /// paused and you are asked: `$2`, `500k tokens`, `usd=2,tokens=2M`
    /// (over the preset's `budget:` and config.toml's `[budget]`).
    #[arg(long, value_name = "BUDGET", value_parser = parse_budget)]
    budget: Option<corral::cost::budget::Budget>,
    /// Block until the run ends; exit as `corral wait` does.
    #[arg(long)]
    wait: bool,
    /// Print the run as JSON.
    #[arg(long)]
    json: bool,
    /// A key for this launch: asked again under the same key (its answer
    /// lost on the way, as over SSH), the run the first made is printed
    /// and none is launched again. What a host's launch sends.
    #[arg(long, value_name = "KEY", hide = true)]
    request: Option<String>,
    /// Its agent acts over MCP on its own tree only, whatever its preset's
    /// `mcp:` says (what a launch from an agent of another machine, whose
    /// own scope is its tree, sends).
    #[arg(long, hide = true)]
    mcp_own: bool,
    /// The task, once read (standard input is read once, by the warm path
    /// if it was tried).
    #[arg(skip)]
    read_task: Option<String>,
    /// No launch template answered: this launch starts one for the next.
    #[arg(skip)]
    start_template: bool,
}

/// Launches through the template's warm spare (see `corral::shepherd::template`), if
/// this launch may and a template answers: the exit code. `None`: launch
/// cold, as `args` now say (the task read, under the key the spare was
/// asked with, so a launch it recorded is not made twice).
pub fn warm(args: &mut Args) -> Option<i32> {
    if !args.is_local()
        || args.parent.is_some()
        || args.issue.is_some()
        || args.pr.is_some()
        || args.wait
        || !corral::run::caller::this_process_outside_every_run()
    {
        return None;
    }
    let home = corral::run::caller::home().ok()?;
    let task = match task_of(&args.task, args.task_file.as_deref()) {
        Ok(task) => task,
        Err(_) => return None, // said by the cold path
    };
    args.read_task = Some(task.clone());
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir).ok()?,
        None => corral::verbs::launch::working_folder().ok()?,
    };
    let key = args.request.get_or_insert_with(|| format!("warm-{:016x}", fastrand::u64(..))).clone();
    let asked = corral::shepherd::template::wire::WarmLaunch {
        preset: args.preset.clone(),
        task,
        cwd,
        model: args.model.clone(),
        worktree: worktree_choice(args),
        base: args.base.clone(),
        budget: args.budget,
        request: key,
        env: std::env::vars_os().collect(),
        program: std::env::current_exe().ok()?,
    };
    let answer = corral::shepherd::template::ask::ask(&home, &asked);
    let mut err = std::io::stderr().lock();
    let mut out = std::io::stdout().lock();
    let printed = match answer {
        None | Some(corral::shepherd::template::wire::WarmAnswer::NotHere { .. }) => {
            args.start_template = answer.is_none();
            return None;
        }
        Some(corral::shepherd::template::wire::WarmAnswer::Refused { error, said }) => {
            let _ = write!(err, "{said}");
            let _ = writeln!(err, "corral: {error}");
            return Some(super::EXIT_ERROR);
        }
        Some(corral::shepherd::template::wire::WarmAnswer::Launched { run, said }) => {
            let _ = write!(err, "{said}");
            print_launched(&run, args.json, &mut out)
        }
    };
    Some(match printed.and_then(|()| out.flush().map_err(anyhow::Error::from)) {
        Ok(()) => 0,
        Err(_) => super::EXIT_ERROR,
    })
}

/// A launched run as `launch` says it: its id, or its object with `--json`.
fn print_launched(run: &corral::Run, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    if json {
        super::print_json(out, run)
    } else {
        Ok(writeln!(out, "{}", run.id)?)
    }
}

/// `--worktree` / `--no-worktree`, over the preset's choice.
fn worktree_choice(args: &Args) -> Option<bool> {
    match (args.worktree, args.no_worktree) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    }
}

/// `--budget` as clap reads it.
pub fn parse_budget(text: &str) -> Result<corral::cost::budget::Budget, corral::cost::budget::BadBudget> {
    corral::cost::budget::Budget::parse(text)
}

impl Args {
    /// Whether the run starts on this machine.
    pub fn is_local(&self) -> bool {
        self.host.is_none()
    }

    /// The parent run named with `--parent`, if one is.
    pub fn parent(&self) -> Option<&String> {
        self.parent.as_ref()
    }

    /// The file named with `--task-file`, if one is.
    pub fn task_file(&self) -> Option<&std::path::Path> {
        self.task_file.as_deref()
    }
}

pub fn run(
    home: &corral::Home,
    store: &mut Store,
    args: Args,
    shepherd: &ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    if let Some(name) = &args.host {
        return launch_on_host(home, store, name, args.clone(), out);
    }
    let mut worktree = worktree_choice(&args);
    let cwd = match args.cwd {
        Some(dir) => dir,
        None => corral::verbs::launch::working_folder()?,
    };
    // On a pull request's branch: in a worktree started from its commit.
    let onto = match &args.pr {
        Some(reference) => Some(corral::forge::pull_request_head(&cwd, reference)?),
        None => None,
    };
    let mut base = args.base;
    if let Some(head) = &onto {
        worktree = Some(true);
        base = Some(head.commit.clone());
    }
    let task = match (args.read_task, &args.issue, &onto) {
        (Some(task), _, _) => task,
        (None, Some(issue), _) => corral::forge::task_from_issue(&cwd, issue, &args.task.join(" "))?,
        (None, None, Some(head)) if args.task.is_empty() => {
            format!("Go on with pull request {} ({}): {}", head.name(), head.url, head.title)
        }
        (None, None, _) => task_of(&args.task, args.task_file.as_deref())?,
    };
    let request = LaunchRequest {
        preset: args.preset,
        task,
        cwd,
        model: args.model,
        parent: args.parent,
        env: None,
        worktree,
        base,
        budget: args.budget,
        fire: None,
        request: args.request,
        scope_own: args.mcp_own,
    };
    let run = launch(store, &request, shepherd)?;
    shepherd.dismiss_forked();
    if let Some(head) = &onto {
        store.record_pull_request(&head.linking(&run.id))?;
    }
    if args.start_template && corral::home::config::Config::load(home)?.launch_template {
        corral::shepherd::template::start(home);
    }
    if args.wait {
        let caller = corral::run::caller::caller_run(store)?;
        let result = corral::verbs::wait::wait_for(
            store,
            &[run.id],
            None,
            caller.as_deref(),
            shepherd,
            None,
            Waiter::Command,
            None,
        )?;
        corral::verbs::wait::collected_by(store, caller.as_deref(), &result.runs)?;
        let run = &result.runs[0];
        if args.json {
            super::print_json(out, run)?;
        } else {
            super::wait::print_ended(run, out)?;
        }
        return Ok(result.exit_code());
    }
    print_launched(&run, args.json, out)?;
    Ok(0)
}

/// `launch --host`: the run starts on the host; `--wait` waits there.
fn launch_on_host(
    home: &corral::Home,
    store: &mut Store,
    name: &str,
    args: Args,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let config = corral::home::config::Config::load(home)?;
    let host = config.host(name)?;
    let task = task_of(&args.task, args.task_file.as_deref())?;
    corral::verbs::launch::check_task(&task)?;
    let worktree = worktree_choice(&args);
    let options = corral::remote::RemoteLaunch {
        cwd: match args.cwd {
            Some(dir) => Some(dir.into_os_string().into_string().map_err(|dir| {
                anyhow::anyhow!("--cwd {}: a folder on a host must be UTF-8 text", dir.to_string_lossy())
            })?),
            None => None,
        },
        model: args.model,
        worktree,
        base: args.base,
        budget: args.budget,
        fire: None,
    };
    // Launched from inside a run: that run waits for it, as for a child.
    let caller = corral::run::caller::caller_run(store)?;
    let run = corral::remote::launch_for(home, store, host, (&args.preset, &task), &options, caller.as_deref())?;
    if args.wait {
        // As `corral wait` does: through an outage, until the run ends there.
        out.flush()?;
        return super::remote::wait_there(home, &host.name, std::slice::from_ref(&run.id), None, args.json);
    }
    print_launched(&run, args.json, out)?;
    Ok(0)
}

/// The task as given: words, `-` for standard input, or `--task-file`.
fn task_of(words: &[String], file: Option<&std::path::Path>) -> anyhow::Result<String> {
    if let Some(file) = file {
        return std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read the task from {}: {e}", file.display()));
    }
    if words == ["-"] {
        let mut task = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut task)
            .map_err(|e| anyhow::anyhow!("cannot read the task from standard input: {e}"))?;
        return Ok(task);
    }
    Ok(words.join(" "))
}
