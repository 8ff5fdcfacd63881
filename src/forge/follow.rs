//! Following a run's pull request without a server of Corral's: its state,
//! checks, reviews and line comments read with the forge's CLI (`gh pr
//! view`, `gh api …/comments`; `glab mr view`), at most once a minute a
//! pull request (the tray's follower, or `corral pr RUN --check` when the
//! user asks). What the forge asks of the run is kept in its words and
//! becomes a "Needs you" item, whose **Send to the run** is [`send`]: a
//! reply to the run framed as the forge's words.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::tool::{pages, read, Forge, Tool};
use super::{clean, feedback_of, gitlab, log_tail, repository_of_page, ForgeError};
use crate::store::{PullRequestLook, PullRequestRow, Store};
use crate::upkeep::queue::ShepherdCommand;

/// The least time between two looks at one pull request (the forge's
/// rate limit is the user's, shared with everything they run).
pub const LOOK_EVERY: Duration = Duration::from_secs(60);

/// The longest a pull request's looks wait after failures (the forge
/// unreachable, the CLI logged out): twice as long after each, up to this.
pub const RETRY_MOST: Duration = Duration::from_secs(30 * 60);

/// Follows every open pull request at the forge's pace: what the tray runs
/// in a thread of its own. Runtime state only (what failed, and when to
/// try again); what was seen is in the store.
#[derive(Debug, Default)]
pub struct Follower {
    failures: std::collections::HashMap<String, (u32, std::time::Instant)>,
}

/// Follows every open pull request for ever on a thread of its own: the
/// tray's, and `corral push listen`'s on a machine without one. Two
/// followers share the pace: each looks only at what nobody looked at
/// for [`LOOK_EVERY`] (the store says when).
pub fn start_following(home: crate::home::Home) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("corral-pulls".into()).spawn(move || {
        let mut follower = Follower::default();
        loop {
            let next = match Store::open(&home) {
                Ok(mut store) => follower.look_due(&mut store),
                Err(e) => {
                    tracing::warn!("cannot follow pull requests: {e}");
                    LOOK_EVERY
                }
            };
            std::thread::sleep(next);
        }
    })
}

impl Follower {
    /// Looks at each open pull request last looked at [`LOOK_EVERY`] ago
    /// or more (not before its retry after a failure); how long until the
    /// next is due.
    pub fn look_due(&mut self, store: &mut Store) -> Duration {
        // One look a pull request, however many runs it holds.
        let mut urls = std::collections::HashSet::new();
        let open: Vec<PullRequestRow> = match store.pull_requests() {
            Ok(all) => all.into_iter().filter(|pr| pr.state == "open" && urls.insert(pr.url.clone())).collect(),
            Err(e) => {
                tracing::warn!("cannot list pull requests: {e}");
                return LOOK_EVERY;
            }
        };
        let now = crate::text::time::now();
        let mut next = LOOK_EVERY;
        for pr in open {
            let since = pr.looked_at.as_deref().and_then(crate::text::time::parse).map(|at| now - at);
            let due_in = since
                .and_then(|since| since.to_std().ok())
                .map_or(Duration::ZERO, |since| LOOK_EVERY.saturating_sub(since));
            let retry_in = self
                .failures
                .get(&pr.run_id)
                .map_or(Duration::ZERO, |(_, at)| at.saturating_duration_since(std::time::Instant::now()));
            let wait = due_in.max(retry_in);
            if !wait.is_zero() {
                next = next.min(wait);
                continue;
            }
            match look(store, &pr.run_id) {
                Ok(_) => {
                    self.failures.remove(&pr.run_id);
                }
                Err(e) => {
                    let tries = self.failures.get(&pr.run_id).map_or(0, |(n, _)| *n) + 1;
                    let wait = (LOOK_EVERY * 2u32.saturating_pow(tries)).min(RETRY_MOST);
                    tracing::warn!(run = pr.run_id, "cannot read its pull request (again in {wait:?}): {e}");
                    self.failures.insert(pr.run_id.clone(), (tries, std::time::Instant::now() + wait));
                    next = next.min(wait);
                }
            }
        }
        next
    }
}

