//! `corral show RUN`: everything about one run.

use std::io::Write;

use super::table::{or_dash, printable};
use corral::text::time;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    pub run: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, id: &str, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let run = store.find_run(id)?;
    let caller = corral::run::caller::caller_run(store)?;
    corral::verbs::wait::collected_by(store, caller.as_deref(), std::slice::from_ref(&run))?;
    // Shown to a person (as text, not to a script or another run's
    // agent), an ended run has been looked at: its failure or refusal no
    // longer waits for them.
    if caller.is_none() && !json && run.status.is_terminal() {
        store.mark_seen(&run.id)?;
    }
    print(store, &run, json, out)
}

/// Prints `run` (also a run of another host, as last seen).
pub fn print(store: &Store, run: &corral::Run, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let pull_request = store.pull_request(&run.id)?;
    if json {
        // The run as `ls --json` has it, with its pull request once opened.
        let mut value = serde_json::to_value(run)?;
        if let (Some(object), Some(pr)) = (value.as_object_mut(), &pull_request) {
            object.insert("pull_request".into(), serde_json::to_value(pr)?);
        }
        super::print_json(out, &value)?;
        return Ok(0);
    }
    let now = time::now();
    let when = |at: &Option<String>| match at.as_deref().and_then(time::parse) {
        Some(t) => format!("{} ({})", time::format(t), time::ago(t, now)),
        None => "-".to_string(),
    };
    let status = match (run.stop_reason_said(), &run.retrying) {
        _ if run.unreachable_since.is_some() => format!(
            "{} when last seen; host not followed since {}: {}",
            run.status,
            run.unreachable_since.as_deref().unwrap_or(""),
            run.host_trouble.as_deref().unwrap_or("unreachable")
        ),
        (Some(reason), _) => format!("{} ({reason})", run.status),
        _ if run.pause_reason.is_some() && run.status == corral::RunStatus::Paused => match &run.resumes_at {
            Some(at) => format!(
                "{} ({}; goes on by itself at {})",
                run.status,
                run.pause_reason.map_or("", |r| r.as_str()),
                time::parse(at).map_or(at.clone(), time::clock)
            ),
            None => format!("{} ({})", run.status, run.pause_reason.map_or("", |r| r.as_str())),
        },
        (None, Some(retry)) => format!("{} (retrying: {retry})", run.status),
        (None, None) => run.status.to_string(),
    };
    let exit = match (run.exit_code, run.exit_signal) {
        (Some(code), _) => format!("code {code}"),
        (None, Some(sig)) => format!("killed by {}", corral::adapter::signal_name(sig)),
        (None, None) => "-".to_string(),
    };
    let u = &run.usage;
    let fields = [
        ("run", run.id.clone()),
        ("status", status),
        ("preset", format!("{} ({})  {}", run.preset, run.agent, run.preset_path)),
        ("task", run.task.clone()),
        ("cwd", run.cwd.clone()),
        ("model", format!("{} -> {}", or_dash(run.model.as_deref()), or_dash(run.resolved_model.as_deref()))),
        ("created", when(&Some(run.created_at.clone()))),
        ("started", when(&run.started_at)),
        ("completed", when(&run.completed_at)),
        ("exited", when(&run.exited_at)),
        ("duration", run.duration(now).map_or_else(|| "-".into(), time::human_duration)),
        ("exit", exit),
        (
            "tokens",
            format!(
                "in {} / out {} / cache read {} / cache write {}",
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
            ),
        ),
        (
            "cost",
            match (run.cost_usd, run.cost_estimated) {
                (Some(c), true) => format!("≈${c:.4} (estimated from its tokens and Corral's price table)"),
                (Some(c), false) => format!("${c:.4}"),
                (None, _) => "-".into(),
            },
        ),
        ("budget", budget(store, run)?),
        ("resources", resources(run)),
        ("contained", contained(run)),
        (
            "ports",
            run.ports.map_or_else(
                || "-".into(),
                |p| format!("{} (CORRAL_PORT={}, CORRAL_PORTS={})", p.words(), p.first, p.count),
            ),
        ),
        ("transcript", transcript(&run.transcript)),
        ("session", or_dash(run.session_id.as_deref())),
        ("parent", or_dash(run.parent_id.as_deref())),
        ("children", if run.children.is_empty() { "-".into() } else { run.children.join(" ") }),
        ("worktree", run.worktree.as_ref().map_or_else(|| "-".into(), worktree_line)),
        (
            "pr",
            pull_request.as_ref().map_or_else(
                || "-".into(),
                |pr| {
                    let mark = if pr.forge == "gitlab" { "!" } else { "#" };
                    let number = pr.number.map(|n| format!("{mark}{n} ")).unwrap_or_default();
                    format!("{number}{} {} (pushed {} to {})", pr.state, pr.url, short(&pr.pushed), pr.remote)
                },
            ),
        ),
        (
            "folder",
            match &run.host {
                Some(host) => format!("on host {host}"),
                None => store.home().run_dir(&run.id).display().to_string(),
            },
        ),
    ];
    // A command has no model, tokens, cost or session: those lines would
    // only ever say nothing.
    let agentless = ["model", "tokens", "cost", "session"];
    for (key, value) in fields {
        if run.agent == corral::run::AgentKind::Command && agentless.contains(&key) {
            continue;
        }
        writeln!(out, "{key:<10} {}", printable(&value))?;
    }
    if let Some(note) = run.denied_note() {
        let note = printable(&note);
        writeln!(out, "\n{note}\n  (corral reply {} --allow-denied: allow them and go on)", run.id)?;
    }
    let replies = store.replies(&run.id)?;
    if !replies.is_empty() {
        writeln!(out, "\nreplies:")?;
        for reply in &replies {
            let state = if reply.delivered_at.is_some() { "delivered" } else { "waiting for the agent" };
            let text = indent(&indent(&printable(&reply.text)));
            writeln!(out, "  {}  {state}\n{text}", when(&Some(reply.created_at.clone())))?;
        }
    }
    if run.pause_reason == Some(corral::run::PauseReason::Budget) && run.status == corral::RunStatus::Paused {
        if let Some(crossing) = store.budget_crossed(&run.id)? {
            let words = crossing.words(&run.id);
            let words = printable(&words);
            let id = &run.id;
            writeln!(out, "\npaused: {words}\n  (corral resume {id} --budget +N: allow N dollars more; corral abort {id}: stop it)")?;
        }
    }
    if let Some(error) = &run.error {
        writeln!(out, "\nerror:\n{}", indent(&printable(error)))?;
    }
    if let Some(text) = &run.final_text {
        writeln!(out, "\nfinal text:\n{}", indent(&printable(text)))?;
    }
    Ok(0)
}

