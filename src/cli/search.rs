//! `corral search TEXT`: full-text search over tasks, results and
//! transcripts, here and on each host of config.toml (asked side by side,
//! each for at most a few seconds; one that does not answer is said).

use std::io::Write;

use super::table::{cell, Table};
use corral::store::SearchHit;
use corral::{Home, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Words to find.
    #[arg(required = true)]
    pub text: Vec<String>,
    /// Only this machine's runs (not the hosts of config.toml).
    #[arg(long)]
    pub local: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most hits shown.
const LIMIT: usize = 50;

/// How long a host is given to answer.
const HOST_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

pub fn run(store: &Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let (text, local, json) = (&args.text.join(" "), args.local, args.json);
    let mut hits = store.search(text, LIMIT)?;
    if !local {
        hits.extend(on_hosts(store.home(), text));
    }
    if json {
        super::print_json(out, &hits)?;
        return Ok(0);
    }
    if hits.is_empty() {
        writeln!(out, "nothing matches '{text}'")?;
        return Ok(0);
    }
    let mut table = Table::new(&["RUN", "WHERE", "MATCH"]);
    for hit in &hits {
        let id = match &hit.host {
            Some(host) => format!("{host}:{}", hit.id),
            None => hit.id.clone(),
        };
        table.row(vec![id, hit.field.clone(), cell(&hit.snippet, 90)]);
    }
    table.write(out)?;
    Ok(0)
}

/// The hits of every host of config.toml, asked side by side.
fn on_hosts(home: &Home, text: &str) -> Vec<SearchHit> {
    let Ok(config) = corral::home::config::Config::load(home) else { return Vec::new() };
    let (found, answers) = std::sync::mpsc::channel();
    for host in &config.hosts {
        let (home, name, text, found) = (home.clone(), host.name.clone(), text.to_string(), found.clone());
        std::thread::spawn(move || {
            // Theirs only: hosts that name each other must not ask round.
            let args = ["search".into(), "--local".into(), "--json".into(), "--".into(), text.into()];
            let hits = corral::remote::call(&home, &name, &args).map_err(|e| e.to_string()).and_then(|(_, printed)| {
                serde_json::from_slice::<Vec<SearchHit>>(&printed).map_err(|e| format!("host '{name}': {e}"))
            });
            let _ = found.send((name, hits));
        });
    }
    let deadline = std::time::Instant::now() + HOST_WITHIN;
    let mut all = Vec::new();
    let mut answered = Vec::new();
    while answered.len() < config.hosts.len() {
        match answers.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            Ok((name, hits)) => {
                match hits {
                    Ok(hits) => all.extend(hits.into_iter().map(|hit| SearchHit { host: Some(name.clone()), ..hit })),
                    Err(e) => eprintln!("corral: not searched: {e}"),
                }
                answered.push(name);
            }
            Err(_) => break,
        }
    }
    // The hosts still silent are the ones named: not whichever was next.
    for host in config.hosts.iter().filter(|h| !answered.contains(&h.name)) {
        eprintln!("corral: not searched: host '{}' did not answer within {HOST_WITHIN:?}", host.name);
    }
    all
}
