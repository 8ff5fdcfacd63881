//! `corral pr RUN…`: the run's work as a pull request (GitHub, with `gh`)
//! or merge request (GitLab, with `glab`): committed on its branch as your
//! own commit would be, pushed, and opened — or, once one is open, pushed
//! to again. Several runs go as one pull request, merged in the order
//! given. Nothing is pushed unless you ask (an agent may only where its
//! preset says `pr: allow`).

use std::io::Write;

use corral::upkeep::queue::ShepherdCommand;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or unique prefix); several: one pull request of their work,
    /// merged in this order.
    #[arg(required = true, num_args = 1.., value_name = "RUN")]
    pub runs: Vec<String>,
    /// Open it as a draft.
    #[arg(long)]
    pub draft: bool,
    /// The branch to merge into (default: the one the run started from).
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,
    /// Its title (default: the task's first line).
    #[arg(long)]
    pub title: Option<String>,
    /// Its description (default: the task, what the agent said, the files
    /// changed, and which run made it).
    #[arg(long)]
    pub body: Option<String>,
    /// The remote to push to (default: the base branch's upstream, else
    /// `origin`).
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Ask the forge now what its pull request's checks and reviews say
    /// (the tray asks by itself, at most once a minute).
    #[arg(long, conflicts_with_all = ["send", "draft", "base", "title", "body", "remote"])]
    pub check: bool,
    /// Send what the forge asks (failed checks, reviews, line comments) to
    /// the run, as a reply in its session; `corral pr RUN` again pushes
    /// what it then commits.
    #[arg(long, conflicts_with_all = ["draft", "base", "title", "body", "remote"])]
    pub send: bool,
    /// What the pull request asks (or its end on the forge) was looked at:
    /// it needs you no more.
    #[arg(long, conflicts_with_all = ["send", "check", "draft", "base", "title", "body", "remote"])]
    pub dismiss: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    let one = match (args.runs.as_slice(), args.check || args.dismiss || args.send) {
        ([one], _) => one.clone(),
        (_, true) => anyhow::bail!("--check, --send and --dismiss take one run (any run of its pull request)"),
        (_, false) => String::new(),
    };
    if args.check {
        let pr = corral::forge::look(store, &one)?;
        if args.json {
            super::print_json(out, &pr)?;
        } else {
            say_state(out, &pr)?;
        }
        return Ok(0);
    }
    if args.dismiss {
        let run = store.find_run(&one)?;
        if store.pull_request(&run.id)?.is_none() {
            anyhow::bail!("run {} has no pull request: open one with `corral pr {}`", run.id, run.id);
        }
        store.dismiss_pull_request(&run.id)?;
        writeln!(out, "{}: dismissed", run.id)?;
        return Ok(0);
    }
    if args.send {
        let sent = corral::forge::send(store, &one, shepherd)?;
        if args.json {
            super::print_json(out, &sent)?;
            return Ok(0);
        }
        let goes = if sent.sent.len() == 1 { "it goes" } else { "each goes" };
        writeln!(out, "{}  the forge's feedback sent: {goes} on in its session", sent.sent.join(", "))?;
        for id in &sent.left_out {
            writeln!(out, "{id}  not sent: it cannot go on in a session (a command run, or its worktree discarded)")?;
        }
        return Ok(0);
    }
    let options = corral::forge::Options {
        draft: args.draft,
        base: args.base,
        title: args.title,
        body: args.body,
        remote: args.remote,
        caller: corral::run::caller::caller_run(store)?,
    };
    let opened = corral::forge::open_together(store, &args.runs, &options)?;
    if args.json {
        super::print_json(out, &opened)?;
        return Ok(0);
    }
    let what = opened.forge.request_name();
    let url = super::table::name(&opened.url);
    let runs = if opened.together.is_empty() { opened.run.clone() } else { opened.together.join(" ") };
    if opened.opened {
        writeln!(out, "{runs}  {what} {} opened: {url}", opened.name())?;
    } else {
        writeln!(out, "{runs}  pushed to {what} {}: {url}", opened.name())?;
    }
    Ok(0)
}

/// `#7 open · checks failing · changes requested`, then what it asks.
fn say_state(out: &mut impl Write, pr: &corral::store::PullRequestRow) -> anyhow::Result<()> {
    let mut parts = vec![pr.name(), pr.state.clone()];
    if let Some(checks) = &pr.checks {
        parts.push(format!("checks {checks}"));
    }
    if let Some(review) = &pr.review {
        parts.push(review.replace('_', " "));
    }
    writeln!(out, "{}  {}", pr.run_id, super::table::name(&parts.join(" · ")))?;
    if let Some(feedback) = pr.feedback.as_deref().filter(|_| pr.asks()) {
        for line in feedback.lines() {
            writeln!(out, "  {}", super::table::name(line))?;
        }
        writeln!(out, "  (corral pr {} --send: send it to the run)", pr.run_id)?;
    }
    Ok(())
}
