//! One sandbox inside another: a run launched from inside a sandbox whose
//! own preset asks for a sandbox too gets what both allow — never more than
//! the sandbox it was launched in, never more than its own preset says.

use std::path::{Path, PathBuf};

use super::{expand, keeps, on_disk, Network, Place, Read, Sandbox};

/// Where the two sandboxes' places are, for comparing them.
pub struct Folders<'a> {
    /// The user's home (`~`).
    pub home: &'a Path,
    /// What the inner sandbox's `worktree` is when Corral makes the run no
    /// worktree of its own: its working folder.
    pub cwd: &'a Path,
    /// Whether Corral makes the run a worktree of its own (then `worktree`
    /// stays `worktree`, where the outer sandbox allows it).
    pub own_worktree: bool,
}

impl Sandbox {
    /// This sandbox, narrowed to what `outer` allows too. `outer`'s
    /// `worktree` is its run's own folder (a path), or `worktree` where it
    /// lets the inner run write a worktree Corral makes it.
    pub fn within(&self, outer: &Sandbox, at: &Folders<'_>) -> Sandbox {
        Sandbox {
            profile: Some(format!(
                "{} within {}",
                self.profile.as_deref().unwrap_or("its own"),
                outer.profile.as_deref().unwrap_or("another")
            )),
            write: writes_within(&self.write, &outer.write, at),
            read: reads_within(self, outer, at.home),
            masked: masked_within(self, outer, at.home),
            home: home_within(self, outer, at.home),
            network: network_within(&self.network, &outer.network),
            env_keep: match (&self.env_keep, &outer.env_keep) {
                (Some(inner), Some(outer)) => {
                    Some(inner.iter().filter(|name| keeps(outer, name, &[])).cloned().collect())
                }
                (inner, outer) => inner.clone().or_else(|| outer.clone()),
            },
            optional: self.optional && outer.optional,
        }
    }
}

impl Sandbox {
    /// Whether this sandbox lets a run touch nothing `other` does not:
    /// every place it writes lies in one `other` writes, it reads nothing
    /// `other` hides, reaches no host `other` does not, keeps no variable
    /// `other` drops, and is optional only where `other` is. Judged on
    /// paths as they are on disk; `home` is `~`.
    pub fn narrows(&self, other: &Sandbox, home: &Path) -> bool {
        let place = |p: &str| on_disk(p, home);
        let writes = self.write.iter().all(|mine| match mine {
            Place::Worktree => other.write.contains(&Place::Worktree),
            Place::Path(p) => other.write.iter().any(|theirs| match theirs {
                Place::Path(q) => place(p).starts_with(place(q)),
                Place::Worktree => false,
            }),
        });
        let lies_in = |p: &String, list: &[String]| list.iter().any(|q| place(p).starts_with(place(q)));
        let meets = |p: &String, list: &[String]| {
            list.iter().any(|q| place(p).starts_with(place(q)) || place(q).starts_with(place(p)))
        };
        let masked = other.masked.iter().all(|m| lies_in(m, &self.masked) || self.read_hides(m, home));
        let shown_by_other = |p: &String| other.shows_of_home(&place(p), home);
        let reads = masked
            && match (&self.read, &other.read) {
                // Every place `other` hides is hidden here too, the home's
                // hidden part with them.
                (Read::Deny(mine), Read::Deny(theirs)) => {
                    theirs.iter().all(|t| lies_in(t, mine)) && self.home.iter().all(shown_by_other)
                }
                (Read::Only(mine), Read::Deny(theirs)) => mine.iter().all(|m| !meets(m, theirs) && shown_by_other(m)),
                (Read::Only(mine), Read::Only(theirs)) => mine.iter().all(|m| lies_in(m, theirs)),
                (Read::Deny(_), Read::Only(_)) => false,
            };
        let network = network_within(&self.network, &other.network) == self.network;
        let env = match (&self.env_keep, &other.env_keep) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(mine), Some(theirs)) => mine.iter().all(|name| keeps(theirs, name, &[])),
        };
        writes && reads && network && env && (!self.optional || other.optional)
    }

    /// Whether `place` is hidden by this sandbox's `read`.
    fn read_hides(&self, place: &str, home: &Path) -> bool {
        !self.read.reads_all_of(&expand(place, home), home)
    }
}

