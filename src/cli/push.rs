//! `corral push test|listen`: pushes to your phone (`[push]` in
//! config.toml). The work is `corral-push`'s, a program of its own next to
//! this one: `corral`, which every run's shepherd is, links no HTTPS.

use std::os::unix::process::CommandExt;

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Send one push with an "Answer" button and wait for its answer.
    Test {
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Follow the answers and send what needs you, until stopped.
    Listen,
}

/// Hands over to `corral-push` (never returns unless it cannot).
pub fn run(args: Args) -> anyhow::Result<i32> {
    let program = helper()?;
    let mut command = std::process::Command::new(&program);
    match args.action {
        Action::Test { timeout } => command.args(["test", "--timeout", &timeout.to_string()]),
        Action::Listen => command.arg("listen"),
    };
    let e = command.exec();
    Err(e).with_context(|| format!("starting {}", program.display()))
}

/// `corral-push`, next to this program.
pub fn helper() -> anyhow::Result<std::path::PathBuf> {
    let me = std::env::current_exe().context("finding the corral executable")?;
    Ok(me.with_file_name("corral-push"))
}
