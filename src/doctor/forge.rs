//! Pull requests: `corral pr` opens them with the forge's own CLI (`gh`
//! for GitHub, `glab` for GitLab), logged in as the user. Whether each is
//! here and logged in; neither is needed for anything else.

use std::process::Command;

use super::run_briefly::{run, Answer};
use super::{Finding, Level};
use crate::forge::{Forge, Tool};

const AREA: &str = "git";

/// A finding for each forge's CLI.
pub fn check() -> Vec<Finding> {
    [Forge::GitHub, Forge::GitLab].into_iter().map(|forge| finding(Tool::of(forge))).collect()
}

fn finding(tool: Tool) -> Finding {
    let program = tool.program();
    let what = tool.forge().request_name();
    let mut command = Command::new(program);
    command.args(["auth", "status"]).env("GH_PROMPT_DISABLED", "1").env("NO_PROMPT", "1");
    match run(command) {
        Answer::Said(_) => Finding::ok(AREA, program, format!("{program} is logged in: `corral pr` opens {what}s")),
        Answer::NotStarted(_) => Finding::new(
            AREA,
            program,
            Level::Note,
            format!("{program} is not installed: `corral pr` needs it for a {what}"),
        )
        .fix(tool.install()),
        Answer::Failed(said) => Finding::new(
            AREA,
            program,
            Level::Warn,
            format!("{program} is not logged in, so `corral pr` cannot open a {what}: {}", first_line(&said)),
        )
        .fix(format!("{program} auth login")),
        Answer::Hung => Finding::new(AREA, program, Level::Warn, format!("`{program} auth status` did not answer")),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("it said nothing")
}
