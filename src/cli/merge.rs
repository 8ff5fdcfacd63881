//! `corral merge RUN`: brings a run's changes into the branch it started
//! from, as one commit (or, with `--no-squash`, a merge of its commits). It
//! never loses the user's work: with a conflict, or uncommitted changes in
//! the files it would touch, it changes nothing and says why.

use std::io::Write;

use corral::Store;

pub fn run(store: &mut Store, id: &str, no_squash: bool, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let merged = corral::review::merge(store, id, no_squash)?;
    if json {
        super::print_json(out, &merged)?;
    } else {
        let short = &merged.commit[..merged.commit.len().min(12)];
        writeln!(out, "{}  merged into {} as {short}", merged.id, merged.branch)?;
    }
    Ok(0)
}