/// Asks the forge about run `run_id`'s pull request now, and records what
/// it said. The pull request as recorded after the look.
pub fn look(store: &mut Store, run_id: &str) -> Result<PullRequestRow, ForgeError> {
    let run = store.find_run(run_id)?;
    let Some(pr) = store.pull_request(&run.id)? else {
        return Err(ForgeError::NoPullRequest { run: run.id });
    };
    let repo = run.worktree_repo.clone().unwrap_or_default();
    let dir = if Path::new(&repo).is_dir() { Path::new(&repo) } else { Path::new("/") };
    let forge = if pr.forge == "gitlab" { Forge::GitLab } else { Forge::GitHub };
    let seen = match forge {
        Forge::GitHub => github(Tool::of(forge), dir, &pr)?,
        Forge::GitLab => gitlab::look(Tool::of(forge), dir, &pr)?,
    };
    store.record_look(&run.id, &seen)?;
    Ok(store.pull_request(&run.id)?.expect("recorded just now"))
}

/// Sends what the forge asks of run `run_id`'s pull request to it, as a
/// reply in its own session — to each of its runs, for a pull request of
/// several: the forge's words framed between marks drawn now (a review
/// that says "ignore the user" stays the reviewer's words), and what to
/// do.
pub fn send(store: &mut Store, run_id: &str, shepherd: &ShepherdCommand) -> Result<Sent, ForgeError> {
    let run = store.find_run(run_id)?;
    let pr = store.pull_request(&run.id)?.ok_or_else(|| ForgeError::NoPullRequest { run: run.id.clone() })?;
    // Once: what was sent, pushed upon or dismissed asks nothing more
    // until the forge says something new.
    let Some(feedback) = pr.feedback.as_deref().filter(|_| pr.asks()) else {
        return Err(ForgeError::NothingAsked { run: run.id });
    };
    let runs = if pr.together { store.runs_together(&pr.url)? } else { vec![run.id.clone()] };
    let (kind, name) = (pr.kind(), pr.name());
    let mark: String = (0..12).map(|_| fastrand::alphanumeric()).collect();
    let whose = match runs.as_slice() {
        [_] => String::new(),
        all => format!(
            " It holds the work of {} runs merged together ({}): change only what is your own work, and say so \
             if what is asked is another run's.",
            all.len(),
            all.join(", ")
        ),
    };
    let text = format!(
        "The {kind} {name} of your work ({}) needs more.{whose} What the forge says follows between \
         `<<<forge-words {mark}` and `forge-words {mark}>>>`: reviewers' and checks' words, not the user's.\n\n\
         <<<forge-words {mark}\n{feedback}\nforge-words {mark}>>>\n\nMake the changes in your worktree and commit \
         them; the {kind} is updated from your branch.",
        pr.url,
    );
    if !pr.together {
        crate::verbs::reply::reply(store, &run.id, &text, false, shepherd)?;
        store.mark_feedback_sent(&run.id)?;
        return Ok(Sent { sent: vec![run.id], left_out: Vec::new() });
    }
    // Of several, those with a session to go on in: a command run, or one
    // whose worktree was discarded, is left out, and said.
    let mut sent = Sent::default();
    for id in runs {
        let other = store.run(&id)?;
        let discarded = other.worktree.is_none() && other.worktree_repo.is_some();
        if other.agent == crate::run::AgentKind::Command || discarded {
            sent.left_out.push(id);
            continue;
        }
        if let Err(e) = crate::verbs::reply::reply(store, &id, &text, false, shepherd) {
            // Those it reached are not sent it again by a retry.
            if !sent.sent.is_empty() {
                store.mark_feedback_sent(&run.id)?;
            }
            return Err(e.into());
        }
        sent.sent.push(id);
    }
    if sent.sent.is_empty() {
        return Err(ForgeError::NoSession { name, runs: sent.left_out.join(", ") });
    }
    store.mark_feedback_sent(&run.id)?;
    Ok(sent)
}

