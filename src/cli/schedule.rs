//! `corral schedule …`: presets launched by a clock. `add` makes one, `ls`
//! shows each with its next fire and last outcomes, `show` every fire,
//! `pause`/`resume`/`rm`, `run-now` fires one now, `fire` fires one if it
//! is due (what a timer runs), and `run` fires every schedule as it comes
//! due, in the foreground, for a machine without the tray.

use std::io::Write;
use std::path::PathBuf;

use super::table::{cell, Table};
use corral::schedule::{self, FireResult, Keep, Overlap, Precheck, Schedule, Settings, When};
use corral::store::FireRow;
use corral::text::time;
use corral::upkeep::queue::ShepherdCommand;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

// Parsed once per command: the size of `add`'s arguments costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Add a schedule: PRESET launched with TASK in DIR at each due time.
    Add(AddArgs),
    /// List the schedules: when, the next fire, the last outcomes.
    Ls {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule and its fires, newest first.
    Show {
        name: String,
        /// The latest N fires (default 20).
        #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 20)]
        count: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause a schedule: its fires launch nothing (and say so).
    Pause { name: String },
    /// Resume a paused schedule.
    Resume { name: String },
    /// Remove a schedule and its history (its runs stay).
    Rm { name: String },
    /// Fire a schedule now, paused or not, as a slot of its own.
    RunNow {
        name: String,
        /// Print the fire as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fire a schedule if a slot is due and no other firer took it (what a
    /// timer runs). Exit 0 whether or not it fired.
    Fire {
        name: String,
        /// Print the fire as JSON (`null` if nothing was due).
        #[arg(long)]
        json: bool,
    },
    /// Fire every schedule as it comes due, until stopped (for a machine
    /// without the tray; several firers never fire a slot twice).
    Run,
    /// Write a systemd user timer for each schedule (and remove those of
    /// schedules gone), then reload the user's systemd: slots fire with no
    /// Corral process running. Kept up to date by itself with
    /// `[schedules] systemd_timers = true` in config.toml.
    Timers,
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The schedule's name (letters, digits, '.', '_', '-').
    pub name: String,
    /// The preset to launch (see `corral presets`).
    #[arg(long)]
    pub preset: String,
    /// A cron expression in this machine's time zone: '0 9 * * 1-5' is
    /// weekdays at 09:00 (six fields: seconds first).
    #[arg(long, group = "when", value_name = "EXPR")]
    pub cron: Option<String>,
    /// A period from now on: 30m, 2h, 1d.
    #[arg(long, group = "when", value_name = "PERIOD")]
    pub every: Option<String>,
    /// A calendar phrase in this machine's time zone: 'weekdays 09:00',
    /// 'mon,wed,fri 18:30', 'daily 7am', 'sundays noon', 'monthly 09:00',
    /// 'hourly'. `schedule ls` says how it was read.
    #[arg(long, group = "when", value_name = "PHRASE")]
    pub at: Option<String>,
    /// Working folder of its runs (default: the current one; with --host,
    /// a folder there, default its user's home).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Fire on this host of config.toml (`[hosts.NAME]`), over SSH; the
    /// precheck still runs here.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// When the last fire's runs still run: skip this fire (default), queue
    /// it until they end, or allow it beside them.
    #[arg(long, value_enum, default_value_t = Overlap::Skip)]
    pub overlap: Overlap,
    /// A command run before each fire (one string, split as a shell would,
    /// run without one): a non-zero exit skips the fire.
    #[arg(long, value_name = "COMMAND")]
    pub precheck: Option<String>,
    /// One run per line the precheck prints, `{item}` in the task being the
    /// line; each line once over the schedule's life.
    #[arg(long, requires = "precheck")]
    pub each: bool,
    /// How long the precheck may take.
    #[arg(long, value_name = "PERIOD", default_value = "60s", requires = "precheck")]
    pub precheck_timeout: String,
    /// Most runs one fire launches.
    #[arg(long, value_name = "N")]
    pub max_runs_per_fire: Option<u32>,
    /// Most runs its fires launch in any hour.
    #[arg(long, value_name = "N")]
    pub max_runs_per_hour: Option<u32>,
    /// Pause itself once this many fires in a row failed.
    #[arg(long, value_name = "N")]
    pub pause_after_failures: Option<u32>,
    /// What its fires' runs may spend in a day (`$5`, `usd=5,tokens=5M`):
    /// each run gets what is left; once it is spent, fires launch nothing
    /// until midnight.
    #[arg(long, value_name = "BUDGET", value_parser = corral::cost::budget::Budget::parse)]
    pub budget_per_day: Option<corral::cost::budget::Budget>,
    /// Keep this many of its finished runs; older ones are removed as `rm`
    /// removes them (a worktree with unmerged work stays).
    #[arg(long, value_name = "N")]
    pub keep_last: Option<u32>,
    /// Remove its runs that ended more than this many days ago.
    #[arg(long, value_name = "DAYS")]
    pub keep_days: Option<u32>,
    /// Print the schedule as JSON.
    #[arg(long)]
    pub json: bool,
    /// What the agent should do (several words are joined with spaces).
    #[arg(required = true, num_args = 1..)]
    pub task: Vec<String>,
}

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    // The presets' schedules as their files say now.
    for problem in schedule::presets::sync(store)? {
        eprintln!("corral: {problem}");
    }
    // A fire whose firer died is shown as it ended, never as running.
    schedule::settle_orphans(store)?;
    let code = act(store, args.action, shepherd, out)?;
    // The timers follow what changed (a preset's schedule taken up above
    // too), when they are asked for.
    if let Some(kept) = schedule::timers::follow(store, &shepherd.program)? {
        said_timers(&kept, None)?;
    }
    Ok(code)
}

/// Writes the schedules' systemd timers, saying what it did to `out`.
fn keep_timers(store: &Store, shepherd: &ShepherdCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let kept = schedule::timers::keep(&schedule::all(store)?, &shepherd.program, store.home())?;
    said_timers(&kept, Some(out))
}

/// Says what keeping the timers did to `out` if given (else only trouble,
/// on stderr).
fn said_timers(kept: &schedule::timers::Kept, out: Option<&mut dyn Write>) -> anyhow::Result<()> {
    if let Some(out) = out {
        for file in &kept.written {
            writeln!(out, "wrote {}", file.display())?;
        }
        for file in &kept.removed {
            writeln!(out, "removed {}", file.display())?;
        }
        if kept.written.is_empty() && kept.removed.is_empty() {
            writeln!(out, "the timers are up to date")?;
        }
    }
    if let Some(why) = &kept.not_loaded {
        eprintln!(
            "corral: the timers are written, but the user's systemd was not told ({why}): \
             they start with your next login, or run 'systemctl --user daemon-reload'"
        );
    }
    Ok(())
}

fn act(store: &mut Store, action: Action, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    match action {
        Action::Add(add) => self::add(store, add, out),
        Action::Ls { json } => list(store, json, out),
        Action::Show { name, count, json } => show(store, &name, count, json, out),
        Action::Pause { name } => {
            let paused = schedule::pause(store, &name)?;
            writeln!(out, "{}  paused", paused.name)?;
            Ok(0)
        }
        Action::Resume { name } => {
            let schedule = schedule::resume(store, &name)?;
            writeln!(out, "{}  resumed; next fire {}", schedule.name, next_fire(&schedule))?;
            Ok(0)
        }
        Action::Rm { name } => {
            schedule::remove(store, &name)?;
            writeln!(out, "{name}  removed (its runs stay)")?;
            Ok(0)
        }
        Action::RunNow { name, json } => {
            let fire = schedule::run_now(store, &name, shepherd)?;
            print_fire(&fire, json, out)
        }
        Action::Fire { name, json } => match fire(store, &name, shepherd)? {
            Some(fire) => print_fire(&fire, json, out),
            None if json => {
                writeln!(out, "null")?;
                Ok(0)
            }
            None => {
                writeln!(out, "{name}  nothing due")?;
                Ok(0)
            }
        },
        Action::Timers => {
            keep_timers(store, shepherd, out)?;
            Ok(0)
        }
        Action::Run => {
            let mut failed = std::collections::HashSet::new();
            schedule::firer::run(store, "schedule run", shepherd, |round| {
                for fire in &round.fired {
                    let _ = writeln!(out, "{}", fire_line(fire));
                }
                for (name, e) in &round.errors {
                    // Said once, not at every wake.
                    let said = format!("schedule {name}: {e}");
                    if failed.insert(said.clone()) {
                        eprintln!("corral: {said}");
                    }
                }
                let _ = out.flush();
                true
            })?;
            Ok(0)
        }
    }
}

fn add(store: &mut Store, args: AddArgs, out: &mut impl Write) -> anyhow::Result<i32> {
    let when =
        When::choose(args.cron.as_deref(), args.every.as_deref(), args.at.as_deref(), ["--cron", "--every", "--at"])?;
    let precheck = match &args.precheck {
        Some(text) => {
            let command = shlex::split(text)
                .filter(|words| !words.is_empty())
                .ok_or_else(|| anyhow::anyhow!("--precheck {text:?}: unbalanced quotes, or no command"))?;
            let timeout = humantime::parse_duration(&args.precheck_timeout).map_err(|_| {
                anyhow::anyhow!("--precheck-timeout {} is not a period: write e.g. 60s, 5m", args.precheck_timeout)
            })?;
            Some(Precheck { command, each: args.each, timeout_secs: timeout.as_secs() })
        }
        None => None,
    };
    let cwd = match (&args.host, args.cwd) {
        (Some(host), dir) => {
            // A folder there, checked there at each fire.
            corral::home::config::Config::load(store.home())?.host(host)?;
            dir.map(|d| d.to_string_lossy().into_owned()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("~"))
        }
        (None, Some(dir)) => std::path::absolute(&dir).unwrap_or(dir),
        (None, None) => corral::verbs::launch::working_folder()?,
    };
    if args.host.is_none() && !cwd.is_dir() {
        anyhow::bail!("--cwd {}: no such folder", cwd.display());
    }
    if cwd.to_str().is_none() {
        return Err(corral::verbs::launch::LaunchError::CwdNotUtf8(cwd).into());
    }
    let settings = Settings {
        preset: args.preset,
        task: args.task.join(" "),
        cwd: cwd.to_string_lossy().into_owned(),
        host: args.host.clone(),
        when,
        overlap: args.overlap,
        precheck,
        max_runs_per_fire: args.max_runs_per_fire,
        max_runs_per_hour: args.max_runs_per_hour,
        budget_per_day: args.budget_per_day,
        pause_after_failures: args.pause_after_failures,
        keep: Keep { last: args.keep_last, days: args.keep_days },
    };
    // The preset must exist here and now, not at the first fire at 3 am
    // (a host's presets are the host's: its first fire says).
    if args.host.is_none() {
        let roots = corral::preset::Roots::new(store.home(), Some(&cwd));
        corral::preset::discover(&roots).get(&settings.preset)?;
    }
    let schedule = schedule::add(store, &args.name, &settings, std::env::vars_os())?;
    if args.json {
        super::print_json(out, &schedule)?;
    } else {
        writeln!(out, "{}  {}; next fire {}", schedule.name, schedule.settings.when.describe(), next_fire(&schedule))?;
    }
    Ok(0)
}

fn list(store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let schedules = schedule::all(store)?;
    if json {
        let mut values = Vec::new();
        for schedule in &schedules {
            values.push(schedule::shown(store, schedule, "last_fires", 5)?);
        }
        super::print_json(out, &values)?;
        return Ok(0);
    }
    if schedules.is_empty() {
        writeln!(out, "no schedules: add one with 'corral schedule add NAME --preset P --every 1d TASK'")?;
        return Ok(0);
    }
    let mut table = Table::new(&["NAME", "PRESET", "WHEN", "NEXT", "LAST", "STATE"]);
    for schedule in &schedules {
        let fires = store.fires(&schedule.name, 8)?;
        let marks: String = fires.iter().rev().map(mark).collect();
        let state = match (&schedule.paused_at, &schedule.paused_why) {
            (Some(_), Some(why)) => format!("paused ({why})"),
            (Some(_), None) => "paused".to_string(),
            (None, _) => "active".to_string(),
        };
        table.row(vec![
            cell(&schedule.name, 24),
            cell(&schedule.settings.preset, 20),
            cell(&schedule.settings.when.describe(), 48),
            next_fire(schedule),
            marks,
            state,
        ]);
    }
    table.write(out)?;
    Ok(0)
}

fn show(store: &Store, name: &str, count: usize, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let schedule = schedule::get(store, name)?;
    let fires = store.fires(name, count)?;
    if json {
        super::print_json(out, &schedule::shown(store, &schedule, "fires", count)?)?;
        return Ok(0);
    }
    let s = &schedule.settings;
    writeln!(out, "schedule  {}", schedule.name)?;
    writeln!(out, "preset    {}", s.preset)?;
    writeln!(out, "task      {}", super::table::printable(&s.task))?;
    match &s.host {
        Some(host) => writeln!(out, "folder    {} on host {host}", s.cwd)?,
        None => writeln!(out, "folder    {}", s.cwd)?,
    }
    writeln!(out, "when      {}", s.when.describe())?;
    writeln!(out, "next      {}", next_fire(&schedule))?;
    if let Some(since) = &schedule.paused_at {
        writeln!(out, "paused    since {since} ({})", schedule.paused_why.as_deref().unwrap_or("by request"))?;
    }
    if let Some(check) = &s.precheck {
        let each = if check.each { ", one run per line" } else { "" };
        writeln!(
            out,
            "precheck  {}{each}",
            shlex::try_join(check.command.iter().map(String::as_str)).unwrap_or_default()
        )?;
    }
    writeln!(out, "overlap   {:?}", s.overlap)?;
    writeln!(out, "fires")?;
    if fires.is_empty() {
        writeln!(out, "  none yet")?;
    }
    for fire in &fires {
        writeln!(out, "  {}", fire_line(fire))?;
    }
    Ok(0)
}

fn print_fire(fire: &FireRow, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    if json {
        super::print_json(out, fire)?;
    } else {
        writeln!(out, "{}", fire_line(fire))?;
    }
    Ok(0)
}

/// One fire in a line: when it was due, how late, what came of it.
/// What a timer's `schedule fire NAME` does: the fires queued behind runs
/// that ended go first (with only timers firing, nothing else takes them
/// up), then the slot due, if one is.
fn fire(store: &mut Store, name: &str, shepherd: &ShepherdCommand) -> anyhow::Result<Option<FireRow>> {
    let queued = schedule::fire_queued(store, name, "fire", shepherd)?;
    Ok(schedule::fire_due(store, name, "fire", shepherd)?.or(queued.into_iter().last()))
}

fn fire_line(fire: &FireRow) -> String {
    let late = match fire.late_ms {
        ms if ms >= 1000 => {
            format!(" (late by {})", humantime::format_duration(std::time::Duration::from_secs((ms / 1000) as u64)))
        }
        _ => String::new(),
    };
    let runs: Vec<String> = fire
        .runs
        .iter()
        .map(|r| match r.status {
            Some(status) => format!("{} {status}", r.id),
            None => format!("{} removed", r.id),
        })
        .collect();
    let runs = if runs.is_empty() { String::new() } else { format!(" [{}]", runs.join(", ")) };
    // What a precheck printed is the program's: shown on this one line,
    // never sent to the terminal as it is (a screen clear, a clipboard
    // write, a new line forging a fire of its own).
    let detail = fire
        .detail
        .as_deref()
        .filter(|d| !d.is_empty())
        .map(|d| format!(": {}", super::table::name(d)))
        .unwrap_or_default();
    format!("{} {} {}{late} {}{detail}{runs}", mark(fire), fire.schedule, fire.due_at, fire.outcome)
}

/// A fire as one mark: ✓ its runs completed, ✗ failed, … still running,
/// · skipped.
fn mark(fire: &FireRow) -> char {
    FireResult::of(fire).mark()
}

fn next_fire(schedule: &Schedule) -> String {
    match schedule.next_due(schedule::now()) {
        Some(at) => format!(
            "{} (in {})",
            at.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S %Z"),
            time::human_duration(at - schedule::now())
        ),
        None => "never".to_string(),
    }
}