/// The places both let a run write: each one's places that lie in one of
/// the other's.
fn writes_within(inner: &[Place], outer: &[Place], at: &Folders<'_>) -> Vec<Place> {
    // Compared as they are on disk: `proj/..` or a link in `proj` is
    // not in `proj`.
    let path = |place: &Place, worktree: Option<&Path>| -> Option<PathBuf> {
        let path = match place {
            Place::Path(path) => expand(path, at.home),
            Place::Worktree => worktree?.to_path_buf(),
        };
        Some(std::fs::canonicalize(&path).unwrap_or(path))
    };
    let inner_worktree = (!at.own_worktree).then_some(at.cwd);
    let inner_paths: Vec<PathBuf> = inner.iter().filter_map(|p| path(p, inner_worktree)).collect();
    let outer_paths: Vec<PathBuf> = outer.iter().filter_map(|p| path(p, None)).collect();
    let mut both = Vec::new();
    if at.own_worktree && inner.contains(&Place::Worktree) && outer.contains(&Place::Worktree) {
        both.push(Place::Worktree);
    }
    let lies_in = |path: &PathBuf, others: &[PathBuf]| others.iter().any(|other| path.starts_with(other));
    for path in inner_paths.iter().filter(|p| lies_in(p, &outer_paths)) {
        both.push(Place::Path(path.to_string_lossy().into_owned()));
    }
    for path in outer_paths.iter().filter(|p| lies_in(p, &inner_paths)) {
        let place = Place::Path(path.to_string_lossy().into_owned());
        if !both.contains(&place) {
            both.push(place);
        }
    }
    both
}

/// What both let a run read: everything but what either denies; under a
/// list of what alone may be read, what that list (or both lists) allow,
/// less what the other denies.
fn reads_within(inner_sandbox: &Sandbox, outer_sandbox: &Sandbox, home: &Path) -> Read {
    let lies_in = |place: &String, others: &[String]| {
        let place = expand(place, home);
        others.iter().any(|other| place.starts_with(expand(other, home)))
    };
    match (&inner_sandbox.read, &outer_sandbox.read) {
        (Read::Deny(inner), Read::Deny(outer)) => {
            let mut denied = inner.clone();
            denied.extend(outer.iter().filter(|p| !inner.contains(p)).cloned());
            Read::Deny(denied)
        }
        (Read::Only(only), Read::Deny(denied)) => {
            // Of the home, only what the outer shows: `only [~]` inside a
            // sandbox that shows the project and the toolchains reads those.
            let shown = outer_sandbox.home_shown(home);
            let mut listed = Vec::new();
            for place in only.iter().filter(|p| !lies_in(p, denied)) {
                let path = on_disk(place, home);
                if outer_sandbox.shows_of_home(&path, home) {
                    listed.push(place.clone());
                } else {
                    listed.extend(
                        shown.iter().filter(|s| s.starts_with(&path)).map(|s| s.to_string_lossy().into_owned()),
                    );
                }
            }
            listed.dedup();
            Read::Only(listed)
        }
        (Read::Deny(denied), Read::Only(only)) => {
            Read::Only(only.iter().filter(|p| !lies_in(p, denied)).cloned().collect())
        }
        (Read::Only(inner), Read::Only(outer)) => {
            let mut both: Vec<String> = inner.iter().filter(|p| lies_in(p, outer)).cloned().collect();
            for place in outer.iter().filter(|p| lies_in(p, inner)) {
                if !both.contains(place) {
                    both.push(place.clone());
                }
            }
            Read::Only(both)
        }
    }
}

/// What stays hidden inside both: what either hides already, and what a
/// sandbox that reads all but some places denies inside what the other's
/// `read: only` lists (a list of what may be read cannot say "but").
fn masked_within(inner: &Sandbox, outer: &Sandbox, home: &Path) -> Vec<String> {
    let mut masked: Vec<String> = inner.masked.iter().chain(&outer.masked).cloned().collect();
    let inside = |denied: &[String], only: &[String]| -> Vec<String> {
        let holds = |place: &String| {
            let place = expand(place, home);
            only.iter().any(|o| place.starts_with(expand(o, home)))
        };
        denied.iter().filter(|d| holds(d)).cloned().collect()
    };
    match (&inner.read, &outer.read) {
        (Read::Only(only), Read::Deny(denied)) | (Read::Deny(denied), Read::Only(only)) => {
            masked.extend(inside(denied, only))
        }
        _ => {}
    }
    masked.sort();
    masked.dedup();
    masked
}

/// What of the home both show under `read: deny`: each one's `home:`
/// places the other shows too.
fn home_within(inner: &Sandbox, outer: &Sandbox, home: &Path) -> Vec<String> {
    let shown_by = |sandbox: &Sandbox, place: &String| sandbox.shows_of_home(&expand(place, home), home);
    let mut both: Vec<String> = inner.home.iter().filter(|p| shown_by(outer, p)).cloned().collect();
    for place in outer.home.iter().filter(|p| shown_by(inner, p)) {
        if !both.contains(place) {
            both.push(place.clone());
        }
    }
    both
}

