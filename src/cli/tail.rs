//! `corral tail RUN... [-n N|all] [-t] [--since TIME] [-f]`: the end of
//! runs' transcripts as text, stdout and stderr in the order they came
//! (stderr marked), several runs interleaved by time with their ids; with
//! `-f`, new lines as they are committed until every run ends, exiting as
//! `wait` does.

use std::io::Write;

use super::table::printable;
use corral::adapter::EventKind;
use corral::store::StoredEvent;
use corral::watch::Watcher;
use corral::{RunStatus, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes); several are interleaved by time,
    /// each line with its run's id.
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// The last N lines of each run, or `all` (default 10; with
    /// --since, all since then).
    #[arg(short = 'n', long = "lines", value_name = "N|all")]
    pub lines: Option<String>,
    /// Show when each line came.
    #[arg(short, long)]
    pub timestamps: bool,
    /// Only what came since: a time (RFC 3339) or an age (`10m`, `2h`).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Keep printing until every run ends; exit 0 if all completed, 1
    /// otherwise (as `wait`).
    #[arg(short, long)]
    pub follow: bool,
    /// One JSON object per line: {"id", "at", "kind", "text"}; with
    /// --follow, one per run at the end ({"id", "status", ...}).
    #[arg(long)]
    pub json: bool,
}

/// Events read from the store per query.
const PAGE: usize = 1000;
/// Lines shown when neither `-n` nor `--since` says otherwise.
pub const DEFAULT_LINES: usize = 10;

/// What to show, as the command line said it.
pub struct Options {
    /// The last this many lines of each run (`None`: all).
    pub lines: Option<usize>,
    /// Each line with the time it was read.
    pub timestamps: bool,
    /// Only what came at or after this moment (RFC 3339).
    pub since: Option<String>,
    /// Keep printing until every run ends.
    pub follow: bool,
    /// One JSON object per line (`{"id", "at", "kind", "text"}`), and with
    /// `follow`, one per run at the end (`{"id", "status", ...}`).
    pub json: bool,
}

/// One line to print.
struct Line {
    at: String,
    run: usize,
    kind: EventKind,
    text: String,
}

impl Args {
    /// The options the command line asks for, each checked.
    fn options(&self) -> anyhow::Result<Options> {
        let (lines, since) = (self.lines.as_deref(), self.since.as_deref());
        let lines = match lines {
            Some("all") => None,
            Some(n) => Some(
                n.parse::<usize>()
                    .map_err(|_| anyhow::anyhow!("-n {n} is not a number of lines: write e.g. -n 50, or -n all"))?,
            ),
            None if since.is_some() => None,
            None => Some(DEFAULT_LINES),
        };
        let since = since.map(super::since_arg).transpose()?;
        Ok(Options { lines, timestamps: self.timestamps, since, follow: self.follow, json: self.json })
    }
}

