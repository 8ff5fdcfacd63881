//! `corral ls`: runs, newest first, as a table that fits the terminal, or
//! JSON; the latest 20 unless told otherwise, filtered by status, preset,
//! folder and age.

use std::io::Write;
use std::path::PathBuf;

use super::table::{cell, Table};
use corral::store::{HostState, HostTrouble, RunFilter};
use std::collections::{HashMap, HashSet};

use corral::home::config::HostConfig;
use corral::text::time;
use corral::{Home, Run, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Every run, cleared ones too (default: the latest 20 not cleared).
    #[arg(long)]
    pub all: bool,
    /// The latest N runs.
    #[arg(short = 'n', long = "lines", value_name = "N")]
    pub count: Option<usize>,
    /// Only runs with this status (repeatable: queued, starting,
    /// running, waiting, paused, completed, failed, aborted, lost).
    #[arg(long)]
    pub status: Vec<corral::RunStatus>,
    /// Only runs of this preset.
    #[arg(long)]
    pub preset: Option<String>,
    /// Only runs launched in this folder or below it.
    #[arg(long, value_name = "DIR", conflicts_with = "here")]
    pub cwd: Option<PathBuf>,
    /// Only runs launched in the current folder or below it.
    #[arg(long)]
    pub here: bool,
    /// Only runs created since: a time (RFC 3339) or an age (`2h`, `3d`).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only runs of this host of config.toml (`local`: this machine's).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs listed without `-n` or `--all`.
pub const DEFAULT_COUNT: usize = 20;
/// The task column is never narrower than this.
const MIN_TASK: usize = 20;

/// How long `ls` waits for hosts nobody follows to catch up.
const CATCH_UP_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);
/// A host found unreachable this recently is not asked again by `ls`.
const UNREACHABLE_FOR: chrono::Duration = chrono::Duration::seconds(60);

/// `--host` naming this machine.
const LOCAL: &str = "local";

impl Args {
    /// The runs the command line asks for.
    fn filter(&self) -> anyhow::Result<RunFilter> {
        let folder = match (&self.cwd, self.here) {
            (Some(dir), _) => Some(std::path::absolute(dir).unwrap_or(dir.clone())),
            (None, true) => Some(corral::verbs::launch::working_folder()?),
            (None, false) => None,
        };
        Ok(RunFilter {
            include_dismissed: self.all,
            limit: if self.all && self.count.is_none() { None } else { Some(self.count.unwrap_or(DEFAULT_COUNT)) },
            statuses: self.status.clone(),
            preset: self.preset.clone(),
            folder: folder.map(|f| f.to_string_lossy().into_owned()),
            created_since: self.since.as_deref().map(super::since_arg).transpose()?,
            ..Default::default()
        })
    }
}