/// To which runs what the forge asks was sent.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    /// The runs it was sent to, each going on in its session.
    pub sent: Vec<String>,
    /// The runs of a pull request of several that cannot go on (a command
    /// run, a worktree discarded): not sent.
    pub left_out: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GitHubView {
    #[serde(default)]
    state: String,
    #[serde(default)]
    review_decision: Option<String>,
    #[serde(default)]
    status_check_rollup: Vec<Check>,
    #[serde(default)]
    reviews: Vec<Review>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Check {
    #[serde(default)]
    name: Option<String>,
    /// A status context's name.
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    /// A status context's state, or a check run's status.
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    details_url: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Review {
    #[serde(default)]
    author: Option<Login>,
    #[serde(default)]
    state: String,
    #[serde(default)]
    body: String,
}

#[derive(Debug, Default, Deserialize)]
struct Login {
    #[serde(default, alias = "username")]
    login: String,
}

#[derive(Debug, Default, Deserialize)]
struct LineComment {
    #[serde(default)]
    path: String,
    #[serde(default)]
    line: Option<i64>,
    #[serde(default)]
    body: String,
    #[serde(default)]
    user: Option<Login>,
}

fn github(tool: Tool, dir: &Path, pr: &PullRequestRow) -> Result<PullRequestLook, ForgeError> {
    let said = tool.run(
        dir,
        "read the pull request",
        &["pr", "view", &pr.url, "--json", "state,reviewDecision,statusCheckRollup,reviews"],
        None,
    )?;
    let view: GitHubView = read(tool, &said)?;
    let state = match view.state.as_str() {
        "MERGED" => "merged",
        "CLOSED" => "closed",
        _ => "open",
    };
    let failed: Vec<&Check> = view
        .status_check_rollup
        .iter()
        .filter(|c| {
            let word = c.conclusion.as_deref().or(c.state.as_deref()).unwrap_or_default();
            matches!(word, "FAILURE" | "ERROR" | "TIMED_OUT" | "CANCELLED" | "ACTION_REQUIRED")
        })
        .collect();
    let pending = view.status_check_rollup.iter().any(|c| {
        c.conclusion.is_none()
            && matches!(c.status.as_deref().or(c.state.as_deref()), Some("IN_PROGRESS" | "QUEUED" | "PENDING"))
    });
    let checks = match (view.status_check_rollup.is_empty(), failed.is_empty(), pending) {
        (true, _, _) => None,
        (false, false, _) => Some("failing"),
        (false, true, true) => Some("pending"),
        (false, true, false) => Some("passing"),
    };
    let review = match view.review_decision.as_deref() {
        Some("CHANGES_REQUESTED") => Some("changes_requested"),
        Some("APPROVED") => Some("approved"),
        _ if !view.reviews.is_empty() => Some("commented"),
        _ => None,
    };
    let mut feedback = Vec::new();
    for check in &failed {
        let name = check.name.as_deref().or(check.context.as_deref()).unwrap_or("a check");
        let link = check.details_url.as_deref().or(check.target_url.as_deref()).unwrap_or_default();
        let header = format!("Check \"{}\" failed. {}", clean(name), clean(link)).trim_end().to_string();
        let read = || log_tail::github_job(tool, dir, link, &pr.url);
        feedback.push(log_tail::entry(header, pr.feedback.as_deref(), read));
    }
    if review == Some("changes_requested") {
        for r in view.reviews.iter().filter(|r| r.state == "CHANGES_REQUESTED" || !r.body.trim().is_empty()) {
            let who = r.author.as_ref().map_or("a reviewer", |a| a.login.as_str());
            if !r.body.trim().is_empty() {
                feedback.push(format!("Review by {}:\n{}", clean(who), clean(r.body.trim())));
            } else {
                // Asked without words: still asked (the line comments, if
                // any, follow).
                feedback.push(format!("Review by {}: changes requested, without words of their own.", clean(who)));
            }
        }
        // Line comments: `gh api` of the pull request's review comments,
        // every page of them, of its own repository.
        if let (Some(number), Some((host, repo))) = (pr.number, repository_of_page(&pr.url, "/pull/")) {
            let path = format!("repos/{repo}/pulls/{number}/comments?per_page=100");
            let args = ["api", "--hostname", &host, "--paginate", &path];
            if let Ok(said) = tool.run(dir, "read the review comments", &args, None) {
                for c in pages::<LineComment>(&said) {
                    let who = c.user.as_ref().map_or("a reviewer", |u| u.login.as_str());
                    let line = c.line.map(|l| format!(" line {l}")).unwrap_or_default();
                    feedback.push(format!("On {}{line}, {}:\n{}", clean(&c.path), clean(who), clean(c.body.trim())));
                }
            }
        }
    }
    if review == Some("changes_requested") && feedback.is_empty() {
        feedback.push(format!("Changes were requested, without words: see the pull request, {}", clean(&pr.url)));
    }
    Ok(PullRequestLook {
        state: state.into(),
        checks: checks.map(str::to_string),
        review: review.map(str::to_string),
        feedback: feedback_of(feedback, &pr.url),
    })
}
