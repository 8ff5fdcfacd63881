//! `corral reply RUN TEXT...`: say one more thing to a run's agent, in a new
//! turn of its own session (or, with `--allow-denied`, let it use the tool
//! calls it was refused).

use corral::run::blocking::Waiter;
use std::io::Write;

use corral::store::ReplyPlaced;
use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::reply::reply;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    run: String,
    /// What to tell the agent. Several words are joined with spaces.
    #[arg(num_args = 0..)]
    text: Vec<String>,
    /// Allow exactly the tool calls the agent was refused, for the new turn,
    /// and what its sandbox refused (writes and hosts; see `corral allow`).
    #[arg(long)]
    allow_denied: bool,
    /// Block until the run ends again; exit as `corral wait` does.
    #[arg(long)]
    wait: bool,
    /// Print the run as JSON.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// The run replied to, as given.
    pub fn run(&self) -> &String {
        &self.run
    }
}

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    let text = args.text.join(" ");
    let replied = if args.allow_denied {
        corral::verbs::allow::allow_denied(store, &args.run, &text, shepherd)?
    } else {
        reply(store, &args.run, &text, false, shepherd)?
    };
    let id = replied.run.id.clone();
    if args.wait {
        let caller = corral::run::caller::caller_run(store)?;
        let result = corral::verbs::wait::wait_for(
            store,
            &[id],
            None,
            caller.as_deref(),
            shepherd,
            None,
            Waiter::Command,
            None,
        )?;
        corral::verbs::wait::collected_by(store, caller.as_deref(), &result.runs)?;
        if args.json {
            super::print_json(out, &result.runs[0])?;
        } else {
            super::wait::print_ended(&result.runs[0], out)?;
        }
        return Ok(result.exit_code());
    }
    if args.json {
        return super::print_json(out, &replied.run).map(|()| 0);
    }
    match replied.placed {
        ReplyPlaced::Kept => {
            writeln!(out, "{id}: {} — the agent gets the reply when its turn ends", replied.run.status)?
        }
        ReplyPlaced::Reopened if replied.run.status.is_terminal() => {
            writeln!(out, "{id}: a new turn of its session starts once its last process is gone")?
        }
        ReplyPlaced::Reopened => writeln!(out, "{id}: {} — a new turn of its session", replied.run.status)?,
    }
    if !replied.allowed.is_empty() {
        writeln!(out, "allowed for that turn: {}", replied.allowed.join(", "))?;
    }
    Ok(0)
}
