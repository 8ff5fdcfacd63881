//! `corral launch PRESET --pr 42 TASK`: a run whose worktree starts on a
//! pull request's own branch, so "fix the review on #42" is one command.
//! The run is linked to that pull request: `corral pr RUN` pushes the run's
//! work to its branch (a fast-forward), and it is followed as one of its
//! own.

use std::path::Path;

use serde::Deserialize;

use super::push::remote_for;
use super::tool::{Forge, Tool};
use super::{clean, forge_of, is_reference, ForgeError};
use crate::store::PullRequestRow;

/// A pull request's branch, fetched and ready to start a worktree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestHead {
    pub forge: Forge,
    pub url: String,
    pub number: Option<i64>,
    /// Its title, escapes taken out.
    pub title: String,
    /// The remote its branch is on, the branch, and the one it asks to
    /// merge into.
    pub remote: String,
    pub head: String,
    pub base: String,
    /// The branch's commit, fetched here.
    pub commit: String,
}

impl PullRequestHead {
    /// `#42`, `!42`, or its page.
    pub fn name(&self) -> String {
        self.number.map_or_else(|| self.url.clone(), |n| self.forge.numbered(n))
    }

    /// Run `run_id` linked to it: its work is pushed to its branch.
    pub fn linking(&self, run_id: &str) -> PullRequestRow {
        let now = crate::text::time::format(crate::text::time::now());
        PullRequestRow {
            run_id: run_id.to_string(),
            forge: self.forge.as_str().to_string(),
            url: self.url.clone(),
            number: self.number,
            remote: self.remote.clone(),
            head: self.head.clone(),
            base: self.base.clone(),
            draft: false,
            state: "open".into(),
            pushed: self.commit.clone(),
            opened_at: now.clone(),
            pushed_at: now,
            ..PullRequestRow::default()
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct View {
    #[serde(default, alias = "iid")]
    number: Option<i64>,
    #[serde(default, alias = "web_url")]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default, alias = "source_branch")]
    head_ref_name: String,
    #[serde(default, alias = "target_branch")]
    base_ref_name: String,
    #[serde(default, alias = "sha")]
    head_ref_oid: String,
    #[serde(default)]
    is_cross_repository: bool,
    #[serde(default)]
    state: String,
}

/// Pull request `reference` (a number or its page) of the repository
/// holding `cwd`, its branch fetched from its remote.
pub fn pull_request_head(cwd: &Path, reference: &str) -> Result<PullRequestHead, ForgeError> {
    if !is_reference(reference) {
        return Err(ForgeError::BadReference { flag: "--pr", what: "a pull request", given: reference.to_string() });
    }
    let forge = forge_of(cwd, reference);
    let tool = Tool::of(forge);
    let said = match forge {
        Forge::GitHub => {
            let fields = "number,url,title,headRefName,baseRefName,headRefOid,isCrossRepository,state";
            tool.run(cwd, "read the pull request", &["pr", "view", reference, "--json", fields], None)?
        }
        Forge::GitLab => {
            tool.run(cwd, "read the merge request", &["mr", "view", reference, "--output", "json"], None)?
        }
    };
    let view: View =
        serde_json::from_str(&said).map_err(|_| ForgeError::Unread { tool, said: said.chars().take(200).collect() })?;
    let name = view.number.map_or_else(|| view.url.clone(), |n| forge.numbered(n));
    if view.is_cross_repository {
        return Err(ForgeError::FromFork { name, head: clean(&view.head_ref_name) });
    }
    if matches!(view.state.as_str(), "MERGED" | "CLOSED" | "merged" | "closed") {
        return Err(ForgeError::Ended { run: "-".into(), name, state: view.state.to_lowercase() });
    }
    let (remote, _) = remote_for(cwd, None, &view.base_ref_name)?;
    let branch = format!("refs/heads/{}", view.head_ref_name);
    if super::push::git(cwd, &["fetch", "-q", "--", &remote, &branch]).is_none() {
        return Err(ForgeError::NoBaseThere { remote, base: clean(&view.head_ref_name) });
    }
    Ok(PullRequestHead {
        forge,
        url: clean(&view.url),
        number: view.number,
        title: clean(&view.title).split_whitespace().collect::<Vec<_>>().join(" "),
        remote,
        head: view.head_ref_name,
        base: view.base_ref_name,
        commit: view.head_ref_oid,
    })
}