pub fn run(home: &Home, store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let mut filter = args.filter()?;
    // A sandboxed agent's `ls` lists only the runs it may see (`scope`).
    let forwarded = corral::run::caller::forwarded_run().is_some();
    let limit = if forwarded { filter.limit.take() } else { None };
    let filter = &filter;
    let (host, json) = (args.host.as_deref(), args.json);
    let config = corral::home::config::Config::load(home)?;
    let hosts: Vec<HostConfig> = match host {
        None => config.hosts.clone(),
        Some(LOCAL) => Vec::new(),
        Some(name) => vec![config.host(name)?.clone()],
    };
    catch_up(home, store, &hosts);
    let mut runs = if host.is_some_and(|h| h != LOCAL) { Vec::new() } else { store.runs(filter)? };
    with_remote_runs(store, &hosts, filter, &mut runs)?;
    if forwarded {
        runs.retain(|run| corral::run::scope::may(store, &run.id, corral::run::scope::Access::Read).is_ok());
        runs.truncate(limit.unwrap_or(usize::MAX));
    }
    let troubled: Vec<HostState> =
        hosts.iter().filter_map(|h| store.host_state(&h.name).ok().flatten()).filter(|s| s.trouble.is_some()).collect();
    if json {
        super::print_json(out, &runs)?;
        return Ok(0);
    }
    if runs.is_empty() {
        let filtered = !filter.statuses.is_empty()
            || filter.preset.is_some()
            || filter.folder.is_some()
            || filter.created_since.is_some();
        if filtered {
            writeln!(out, "no runs match")?;
        } else {
            writeln!(out, "no runs yet: start one with 'corral launch PRESET TASK' (see 'corral presets')")?;
        }
        return Ok(0);
    }
    let now = time::now();
    let mut rows = Vec::new();
    for (depth, run) in as_tree(&runs) {
        // A host's run says its own id and preset: shown escaped, as
        // every word another machine or an agent chose.
        let id = match depth {
            0 => super::table::name(&run.id),
            d => format!("{}└─ {}", "   ".repeat(d - 1), super::table::name(&run.id)),
        };
        let age = time::parse(&run.created_at).map_or_else(String::new, |at| time::ago(at, now));
        let duration = run.duration(now).map_or_else(|| "-".to_string(), time::human_duration);
        let tokens = match run.usage.total() {
            0 => "-".to_string(),
            n => n.to_string(),
        };
        let status = match (&run.retrying, &run.unreachable_since) {
            (_, Some(since)) => {
                let trouble = troubled
                    .iter()
                    .find(|s| Some(&s.name) == run.host.as_ref())
                    .and_then(|s| s.trouble)
                    .unwrap_or(HostTrouble::Unreachable);
                let since = time::parse(since).map_or_else(String::new, time::clock);
                match trouble {
                    HostTrouble::Unreachable => format!("unreachable since {since}"),
                    other => format!("{}? {} since {since}", run.status, other.short()),
                }
            }
            (Some(retry), _) => format!("{} (retrying: {})", run.status, cell(retry, 40)),
            _ => match run.pause_reason {
                Some(reason) if run.status == corral::RunStatus::Paused => match &run.resumes_at {
                    Some(at) => format!(
                        "{} ({reason} until {})",
                        run.status,
                        corral::text::time::parse(at).map_or(at.clone(), corral::text::time::clock)
                    ),
                    None => format!("{} ({reason})", run.status),
                },
                _ => run.status.to_string(),
            },
        };
        let folder = run.launch_folder();
        let folder = folder.file_name().map_or_else(|| "/".to_string(), |n| n.to_string_lossy().into_owned());
        let folder = match &run.host {
            Some(host) => format!("{host}:{}", cell(&folder, 20)),
            None => cell(&folder, 20),
        };
        rows.push(vec![id, status, cell(&run.preset, 40), folder, age, duration, tokens, run.task.clone()]);
    }
    // The task takes what the terminal has left (everything, into a pipe).
    let fixed: usize = (0..7).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0) + 2).sum();
    let task_width = super::terminal_width().map_or(usize::MAX, |w| w.saturating_sub(fixed + 10).max(MIN_TASK));
    let mut table = Table::new(&["ID", "STATUS", "PRESET", "FOLDER", "AGE", "DURATION", "TOKENS", "TASK"]);
    if super::colour::wanted() {
        let statuses: Vec<corral::RunStatus> = as_tree(&runs).iter().map(|(_, r)| r.status).collect();
        table.paint(move |row, column, text| match column {
            1 => super::colour::status(text, statuses[row]),
            _ => text.to_string(),
        });
    }
    for mut row in rows {
        row[7] = cell(&row[7], task_width.min(200));
        table.row(row);
    }
    table.write(out)?;
    if filter.limit.is_some_and(|n| runs.len() >= n) {
        writeln!(out, "(the latest {}: -n N or --all for more)", runs.len())?;
    }
    // Why a host's runs are as last seen, and what to do.
    for state in troubled.iter().filter(|s| runs.iter().any(|r| r.host.as_ref() == Some(&s.name))) {
        let why = state.error.as_deref().map_or_else(|| "cannot be followed".to_string(), |e| cell(e, 400));
        writeln!(out, "{}: {why}", state.name)?;
    }
    Ok(0)
}

