//! `corral relaunch RUN [--edit]`: the same preset, task, folder, model,
//! worktree choice and environment, as a new run; with `--edit`, the task
//! is opened in the user's editor first.

use std::io::Write;
use std::process::Command;

use anyhow::Context as _;
use corral::upkeep::queue::ShepherdCommand;
use corral::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run id (or a unique prefix).
    pub run: String,
    /// Edit the task first, in $VISUAL or $EDITOR.
    #[arg(long)]
    pub edit: bool,
    /// Print the new run as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand, out: &mut impl Write) -> anyhow::Result<i32> {
    let Args { run: id, edit, json } = args;
    let id = id.as_str();
    let task = if edit { Some(edited(&store.find_run(id)?.task)?) } else { None };
    let run = corral::verbs::launch::relaunch_with(store, id, task, shepherd)?;
    if json {
        super::print_json(out, &run)?;
    } else {
        writeln!(out, "{}", run.id)?;
    }
    Ok(0)
}

/// `task` as the user leaves it in `$VISUAL`, `$EDITOR` or `vi` (run by the
/// shell, as git does, so `EDITOR="code -w"` works).
fn edited(task: &str) -> anyhow::Result<String> {
    let mut file = tempfile::Builder::new().prefix("corral-task-").suffix(".md").tempfile()?;
    file.write_all(task.as_bytes())?;
    file.flush()?;
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|e| !e.trim().is_empty()))
        .unwrap_or_else(|| "vi".to_string());
    let status = Command::new("sh")
        .args(["-c", &format!("{editor} \"$1\""), "sh"])
        .arg(file.path())
        .status()
        .with_context(|| format!("cannot start the editor `{editor}`: set EDITOR"))?;
    if !status.success() {
        anyhow::bail!("the editor `{editor}` exited with {status}: nothing launched");
    }
    let text = std::fs::read_to_string(file.path()).context("reading the edited task")?;
    // Editors end the file with a newline the task did not have.
    Ok(text.trim_end().to_string())
}