/// Where both let a run connect: nowhere if either says so; the hosts
/// each lists that the other lets through (`agent` where both list it).
fn network_within(inner: &Network, outer: &Network) -> Network {
    match (inner, outer) {
        (Network::None, _) | (_, Network::None) => Network::None,
        (Network::All, other) | (other, Network::All) => other.clone(),
        (Network::Hosts(inner), Network::Hosts(outer)) => {
            let covers = |list: &[String], host: &String| {
                list.contains(host)
                    || (host != "agent" && {
                        let (name, port) = super::proxy::entry_parts(host);
                        super::proxy::allows(list, name.trim_start_matches("*."), port.unwrap_or(443))
                            && (port.is_some() || super::proxy::allows(list, name.trim_start_matches("*."), 80))
                    })
                    || host.strip_prefix("*.").is_some_and(|domain| {
                        list.iter().any(|l| l.strip_prefix("*.").is_some_and(|d| domain.ends_with(&format!(".{d}"))))
                    })
            };
            let mut both: Vec<String> = inner.iter().filter(|h| covers(outer, h)).cloned().collect();
            for host in outer.iter().filter(|h| covers(inner, h)) {
                if !both.contains(host) {
                    both.push(host.clone());
                }
            }
            if both.is_empty() {
                Network::None
            } else {
                Network::Hosts(both)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(own_worktree: bool) -> Folders<'static> {
        Folders { home: Path::new("/home/u"), cwd: Path::new("/home/u/app"), own_worktree }
    }

    fn outer() -> Sandbox {
        Sandbox {
            profile: Some("run abc's sandbox, where it was launched".into()),
            write: vec![Place::Path("/home/u/app".into()), Place::Path("/tmp".into()), Place::Worktree],
            ..Sandbox::profile("builder").unwrap()
        }
    }

    #[test]
    fn a_reviewer_inside_a_builder_writes_nothing_and_reaches_its_api() {
        let reviewer = Sandbox::profile("reviewer").unwrap();
        let both = reviewer.within(&outer(), &at(false));
        assert!(both.write.is_empty(), "{both:?}");
        assert_eq!(both.network, Network::Hosts(vec!["agent".into()]));
        assert_eq!(both.read, reviewer.read);
        assert_eq!(both.profile.as_deref(), Some("reviewer within run abc's sandbox, where it was launched"));
    }

    #[test]
    fn a_wider_preset_inside_a_sandbox_gets_only_what_the_sandbox_allows() {
        let wide = Sandbox {
            profile: None,
            write: vec![Place::Worktree, Place::Path("~".into())],
            read: Read::Deny(vec![]),
            masked: vec![],
            home: vec![],
            network: Network::All,
            env_keep: None,
            optional: true,
        };
        let both = wide.within(&outer(), &at(false));
        // Its folder lies in the outer's; the outer's folders lie in `~`.
        assert_eq!(both.write, [Place::Path("/home/u/app".into())], "never the whole home, nor /tmp: {both:?}");
        assert_eq!(both.read, outer().read, "the outer's secrets stay denied");
        assert_eq!(both.network, outer().network);
        assert!(!both.optional, "the outer is not optional");
        // With a worktree Corral makes it, that worktree is its too.
        let both = wide.within(&outer(), &at(true));
        assert!(both.write.contains(&Place::Worktree), "{both:?}");
    }

    #[test]
    fn hosts_reads_and_variables_are_what_both_allow() {
        let inner = Sandbox {
            profile: None,
            write: vec![],
            read: Read::Only(vec!["~/app".into(), "~/.ssh".into(), "/srv".into()]),
            masked: vec![],
            home: vec![],
            network: Network::Hosts(vec!["agent".into(), "api.github.com".into(), "*.example.com".into()]),
            env_keep: Some(vec!["GITHUB_TOKEN".into(), "FOO".into()]),
            optional: false,
        };
        let outer = Sandbox {
            network: Network::Hosts(vec!["agent".into(), "*.github.com".into(), "x.example.com".into()]),
            env_keep: Some(vec!["GITHUB_TOKEN".into()]),
            ..outer()
        };
        let both = inner.within(&outer, &at(false));
        assert_eq!(both.read, Read::Only(vec!["~/app".into(), "/srv".into()]), "~/.ssh is the outer's secret");
        assert_eq!(
            both.network,
            Network::Hosts(vec!["agent".into(), "api.github.com".into(), "x.example.com".into()]),
            "{both:?}"
        );
        assert_eq!(both.env_keep, Some(vec!["GITHUB_TOKEN".into()]));
        let offline = Sandbox { network: Network::None, ..outer.clone() };
        assert_eq!(inner.within(&offline, &at(false)).network, Network::None);
    }
}
