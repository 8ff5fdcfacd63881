//! Colour on a terminal: status words and diffs, never into a pipe or a
//! file, and never when `NO_COLOR` is set (no-color.org).

use corral::RunStatus;

/// Whether to colour what goes to standard output.
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// `text` in the colour of `status` (green done, red failed or lost,
/// yellow aborted, cyan working, dim waiting for something).
pub fn status(text: &str, status: RunStatus) -> String {
    let code = match status {
        RunStatus::Completed => "32",
        RunStatus::Failed | RunStatus::Lost => "31",
        RunStatus::Aborted => "33",
        RunStatus::Running | RunStatus::Starting => "36",
        RunStatus::Waiting | RunStatus::Queued | RunStatus::Paused => "2",
    };
    paint(text, code)
}

/// A doctor's word in its level's colour (green ok, yellow warn, red fail).
pub fn level(text: &str, level: corral::doctor::Level) -> String {
    use corral::doctor::Level;
    let code = match level {
        Level::Ok => "32",
        Level::Note => "2",
        Level::Warn => "33",
        Level::Fail => "1;31",
    };
    paint(text, code)
}

/// A unified diff with added lines green, removed red, hunks cyan.
pub fn diff(patch: &str) -> String {
    patch
        .split_inclusive('\n')
        .map(|line| {
            let code = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
                Some("1")
            } else if line.starts_with('+') {
                Some("32")
            } else if line.starts_with('-') {
                Some("31")
            } else if line.starts_with("@@") {
                Some("36")
            } else {
                None
            };
            match code {
                Some(code) => {
                    let (body, end) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
                    format!("{}{end}", paint(body, code))
                }
                None => line.to_string(),
            }
        })
        .collect()
}

fn paint(text: &str, code: &str) -> String {
    format!("\x1b[{code}m{text}\x1b[0m")
}
