//! `corral search TEXT`: full-text search over tasks, results and transcripts.

use std::io::Write;

use super::table::{cell, Table};
use corral::Store;

/// Most hits shown.
const LIMIT: usize = 50;

pub fn run(store: &Store, text: &str, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let hits = store.search(text, LIMIT)?;
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
        table.row(vec![hit.id.clone(), hit.field.clone(), cell(&hit.snippet, 90)]);
    }
    table.write(out)?;
    Ok(0)
}
