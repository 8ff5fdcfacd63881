//! `corral presets`: the presets in effect for a folder, what each overrides,
//! which of a project's need trusting, and every file that could not be
//! used; `corral presets trust [DIR]`: trust a project's presets as they are.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::table::{cell, or_dash, Table};
use corral::preset::{self, Roots};
use corral::Store;

/// What `corral presets` does besides listing.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Trust the project's presets that run a command, a setup or
    /// arguments of their own, as their files are now (a changed file is
    /// asked about again). Read them first: they are the repository's code.
    Trust {
        /// The project folder (default: the current one).
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// Find project presets from this folder (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One entry of `presets --json`: a usable preset with every field, or a
/// file with problems. Limits are written as in a preset (`30m`).
#[derive(Serialize, Default)]
struct Entry<'a> {
    name: Option<&'a str>,
    description: Option<&'a str>,
    agent: Option<&'a str>,
    model: Option<&'a str>,
    tools: &'a [String],
    timeout: Option<String>,
    idle_timeout: Option<String>,
    startup_timeout: Option<String>,
    children_timeout: Option<String>,
    command: &'a [String],
    args: &'a [String],
    system_prompt: Option<&'a str>,
    source: &'a str,
    path: &'a str,
    overrides: Vec<&'a str>,
    problems: Vec<&'a str>,
    /// Why its agent cannot start here (not installed, not executable).
    #[serde(skip_serializing_if = "Option::is_none")]
    unavailable: Option<String>,
    /// What looks wrong but does not stop it (a misspelt key).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    /// Why a project's preset does not run until trusted, while it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    untrusted: Option<String>,
    /// What a project's preset replaces of the same name.
    #[serde(skip_serializing_if = "Option::is_none")]
    shadows: Option<String>,
}

/// `corral presets trust [DIR]`: trusts the presets of DIR's project that
/// run code of their own, as their files are now.
fn trust(store: &mut Store, dir: Option<PathBuf>, out: &mut impl Write) -> anyhow::Result<i32> {
    let dir = match dir {
        Some(dir) => std::path::absolute(&dir).unwrap_or(dir),
        None => corral::verbs::launch::working_folder()?,
    };
    let set = preset::discover(&Roots::new(store.home(), Some(&dir)));
    let default = corral::home::config::Config::load(store.home())?.sandbox;
    let trusted = corral::trust::trust(store, &set.presets, default.as_ref())?;
    if trusted.is_empty() {
        writeln!(
            out,
            "nothing to trust: no preset of {} runs a command, a setup or arguments of its own",
            dir.display()
        )?;
    }
    for path in &trusted {
        writeln!(out, "trusted {path}")?;
    }
    Ok(0)
}

/// Why `e` does not run until trusted, if it does not.
fn untrusted(store: &Store, e: &corral::preset::Effective) -> anyhow::Result<Option<String>> {
    // The default sandbox a project preset may not widen; a broken
    // config.toml is said by the launch itself.
    let default = corral::home::config::Config::load(store.home()).ok().and_then(|c| c.sandbox);
    match corral::trust::check(store, &e.preset, default.as_ref()) {
        Ok(()) => Ok(None),
        Err(corral::trust::CheckError::Untrusted(u)) => Ok(Some(u.to_string())),
        Err(corral::trust::CheckError::Store(e)) => Err(e.into()),
    }
}

/// A limit as a preset writes it.
fn limit(d: Option<std::time::Duration>) -> Option<String> {
    d.map(|d| humantime::format_duration(d).to_string())
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    match args.action {
        Some(Action::Trust { dir }) => trust(store, dir, out),
        None => list(store, args.cwd, args.json, out),
    }
}

