//! What GitLab says of a run's merge request, read with `glab`: its state
//! and pipeline (`glab mr view --output json`), the jobs that failed with
//! the end of their logs, and the review's open threads (`glab api …
//! /discussions`: what a reviewer asked that nobody resolved, with its
//! file and line). GitLab's "request changes" and an unresolved thread
//! both ask something of the run.

use std::path::Path;

use serde::Deserialize;

use super::tool::{pages, read, Tool};
use super::{clean, feedback_of, log_tail, repository_of_page, ForgeError};
use crate::store::{PullRequestLook, PullRequestRow};

#[derive(Debug, Default, Deserialize)]
struct View {
    #[serde(default)]
    state: String,
    #[serde(default)]
    head_pipeline: Option<Pipeline>,
    /// `requested_changes` once a reviewer asked for changes (GitLab 17).
    #[serde(default)]
    detailed_merge_status: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Pipeline {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    web_url: String,
}

#[derive(Debug, Default, Deserialize)]
struct Job {
    id: i64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    web_url: String,
}

#[derive(Debug, Default, Deserialize)]
struct Discussion {
    #[serde(default)]
    notes: Vec<Note>,
}

#[derive(Debug, Default, Deserialize)]
struct Note {
    #[serde(default)]
    body: String,
    #[serde(default)]
    author: Option<Author>,
    /// GitLab's own notes ("added 1 commit"), not a person's words.
    #[serde(default)]
    system: bool,
    #[serde(default)]
    resolvable: bool,
    #[serde(default)]
    resolved: bool,
    #[serde(default)]
    position: Option<Position>,
}

#[derive(Debug, Default, Deserialize)]
struct Author {
    #[serde(default)]
    username: String,
}

#[derive(Debug, Default, Deserialize)]
struct Position {
    #[serde(default)]
    new_path: Option<String>,
    #[serde(default)]
    old_path: Option<String>,
    #[serde(default)]
    new_line: Option<i64>,
    #[serde(default)]
    old_line: Option<i64>,
}

/// Looks at merge request `pr` now.
pub(super) fn look(tool: Tool, dir: &Path, pr: &PullRequestRow) -> Result<PullRequestLook, ForgeError> {
    let number = pr.number.map(|n| n.to_string()).unwrap_or_else(|| pr.head.clone());
    // The merge request's own project, as its page says (never whichever
    // one the checkout's remotes name).
    let Some((host, path)) = repository_of_page(&pr.url, "/-/merge_requests/") else {
        return Err(ForgeError::Unread { tool, said: pr.url.clone() });
    };
    let encoded = path.replace('/', "%2F");
    let project = (host.as_str(), encoded.as_str());
    let page = format!("https://{host}/{path}");
    let args = ["mr", "view", &number, "--repo", &page, "--output", "json"];
    let said = tool.run(dir, "read the merge request", &args, None)?;
    let view: View = read(tool, &said)?;
    let state = match view.state.as_str() {
        "merged" => "merged",
        "closed" => "closed",
        _ => "open",
    };
    let mut feedback = Vec::new();
    let checks = match &view.head_pipeline {
        Some(p) if p.status == "failed" => {
            feedback.extend(failed_jobs(tool, dir, project, p, pr.feedback.as_deref()));
            Some("failing")
        }
        Some(p) if p.status == "success" => Some("passing"),
        Some(_) => Some("pending"),
        None => None,
    };
    // Threads are read only for an open merge request with a number.
    let threads = match (state, pr.number) {
        ("open", Some(iid)) => open_threads(tool, dir, project, iid),
        _ => Vec::new(),
    };
    let asked = view.detailed_merge_status.as_deref() == Some("requested_changes");
    let review = (asked || !threads.is_empty()).then_some("changes_requested");
    if asked && threads.is_empty() {
        feedback
            .push(format!("A reviewer requested changes, without words: see the merge request, {}", clean(&pr.url)));
    }
    feedback.extend(threads);
    Ok(PullRequestLook {
        state: state.into(),
        checks: checks.map(str::to_string),
        review: review.map(str::to_string),
        feedback: feedback_of(feedback, &pr.url),
    })
}

/// The failed jobs of pipeline `p`, each with the end of its log (the
/// pipeline's link alone when its jobs cannot be read).
fn failed_jobs(tool: Tool, dir: &Path, project: (&str, &str), p: &Pipeline, before: Option<&str>) -> Vec<String> {
    let whole = || format!("The pipeline failed. {}", clean(&p.web_url)).trim_end().to_string();
    let Some(id) = p.id else { return vec![whole()] };
    let path = format!("projects/{}/pipelines/{id}/jobs?scope[]=failed&per_page=100", project.1);
    let args = ["api", "--hostname", project.0, "--paginate", &path];
    let jobs: Vec<Job> = match tool.run(dir, "read the pipeline's jobs", &args, None) {
        Ok(said) => pages(&said),
        Err(_) => Vec::new(),
    };
    if jobs.is_empty() {
        return vec![whole()];
    }
    jobs.iter()
        .map(|job| {
            let header = format!("Job \"{}\" failed. {}", clean(&job.name), clean(&job.web_url)).trim_end().to_string();
            log_tail::entry(header, before, || log_tail::gitlab_job(tool, dir, project, job.id))
        })
        .collect()
}

/// The review's threads nobody resolved: each note a person wrote in them,
/// with its file and line.
fn open_threads(tool: Tool, dir: &Path, project: (&str, &str), iid: i64) -> Vec<String> {
    let path = format!("projects/{}/merge_requests/{iid}/discussions?per_page=100", project.1);
    let args = ["api", "--hostname", project.0, "--paginate", &path];
    let Ok(said) = tool.run(dir, "read the review's threads", &args, None) else { return Vec::new() };
    let discussions: Vec<Discussion> = pages(&said);
    let mut out = Vec::new();
    for discussion in discussions {
        let open = discussion.notes.iter().any(|n| n.resolvable && !n.resolved);
        if !open {
            continue;
        }
        for note in discussion.notes.iter().filter(|n| !n.system && !n.body.trim().is_empty()) {
            let who = note.author.as_ref().map_or("a reviewer", |a| a.username.as_str());
            let place = note.position.as_ref().and_then(|p| {
                let path = p.new_path.as_deref().or(p.old_path.as_deref())?;
                let line = p.new_line.or(p.old_line).map(|l| format!(" line {l}")).unwrap_or_default();
                Some(format!("On {}{line}, ", clean(path)))
            });
            let words = clean(note.body.trim());
            out.push(match place {
                Some(place) => format!("{place}{}:\n{words}", clean(who)),
                None => format!("Comment by {}:\n{words}", clean(who)),
            });
        }
    }
    out
}
