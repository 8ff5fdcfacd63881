//! `corral pr RUN`: the run's work as a pull request (GitHub, with `gh`) or
//! merge request (GitLab, with `glab`): committed on its branch as your own
//! commit would be, pushed, and opened — or, once one is open, pushed to
//! again. Nothing is pushed unless you ask (an agent may only where its
//! preset says `pr: allow`).

use std::io::Write;

use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or unique prefix).
    pub run: String,
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
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let options = corral::forge::Options {
        draft: args.draft,
        base: args.base,
        title: args.title,
        body: args.body,
        remote: args.remote,
        caller: corral::caller::caller_run(store)?,
    };
    let opened = corral::forge::open(store, &args.run, &options)?;
    if args.json {
        super::print_json(out, &opened)?;
        return Ok(0);
    }
    let what = opened.forge.request_name();
    let url = super::table::name(&opened.url);
    if opened.opened {
        writeln!(out, "{}  {what} {} opened: {url}", opened.run, opened.name())?;
    } else {
        writeln!(out, "{}  pushed to {what} {}: {url}", opened.run, opened.name())?;
    }
    Ok(0)
}
