//! A fork to push to when the repository's remote refuses the user's push
//! (no rights on it), as `gh pr create` does: the user's fork found among
//! the repository's remotes, else made with `gh repo fork` and added as
//! the remote `fork`. The pull request is then asked of the repository
//! from `LOGIN:BRANCH`. GitHub only: on GitLab, `--remote` names a fork.

use std::path::Path;
use std::time::Duration;

use super::push::{git, push, Refusal};
use super::tool::Tool;
use super::ForgeError;

/// Where the run's branch went instead of the repository's remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fork {
    /// The remote of the fork, in this repository.
    pub remote: String,
    /// Whose fork it is: the pull request's head is `OWNER:BRANCH`.
    pub owner: String,
    /// The repository the pull request is opened in (`HOST/OWNER/NAME`).
    pub upstream: String,
}

/// A repository's place on its forge, read from a remote's address:
/// `git@HOST:OWNER/NAME.git`, `ssh://git@HOST/OWNER/NAME`,
/// `https://HOST/OWNER/NAME.git`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    host: String,
    owner: String,
    name: String,
}

impl Place {
    fn of(url: &str) -> Option<Place> {
        let url = url.trim().trim_end_matches('/');
        let url = url.strip_suffix(".git").unwrap_or(url);
        let (host, path) = match url.split_once("://") {
            Some((_, rest)) => rest.split_once('/')?,
            None => url.split_once(':')?,
        };
        let host = host.rsplit('@').next()?.split(':').next()?;
        let mut parts = path.split('/');
        let (owner, name) = (parts.next()?, parts.next()?);
        let fine = |s: &str| !s.is_empty() && !s.starts_with('-');
        (parts.next().is_none() && fine(host) && fine(owner) && fine(name)).then(|| Place {
            host: host.to_string(),
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }

    /// `HOST/OWNER/NAME`, as `gh --repo` takes it.
    fn full(&self) -> String {
        format!("{}/{}/{}", self.host, self.owner, self.name)
    }
}

/// Where a pull request's branch was pushed.
pub(super) enum FromWhere {
    /// The repository's own remote.
    Repository,
    /// The user's fork (they may not push to the repository).
    Fork(Fork),
}

/// Pushes the ref `from` to the branch `to` of `remote` (at `url`); where
/// the user has no rights there and `may_fork` (a new pull request of
/// GitHub's whose remote the user did not name), to their fork instead.
/// The remote it went to, and whether that is a fork.
pub(super) fn push_or_fork(
    tool: Tool,
    repo: &Path,
    (remote, url): (&str, &str),
    (from, to): (&str, &str),
    may_fork: bool,
) -> Result<(String, FromWhere), ForgeError> {
    match push(repo, remote, from, to) {
        Ok(()) => Ok((remote.to_string(), FromWhere::Repository)),
        Err(refused) if refused.no_rights && may_fork && tool.forge() == super::Forge::GitHub => {
            let fork = push_to_fork(tool, repo, url, (from, to), refused)?;
            Ok((fork.remote.clone(), FromWhere::Fork(fork)))
        }
        Err(refused) => Err(refused.into()),
    }
}

/// Pushes the ref `from` to the branch `to` of the user's fork of the
/// repository at `url` (whose remote refused it): found among the
/// remotes, else made.
fn push_to_fork(
    tool: Tool,
    repo: &Path,
    url: &str,
    (from, to): (&str, &str),
    refused: Refusal,
) -> Result<Fork, ForgeError> {
    let Some(upstream) = Place::of(url) else { return Err(refused.into()) };
    let said = tool.run(
        repo,
        "say who you are on GitHub",
        &["api", "user", "--hostname", &upstream.host, "--jq", ".login"],
        None,
    )?;
    let login = said.trim().to_string();
    // A GitHub login: letters, digits and inner hyphens (it goes into a
    // remote's address and `--head`).
    let fine =
        !login.is_empty() && !login.starts_with('-') && login.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !fine || login.eq_ignore_ascii_case(&upstream.owner) {
        // Refused on one's own repository: no fork would help.
        return Err(refused.into());
    }
    // Their fork of this repository (a fork renamed on GitHub is named
    // with --remote).
    let mine = |place: &Place| {
        place.host == upstream.host
            && place.owner.eq_ignore_ascii_case(&login)
            && place.name.eq_ignore_ascii_case(&upstream.name)
    };
    let remotes: Vec<String> =
        git(repo, &["remote"]).map(|s| s.lines().map(str::to_string).collect()).unwrap_or_default();
    let found = remotes.iter().find(|name| {
        let url = git(repo, &["remote", "get-url", name.as_str()]).unwrap_or_default();
        Place::of(&url).is_some_and(|place| mine(&place))
    });
    let (remote, made) = match found {
        Some(remote) => (remote.clone(), false),
        None => {
            // `gh repo fork` says "already exists" of one made before: it.
            let made =
                tool.run(repo, "fork the repository", &["repo", "fork", &upstream.full(), "--clone=false"], None);
            match made {
                Ok(_) => {}
                Err(ForgeError::Refused { said, .. }) if said.contains("already exists") => {}
                Err(e) => return Err(e),
            }
            let fork_url = address_of_fork(url, &upstream, &login);
            let name =
                ["fork", "corral-fork"].into_iter().find(|n| !remotes.iter().any(|r| r == n)).unwrap_or("corral-fork");
            if git(repo, &["remote", "add", name, &fork_url]).is_none() {
                return Err(ForgeError::PushRefused(format!(
                    "a fork was made ({fork_url}), but it could not be added as the remote {name}: add it yourself \
                     (`git -C {} remote add {name} {fork_url}`), then `corral pr RUN --remote {name}`",
                    repo.display()
                )));
            }
            (name.to_string(), true)
        }
    };
    // A fork just made takes a moment before it takes pushes.
    let mut tries = if made { 8 } else { 1 };
    loop {
        tries -= 1;
        match push(repo, &remote, from, to) {
            Ok(()) => break,
            Err(refusal) if tries > 0 && !refusal.no_rights => std::thread::sleep(Duration::from_secs(2)),
            Err(refusal) => return Err(refusal.into()),
        }
    }
    Ok(Fork { remote, owner: login, upstream: upstream.full() })
}

/// The fork's address, in the same form as the repository's (ssh stays
/// ssh: the user's keys; https stays https: their credential helper).
fn address_of_fork(url: &str, upstream: &Place, login: &str) -> String {
    let url = url.trim();
    let path = format!("{}/{}", upstream.owner, upstream.name);
    match url.rfind(&path) {
        Some(at) => format!("{}{login}/{}{}", &url[..at], upstream.name, &url[at + path.len()..]),
        None => format!("https://{}/{login}/{}.git", upstream.host, upstream.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remotes_address_says_its_place_and_its_forks() {
        let place = Place::of("git@github.com:octo/app.git").unwrap();
        assert_eq!((place.host.as_str(), place.owner.as_str(), place.name.as_str()), ("github.com", "octo", "app"));
        assert_eq!(Place::of("https://github.example.com/octo/app").unwrap().full(), "github.example.com/octo/app");
        assert_eq!(Place::of("ssh://git@github.com:22/octo/app.git/").unwrap().full(), "github.com/octo/app");
        assert_eq!(Place::of("/srv/git/app.git"), None);
        assert_eq!(Place::of("git@github.com:--upload-pack=x/app"), None);
        assert_eq!(address_of_fork("git@github.com:octo/app.git", &place, "me"), "git@github.com:me/app.git");
        let https = Place::of("https://github.com/octo/app").unwrap();
        assert_eq!(address_of_fork("https://github.com/octo/app", &https, "me"), "https://github.com/me/app");
    }
}
