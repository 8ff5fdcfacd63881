//! `corral allow RUN --write PATH | --host HOST`: widen a run's sandbox by
//! what it was refused, and let its agent go on in its session.

use std::io::Write;

use corral::sandbox::Widening;
use corral::store::ReplyPlaced;
use corral::upkeep::queue::ShepherdCommand;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    run: String,
    /// A folder or file it may write too (full path; `~` is your home).
    #[arg(long, value_name = "PATH")]
    write: Vec<String>,
    /// A host it may reach too (`github.com`, `*.example.com`).
    #[arg(long, value_name = "HOST")]
    host: Vec<String>,
    /// Only widen the sandbox: do not tell the agent to go on.
    #[arg(long)]
    quiet: bool,
    /// What to tell the agent instead of "the sandbox now lets you …".
    #[arg(num_args = 0.., last = true)]
    text: Vec<String>,
}

impl Args {
    /// The run widened, as given.
    pub fn run(&self) -> &String {
        &self.run
    }
}

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    let asked = Widening { write: args.write, hosts: args.host };
    let text = args.text.join(" ");
    let message = (!text.trim().is_empty()).then_some(text.as_str());
    let allowed = corral::verbs::allow::allow(store, &args.run, &asked, message, args.quiet, shepherd)?;
    let what: Vec<String> = allowed.widening.entries().map(|(kind, value)| format!("{kind} {value}")).collect();
    let id = &allowed.run_id;
    writeln!(out, "{id}: its sandbox now allows {}", what.join(", "))?;
    match allowed.replied.map(|r| (r.placed, r.run.status)) {
        None => {}
        Some((ReplyPlaced::Kept, status)) => {
            writeln!(out, "{id}: {status} — the agent is told to go on when its turn ends")?
        }
        Some((ReplyPlaced::Reopened, _)) => writeln!(out, "{id}: a new turn of its session goes on with it")?,
    }
    Ok(0)
}