pub fn run(
    store: &mut Store,
    args: Args,
    shepherd: &corral::upkeep::queue::ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let options = &args.options()?;
    let ids: Vec<String> = args.runs.iter().map(|id| store.find_run(id).map(|r| r.id)).collect::<Result<_, _>>()?;
    let mut watcher = Watcher::new(store)?;
    let several = ids.len() > 1;
    // Where each run's transcript was printed up to.
    let mut after: Vec<i64> = Vec::with_capacity(ids.len());
    let mut lines = Vec::new();
    for (index, id) in ids.iter().enumerate() {
        let (events, last) = tail_of(store, id, options)?;
        after.push(last);
        let mut run_lines: Vec<Line> = events.iter().flat_map(|e| lines_of(e, index)).collect();
        if let Some(n) = options.lines {
            run_lines.drain(..run_lines.len().saturating_sub(n));
        }
        lines.extend(run_lines);
    }
    print(&mut lines, &ids, several, options, out)?;
    if !options.follow {
        return Ok(0);
    }
    loop {
        // Status before events: a run seen ended here committed its last
        // event before, so the drain below gets it all.
        let mut all_ended = true;
        for id in &ids {
            all_ended &= store.run(id)?.status.is_terminal() && !store.reopens_soon(id)?;
        }
        let mut lines = Vec::new();
        for (index, id) in ids.iter().enumerate() {
            loop {
                let events = store.events_after(id, after[index], PAGE)?;
                lines.extend(events.iter().flat_map(|e| lines_of(e, index)));
                match events.last() {
                    Some(last) => after[index] = last.seq,
                    None => break,
                }
            }
        }
        print(&mut lines, &ids, several, options, out)?;
        if all_ended {
            break;
        }
        // Healed when a followed process exits (and as a safety net), not
        // at every commit of the run it shows.
        watcher.changed_before(store, None)?;
        watcher.heal_if_due(store, shepherd)?;
    }
    let mut all_completed = true;
    for id in &ids {
        let run = store.run(id)?;
        all_completed &= run.status == RunStatus::Completed;
        if options.json {
            let end = serde_json::json!({"id": run.id, "status": run.status, "stop_reason": run.stop_reason,
                "error": run.error, "final_text": run.final_text});
            serde_json::to_writer(&mut *out, &end)?;
            writeln!(out)?;
            continue;
        }
        let reason = run.stop_reason.map(|r| format!(" ({r})")).unwrap_or_default();
        writeln!(out, "── {} {}{reason}", run.id, run.status)?;
        if let Some(error) = &run.error {
            writeln!(out, "── {}", printable(error))?;
        }
    }
    // As `wait`: 0 if every run completed, 1 otherwise.
    Ok(if all_completed { 0 } else { 1 })
}

/// The events of run `id` that `tail` starts with, and the last seq read.
/// With a line count, only as many events as hold that many lines are read,
/// from the end: a transcript of millions of lines costs a page or two.
fn tail_of(store: &Store, id: &str, options: &Options) -> anyhow::Result<(Vec<StoredEvent>, i64)> {
    let last = store.last_event_seq(id)?;
    let mut events: Vec<StoredEvent> = Vec::new();
    let mut before = i64::MAX;
    // Pages grow from a few events: an event of output holds hundreds of
    // lines, and `-n 10` of a 2-million-line run should read a few.
    let mut page_size = 8;
    loop {
        let page = store.events_before(id, before, page_size)?;
        page_size = (page_size * 4).min(PAGE);
        let Some(first) = page.first() else { break };
        before = first.seq;
        let since_reached = options.since.as_deref().is_some_and(|since| first.at.as_str() < since);
        events.splice(0..0, page);
        let enough = options.lines.is_some_and(|n| events.iter().map(line_count).sum::<usize>() >= n);
        if enough || since_reached {
            break;
        }
    }
    if let Some(since) = options.since.as_deref() {
        events.retain(|e| e.at.as_str() >= since);
    }
    Ok((events, last))
}

fn line_count(event: &StoredEvent) -> usize {
    event.text.lines().count().max(1)
}

/// The lines of one event: output, assistant text and stderr line by line;
/// anything else as one entry marked with its kind.
fn lines_of(event: &StoredEvent, run: usize) -> Vec<Line> {
    let line = |text: &str| Line { at: event.at.clone(), run, kind: event.kind, text: text.to_string() };
    match event.kind {
        EventKind::Output | EventKind::Text | EventKind::Stderr => event.text.lines().map(line).collect(),
        _ => vec![line(event.text.trim_end())],
    }
}

/// Prints `lines` in the order they came (by time, then as read).
fn print(
    lines: &mut [Line],
    ids: &[String],
    several: bool,
    options: &Options,
    out: &mut impl Write,
) -> std::io::Result<()> {
    lines.sort_by(|a, b| a.at.cmp(&b.at));
    for line in lines.iter() {
        if options.json {
            let entry = serde_json::json!({"id": ids[line.run], "at": line.at, "kind": line.kind, "text": line.text});
            serde_json::to_writer(&mut *out, &entry)?;
            writeln!(out)?;
            continue;
        }
        if options.timestamps {
            write!(out, "{} ", line.at)?;
        }
        if several {
            write!(out, "{} │ ", &ids[line.run][..ids[line.run].len().min(8)])?;
        }
        match line.kind {
            EventKind::Output | EventKind::Text => writeln!(out, "{}", printable(&line.text))?,
            kind => writeln!(out, "[{kind}] {}", printable(&line.text))?,
        }
    }
    out.flush()
}