/// Brings the mirror of each host nobody follows up to date, side by side,
/// for at most [`CATCH_UP_WITHIN`]; a host that does not answer by then is
/// shown as last seen.
fn catch_up(home: &Home, store: &Store, hosts: &[HostConfig]) {
    let now = time::now();
    let recently_down = |host: &HostConfig| {
        store.host_state(&host.name).ok().flatten().is_some_and(|s| {
            !s.reachable && s.checked_at.as_deref().and_then(time::parse).is_some_and(|at| now - at < UNREACHABLE_FOR)
        })
    };
    let hosts: Vec<&HostConfig> = hosts.iter().filter(|h| !recently_down(h)).collect();
    if hosts.is_empty() {
        return;
    }
    let (done, finished) = std::sync::mpsc::channel();
    for host in &hosts {
        let (home, host, done) = (home.clone(), (*host).clone(), done.clone());
        std::thread::spawn(move || {
            if let Ok(mut store) = Store::open(&home) {
                if let Err(e) = corral::remote::catch_up(&home, &mut store, &host, CATCH_UP_WITHIN) {
                    tracing::info!(host = %host.name, "cannot catch up: {e}");
                }
            }
            let _ = done.send(host.name);
        });
    }
    let deadline = std::time::Instant::now() + CATCH_UP_WITHIN;
    let mut answered = Vec::new();
    while answered.len() < hosts.len() {
        match finished.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            Ok(name) => answered.push(name),
            Err(_) => break,
        }
    }
    // A host that did not answer in time costs this one wait: recorded so,
    // it is not asked again for a while (its catch-up dies with this ls).
    // One that answered and is still sending its changes is not silent.
    if let Ok(mut store) = Store::open(home) {
        let heard = |host: &HostConfig| {
            store.host_state(&host.name).ok().flatten().is_some_and(|s| {
                s.reachable
                    && s.checked_at
                        .as_deref()
                        .and_then(time::parse)
                        .is_some_and(|at| at > now - chrono::Duration::milliseconds(1))
            })
        };
        let silent: Vec<&&HostConfig> = hosts.iter().filter(|h| !answered.contains(&h.name) && !heard(h)).collect();
        for host in silent {
            let said = format!(
                "host '{}' ({}) is unreachable: it did not answer within {} s",
                host.name,
                host.ssh,
                CATCH_UP_WITHIN.as_secs()
            );
            let _ = store.record_host_trouble(&host.name, HostTrouble::Unreachable, &said);
        }
    }
}

/// Adds the runs of `hosts` that `filter` keeps, newest first with the
/// local ones.
fn with_remote_runs(
    store: &Store,
    hosts: &[HostConfig],
    filter: &RunFilter,
    runs: &mut Vec<Run>,
) -> anyhow::Result<()> {
    let remote: Vec<Run> = store
        .remote_runs(None)?
        .into_iter()
        .filter(|r| hosts.iter().any(|h| Some(&h.name) == r.host.as_ref()))
        .filter(|r| filter.statuses.is_empty() || filter.statuses.contains(&r.status))
        .filter(|r| filter.status.is_none_or(|s| s == r.status))
        .filter(|r| filter.preset.as_ref().is_none_or(|p| *p == r.preset))
        .filter(|r| filter.created_since.as_ref().is_none_or(|since| r.created_at >= *since))
        .filter(|_| filter.folder.is_none() && filter.parent_id.is_none())
        .collect();
    if remote.is_empty() {
        return Ok(());
    }
    runs.extend(remote);
    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    if let Some(limit) = filter.limit {
        runs.truncate(limit);
    }
    Ok(())
}

/// The runs in tree order: each run followed by its children (oldest first),
/// with their depth. Runs whose parent is not listed are roots.
fn as_tree(runs: &[Run]) -> Vec<(usize, &Run)> {
    let listed: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let by_id: HashMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut out = Vec::with_capacity(runs.len());
    let mut stack: Vec<(usize, &Run)> = runs
        .iter()
        .filter(|r| r.parent_id.as_deref().is_none_or(|p| !listed.contains(p)))
        .rev()
        .map(|r| (0, r))
        .collect();
    while let Some((depth, run)) = stack.pop() {
        out.push((depth, run));
        for child in run.children.iter().rev().filter_map(|id| by_id.get(id.as_str())) {
            stack.push((depth + 1, child));
        }
    }
    out
}
