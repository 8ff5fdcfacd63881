//! `corral rm RUN... [--dry-run]`: removes ended runs for good, with the
//! runs they launched: rows, transcripts, folders, and worktrees that hold
//! nothing unmerged (the others are kept, and said).

use std::io::Write;

use corral::verbs::remove::{remove, Removed};
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run ids (or unique prefixes).
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    let Args { runs, dry_run, json } = args;
    let mut all = Vec::new();
    for id in &runs {
        all.push(remove(store, id, dry_run)?);
    }
    let database = if dry_run { None } else { corral::verbs::remove::reclaim(store) };
    if json {
        super::print_json(out, &all)?;
    } else {
        for removed in &all {
            say(removed, dry_run, out)?;
        }
        if let Some(db) = database {
            say_reclaimed(&db, out)?;
        }
    }
    Ok(0)
}

/// How much room the database gave back.
pub fn say_reclaimed(db: &corral::store::Reclaimed, out: &mut impl Write) -> std::io::Result<()> {
    use corral::cost::resources::human_bytes;
    let freed = db.before.saturating_sub(db.after);
    writeln!(out, "database {} → {} ({} given back)", human_bytes(db.before), human_bytes(db.after), human_bytes(freed))
}

/// One line per run removed (or that would be), and each worktree kept.
pub fn say(removed: &Removed, dry_run: bool, out: &mut impl Write) -> std::io::Result<()> {
    let verb = if dry_run { "would remove" } else { "removed" };
    let (first, launched) = removed.ids.split_first().expect("a removal names its run");
    match launched.len() {
        0 => writeln!(out, "{first}  {verb}")?,
        n => writeln!(out, "{first}  {verb}, with {n} run(s) it launched: {}", launched.join(" "))?,
    }
    for pr in &removed.pull_requests_left_open {
        writeln!(out, "  {} stays open on the forge: Corral follows it no more", super::table::name(pr))?;
    }
    for kept in &removed.kept_worktrees {
        let files = kept.unmerged.iter().take(5).map(|f| super::table::name(f)).collect::<Vec<_>>().join(", ");
        let (n, repo, branch, path) = (kept.unmerged.len(), &kept.repo, &kept.branch, &kept.path);
        match kept.there {
            // What the agent left uncommitted is in the worktree alone: it
            // is committed there before the branch can be merged.
            true => writeln!(
                out,
                "  worktree {path} kept: {n} file(s) not in your branch ({files}); take them with \
                 `git -C {path} add -A; git -C {path} commit -qm 'work of the run'; git -C {repo} merge {branch}`, \
                 or drop them with `git -C {repo} worktree remove --force {path}` and `git -C {repo} branch -D {branch}`"
            )?,
            false => writeln!(
                out,
                "  branch {branch} kept (its worktree {path} was removed): {n} file(s) not in your branch ({files}); \
                 take them with `git -C {repo} merge {branch}`, or drop them with `git -C {repo} branch -D {branch}`"
            )?,
        }
    }
    Ok(())
}