fn list(store: &Store, cwd: Option<PathBuf>, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => corral::verbs::launch::working_folder()?,
    };
    let set = preset::discover(&Roots::new(store.home(), Some(&cwd)));
    let path = std::env::var_os("PATH");
    let unavailable = |p: &corral::Preset| preset::available::unavailable(p, path.as_deref(), &cwd);
    if json {
        let mut entries: Vec<Entry<'_>> = set
            .presets
            .iter()
            .map(|e| {
                let p = &e.preset;
                Entry {
                    name: Some(&p.name),
                    description: Some(&p.description),
                    agent: Some(p.agent.as_str()),
                    model: p.model.as_deref(),
                    tools: &p.tools,
                    timeout: limit(p.timeout),
                    idle_timeout: limit(p.idle_timeout),
                    startup_timeout: limit(p.startup_timeout),
                    children_timeout: limit(p.children_timeout),
                    command: &p.command,
                    args: &p.args,
                    system_prompt: Some(&p.system_prompt),
                    source: p.source.as_str(),
                    path: &p.path,
                    overrides: e.overrides.iter().map(String::as_str).collect(),
                    problems: Vec::new(),
                    unavailable: unavailable(p),
                    warnings: &p.warnings,
                    untrusted: untrusted(store, e).ok().flatten(),
                    shadows: corral::trust::shadows(e),
                }
            })
            .collect();
        entries.extend(set.problems.iter().map(|p| Entry {
            source: p.source.as_str(),
            path: &p.path,
            problems: vec![&p.reason],
            ..Entry::default()
        }));
        super::print_json(out, &entries)?;
        return Ok(0);
    }

    let mut table = Table::new(&["NAME", "AGENT", "MODEL", "SOURCE", "DESCRIPTION"]);
    for e in &set.presets {
        let p = &e.preset;
        table.row(vec![
            p.name.clone(),
            p.agent.to_string(),
            or_dash(p.model.as_deref()),
            p.source.to_string(),
            cell(&p.description, 70),
        ]);
    }
    table.write(out)?;
    writeln!(out)?;
    writeln!(out, "Files:")?;
    for e in &set.presets {
        writeln!(out, "  {:<16} {}", e.preset.name, e.preset.path)?;
        for lower in &e.overrides {
            writeln!(out, "  {:<16}   overrides {lower}", "")?;
        }
    }
    let cannot: Vec<(&str, String)> =
        set.presets.iter().filter_map(|e| Some((e.preset.name.as_str(), unavailable(&e.preset)?))).collect();
    if !cannot.is_empty() {
        writeln!(out)?;
        writeln!(out, "Cannot start here ({}):", cannot.len())?;
        for (name, why) in &cannot {
            writeln!(out, "  {name:<16} {why}")?;
        }
    }
    let warned: Vec<&corral::Preset> =
        set.presets.iter().map(|e| &e.preset).filter(|p| !p.warnings.is_empty()).collect();
    if !warned.is_empty() {
        writeln!(out)?;
        writeln!(out, "Warnings ({}):", warned.len())?;
        for p in warned {
            writeln!(out, "  {} ({})", p.name, p.path)?;
            for w in &p.warnings {
                writeln!(out, "    {w}")?;
            }
        }
    }
    let shadowing: Vec<String> = set.presets.iter().filter_map(corral::trust::shadows).collect();
    if !shadowing.is_empty() {
        writeln!(out)?;
        writeln!(out, "The project's own ({}):", shadowing.len())?;
        for said in &shadowing {
            writeln!(out, "  {said}")?;
        }
    }
    let mut waiting = Vec::new();
    for e in &set.presets {
        if let Some(why) = untrusted(store, e)? {
            waiting.push(why);
        }
    }
    if !waiting.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not trusted yet ({}):", waiting.len())?;
        for why in &waiting {
            writeln!(out, "  {why}")?;
        }
    }
    if !set.problems.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not usable ({}):", set.problems.len())?;
        for p in &set.problems {
            writeln!(out, "  {}\n    {}", p.path, p.reason)?;
        }
    }
    Ok(0)
}
