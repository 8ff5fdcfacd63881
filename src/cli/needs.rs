//! `corral needs`: what waits for your word, each with why and the command
//! that answers it (the same list the tray's red icon and its "Needs you"
//! section show).

use std::io::Write;

use corral::attention::Item;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON (an array of items: the run or schedule, its reason,
    /// the reason in words, and its actions as `corral` arguments).
    #[arg(long)]
    pub json: bool,
    /// Looked at, nothing more to do: an ended run that needs you (a
    /// failure, a refusal) leaves the list, as when its page is opened.
    #[arg(long, value_name = "RUN")]
    pub dismiss: Option<String>,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    if let Some(id) = &args.dismiss {
        let run = store.find_run(id)?;
        if !run.status.is_terminal() {
            anyhow::bail!(
                "run {} has not ended ({}): only an ended run is dismissed; what it waits for is answered by its \
                 actions (`corral needs` lists them)",
                run.id,
                run.status
            );
        }
        store.mark_seen(&run.id)?;
        writeln!(out, "{}: dismissed", run.id)?;
        return Ok(0);
    }
    let corral::attention::Needs { items, beyond } = corral::attention::needs(store)?;
    if args.json {
        super::print_json(out, &items)?;
        // The array keeps its shape; what it leaves out is said, never
        // silently dropped.
        if beyond > 0 {
            eprintln!("corral: and {beyond} more ended runs that need you, older: `corral ls --all` lists them");
        }
        return Ok(0);
    }
    if items.is_empty() && beyond == 0 {
        writeln!(out, "nothing needs you")?;
        return Ok(0);
    }
    let width = items.iter().map(|i| i.chip.len()).max().unwrap_or(0);
    for item in &items {
        // On its line, whatever a run's error holds (a line break that
        // would read as one of Corral's answers is shown as `\n`).
        let task = match &item.subject {
            corral::attention::Subject::Run { task, .. } => format!(" — {}", super::table::cell(task, 60)),
            corral::attention::Subject::Schedule { .. } => String::new(),
        };
        writeln!(out, "{:width$}  {}{task}", item.chip, super::table::name(&item.words))?;
        writeln!(out, "{:width$}  {}", "", answers(item))?;
    }
    if beyond > 0 {
        writeln!(out, "and {beyond} more ended runs that need you, older: `corral ls --all` lists them")?;
    }
    Ok(0)
}

/// `Allow $2.00 more: corral resume k3x9 --budget usd=4 · Stop: corral abort k3x9`.
fn answers(item: &Item) -> String {
    let each: Vec<String> = item
        .actions
        .iter()
        .map(|a| {
            let argv: Vec<String> = a.argv.iter().map(|w| quoted(w)).collect();
            format!("{}: corral {}", super::table::name(&a.label), argv.join(" "))
        })
        .collect();
    each.join(" · ")
}

/// A word as a shell takes it back.
fn quoted(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_+./=:@".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", super::table::printable(word).replace('\'', r"'\''"))
    }
}