/// `$2.00 (≈$1.20 spent with its child runs)`, or `-` without a budget.
fn budget(store: &Store, run: &corral::Run) -> anyhow::Result<String> {
    let Some(budget) = run.budget else { return Ok("-".into()) };
    let spent = store.tree_spent(&run.id)?;
    let with = if run.children.is_empty() { "" } else { " with its child runs" };
    let tokens = if spent.tokens >= 1000 { format!("{}k", spent.tokens / 1000) } else { spent.tokens.to_string() };
    let on = match run.on_budget {
        Some(corral::cost::budget::OnBudget::Stop) => "; stops when reached",
        _ => "",
    };
    Ok(format!("{} ({} and {tokens} tokens spent{with}{on})", budget.words(), spent.dollars()))
}

/// `PATH (BRANCH)`, and `missing` when its folder was removed by hand (its
/// branch keeps its commits).
fn worktree_line(w: &corral::worktree::Worktree) -> String {
    match corral::worktree::is_there(std::path::Path::new(&w.path)) {
        true => format!("{} ({})", w.path, w.branch),
        false => format!("{} ({}), missing: removed by hand; its branch keeps its commits", w.path, w.branch),
    }
}

/// `CPU 12.3 s, peak memory 1.2 GiB`, as last measured.
fn resources(run: &corral::Run) -> String {
    let Some(used) = run.resources else { return "-".into() };
    let peak = used.memory_peak_bytes.map_or_else(|| "not measured".into(), corral::cost::resources::human_bytes);
    format!("CPU {:.2} s, peak memory {peak}", used.cpu_seconds)
}

/// How the run's processes are held, and each limit applied or not.
fn transcript(size: &corral::run::TranscriptSize) -> String {
    let kept = corral::cost::resources::human_bytes(size.bytes);
    match size.dropped_events {
        0 => kept,
        n => format!(
            "{kept}; {n} later events ({}) not kept: the cap of `[transcripts] max` in config.toml",
            corral::cost::resources::human_bytes(size.dropped_bytes)
        ),
    }
}

fn contained(run: &corral::Run) -> String {
    let Some(c) = &run.containment else { return "-".into() };
    let mut lines = vec![match &c.cgroup {
        Some(dir) => format!("cgroup {dir}"),
        None => c.mechanism().to_string(),
    }];
    lines.extend(c.notes.iter().cloned());
    lines.join("\n           ")
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// A commit as people quote one: its first 12 characters.
fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}
