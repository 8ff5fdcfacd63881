//! `corral presets`: the presets in effect for a folder, what each overrides,
//! and every file that could not be used.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::table::{cell, or_dash, Table};
use corral::preset::{self, Roots};
use corral::Store;

/// One entry of `presets --json`: a usable preset, or a file with problems.
#[derive(Serialize)]
struct Entry<'a> {
    name: Option<&'a str>,
    description: Option<&'a str>,
    agent: Option<&'a str>,
    model: Option<&'a str>,
    source: &'a str,
    path: &'a str,
    overrides: Vec<&'a str>,
    problems: Vec<&'a str>,
}

pub fn run(store: &Store, cwd: Option<PathBuf>, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let set = preset::discover(&Roots::new(store.home(), Some(&cwd)));
    if json {
        let mut entries: Vec<Entry<'_>> = set
            .presets
            .iter()
            .map(|e| Entry {
                name: Some(&e.preset.name),
                description: Some(&e.preset.description),
                agent: Some(e.preset.agent.as_str()),
                model: e.preset.model.as_deref(),
                source: e.preset.source.as_str(),
                path: &e.preset.path,
                overrides: e.overrides.iter().map(String::as_str).collect(),
                problems: Vec::new(),
            })
            .collect();
        entries.extend(set.problems.iter().map(|p| Entry {
            name: None,
            description: None,
            agent: None,
            model: None,
            source: p.source.as_str(),
            path: &p.path,
            overrides: Vec::new(),
            problems: vec![&p.reason],
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
    if !set.problems.is_empty() {
        writeln!(out)?;
        writeln!(out, "Not usable ({}):", set.problems.len())?;
        for p in &set.problems {
            writeln!(out, "  {}\n    {}", p.path, p.reason)?;
        }
    }
    Ok(0)
}
