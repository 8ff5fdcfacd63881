//! The end of a failed check's log, sent to the run with the check's name:
//! an agent fixes a failing test from its assertion, not from a link it
//! cannot open. GitHub Actions' jobs through `gh run view --job N
//! --log-failed`, GitLab's through its jobs API (`glab api`); a check of
//! another CI is sent as its link. A log is read once per failure: a look
//! that finds the same failed check keeps the tail it read before.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::clean;
use super::tool::Tool;

/// The most lines of a log's end that are sent.
const LINES: usize = 40;

/// The most characters of one line (a minified bundle's line is a megabyte).
const LINE_CHARS: usize = 300;

/// What comes between a failed check's header and the end of its log.
const TAIL_MARK: &str = "\nThe end of its log:\n";

/// The entry of a failed check: `header` (naming it, and its link) and the
/// end of its log under it. Kept from the last look's feedback `before`
/// when that holds the end of a log under the same header (the same
/// failure: its log is not read again each minute); else read with `read`
/// (a log that could not be read is asked for again at the next look).
pub(super) fn entry(header: String, before: Option<&str>, read: impl FnOnce() -> Option<String>) -> String {
    let same = |e: &&str| e.lines().next() == Some(header.as_str()) && e.contains(TAIL_MARK);
    if let Some(kept) = before.and_then(|b| b.split("\n\n").find(same)) {
        return kept.to_string();
    }
    match read().map(|log| tail(&log)).filter(|t| !t.is_empty()) {
        Some(tail) => format!("{header}{TAIL_MARK}{tail}"),
        None => header,
    }
}

/// A GitHub Actions job's failed steps, if `link` is a job's page
/// (`…/actions/runs/R/job/J`) of the repository of the pull request at
/// `pr_page` (a check's link elsewhere is sent as a link, never read).
pub(super) fn github_job(tool: Tool, dir: &Path, link: &str, pr_page: &str) -> Option<String> {
    static JOB: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"/actions/runs/\d+/job/(\d+)").expect("a valid pattern"));
    let job = JOB.captures(link)?.get(1)?.as_str().to_string();
    // The job's own repository, as its page says.
    let (host, repo) = super::repository_of_page(link, "/actions/runs/")?;
    let (pr_host, pr_repo) = super::repository_of_page(pr_page, "/pull/")?;
    if !host.eq_ignore_ascii_case(&pr_host) || !repo.eq_ignore_ascii_case(&pr_repo) {
        return None;
    }
    let repo = format!("{host}/{repo}");
    let args = ["run", "view", "--job", &job, "--log-failed", "--repo", &repo];
    let log = tool.run(dir, "read the failed job's log", &args, None).ok()?;
    // Each line is `JOB<TAB>STEP<TAB>TIME TEXT`: the text is what matters.
    static STAMP: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\d{4}-\d\d-\d\dT[\d:.]+Z ?").expect("a valid pattern"));
    let lines: Vec<String> = log
        .lines()
        .map(|line| {
            let text = line.splitn(3, '\t').nth(2).unwrap_or(line);
            STAMP.replace(text, "").into_owned()
        })
        .collect();
    Some(lines.join("\n"))
}

/// A GitLab job's trace, of project `project` (its path, URL-encoded) on
/// `host`.
pub(super) fn gitlab_job(tool: Tool, dir: &Path, (host, project): (&str, &str), job: i64) -> Option<String> {
    let path = format!("projects/{project}/jobs/{job}/trace");
    tool.run(dir, "read the failed job's log", &["api", "--hostname", host, &path], None).ok()
}

/// The last [`LINES`] lines of `log` that say something: escape sequences
/// (colours, cursor moves) out, every line at most [`LINE_CHARS`], and no
/// blank line (an entry of the feedback is one paragraph).
fn tail(log: &str) -> String {
    let lines: Vec<String> = log
        .lines()
        // A progress bar's line is rewritten with `\r`: its last state.
        .map(|line| line.rsplit('\r').find(|part| !part.trim().is_empty()).unwrap_or(""))
        .map(|line| clean(line).replace('\t', "    "))
        .filter(|line| !line.trim().is_empty())
        .map(|line| match line.char_indices().nth(LINE_CHARS) {
            Some((at, _)) => format!("{}…", &line[..at]),
            None => line,
        })
        .collect();
    lines[lines.len().saturating_sub(LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logs_end_is_its_last_lines_without_escapes_or_blanks() {
        let log = (1..=60).map(|n| format!("\x1b[31mline {n}\x1b[0m\r\n\n")).collect::<String>();
        let tail = tail(&log);
        assert_eq!(tail.lines().count(), LINES);
        assert_eq!(tail.lines().next(), Some("line 21"));
        assert!(!tail.contains('\x1b') && !tail.contains("\n\n"), "{tail:?}");
        assert_eq!(super::tail("50%\r100%\n\x1b]0;title\x07done"), "100%\ndone");
        assert!(super::tail(&"x".repeat(5000)).chars().count() <= LINE_CHARS + 1);
    }

    #[test]
    fn the_same_failure_keeps_the_tail_read_before() {
        let before = "Review by a:\nfix\n\nCheck \"t\" failed. L\nThe end of its log:\nboom";
        let kept = entry("Check \"t\" failed. L".into(), Some(before), || panic!("read again"));
        assert_eq!(kept, "Check \"t\" failed. L\nThe end of its log:\nboom");
        let new = entry("Check \"u\" failed. M".into(), Some(before), || Some("bang\n".into()));
        assert_eq!(new, "Check \"u\" failed. M\nThe end of its log:\nbang");
        assert_eq!(entry("Check \"v\" failed.".into(), None, || None), "Check \"v\" failed.");
        // A log not read at the last look is asked for again.
        let unread = "Check \"v\" failed.";
        let now = entry("Check \"v\" failed.".into(), Some(unread), || Some("late\n".into()));
        assert_eq!(now, "Check \"v\" failed.\nThe end of its log:\nlate");
    }
}
