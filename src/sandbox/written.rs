//! A sandbox as a person writes it, in a preset's frontmatter or in
//! config.toml's `[sandbox]`: a profile's name, `optional`, `none`, or rules
//! (`write`, `read: deny [...] | only [...]`, `network: none | all |
//! [hosts]`, `env: keep [...]`) over an optional profile.

use serde::Deserialize;

use super::{Network, Place, Read, Sandbox};

/// `sandbox:` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum WrittenSandbox {
    /// A profile's name, `optional` (the `[sandbox]` default, or `builder`,
    /// where an engine works) or `none`.
    Word(String),
    /// Rules, over `profile:` if given.
    Rules(WrittenRules),
}

/// `sandbox:`'s rules.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrittenRules {
    profile: Option<String>,
    write: Option<Vec<String>>,
    read: Option<WrittenList>,
    network: Option<WrittenNetwork>,
    env: Option<WrittenList>,
    home: Option<Vec<String>>,
    optional: Option<bool>,
}

/// `deny [a, b]` in one string, or `{deny: [a, b]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum WrittenList {
    Text(String),
    Map(std::collections::BTreeMap<String, Vec<String>>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum WrittenNetwork {
    Word(String),
    Hosts(Vec<String>),
}

/// Why a written sandbox cannot be used; each says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSandbox {
    /// A word that is no profile.
    #[error("'{0}' is not a sandbox profile: write one of reviewer, builder, optional, none, or rules such as {{write: [worktree, /tmp], network: none}}")]
    UnknownProfile(String),
    /// `read:` or `env:` not as asked.
    #[error("`{key}: {text}` is not understood: write `{key}: {first} [a, b]`{or}")]
    BadList { key: &'static str, text: String, first: &'static str, or: &'static str },
    /// A `network:` word that is neither `none` nor `all`.
    #[error(
        "`network: {0}` is not understood: write none, all, or a list of hosts such as [api.anthropic.com, github.com]"
    )]
    BadNetwork(String),
    /// A host that is not a host name.
    #[error("`network`: '{0}' is not a host name: write names such as github.com or *.example.com (the web's ports, 443 and 80), or host:port for another port (no scheme or path)")]
    BadHost(String),
    /// A relative path.
    #[error("`{key}`: '{path}' is not a full path: write it from / or ~ (or `worktree` for the run's folder)")]
    Relative { key: &'static str, path: String },
}

/// What a preset's `sandbox:` asks, once read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Asked {
    /// These rules.
    Rules(Sandbox),
    /// `[sandbox]`'s rules if any, else `builder`, and only where an
    /// engine works.
    Optional,
    /// No sandbox, whatever `[sandbox]` says.
    None,
}

impl WrittenSandbox {
    /// Reads it: the profile named, with the rules given over it.
    pub fn read(&self) -> Result<Asked, BadSandbox> {
        match self {
            WrittenSandbox::Word(word) => match word.trim() {
                "optional" => Ok(Asked::Optional),
                "none" | "off" | "false" => Ok(Asked::None),
                name => Sandbox::profile(name).map(Asked::Rules).ok_or_else(|| BadSandbox::UnknownProfile(name.into())),
            },
            WrittenSandbox::Rules(rules) => rules.read().map(Asked::Rules),
        }
    }
}

impl WrittenRules {
    /// The rules, over their profile (or over nothing: writes nothing,
    /// reads all but the secrets, reaches any host).
    pub fn read(&self) -> Result<Sandbox, BadSandbox> {
        let mut sandbox = match self.profile.as_deref().map(str::trim) {
            Some(name) => Sandbox::profile(name).ok_or_else(|| BadSandbox::UnknownProfile(name.into()))?,
            None => Sandbox {
                profile: None,
                write: Vec::new(),
                read: Read::Deny(super::SECRETS.iter().map(|s| s.to_string()).collect()),
                masked: Vec::new(),
                home: Vec::new(),
                network: Network::All,
                env_keep: None,
                optional: false,
            },
        };
        if let Some(write) = &self.write {
            sandbox.write = write
                .iter()
                .map(|w| match w.trim() {
                    "worktree" => Ok(Place::Worktree),
                    path => full_path("write", path).map(Place::Path),
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(read) = &self.read {
            let (word, list) = read.split("read", &["deny", "only"], ", or `read: only [~/project]`")?;
            let list = list.into_iter().map(|p| full_path("read", &p)).collect::<Result<Vec<_>, _>>()?;
            sandbox.read = if word == "deny" { Read::Deny(list) } else { Read::Only(list) };
        }
        if let Some(network) = &self.network {
            sandbox.network = match network {
                WrittenNetwork::Word(word) => match word.trim() {
                    "none" => Network::None,
                    "all" => Network::All,
                    other => return Err(BadSandbox::BadNetwork(other.into())),
                },
                WrittenNetwork::Hosts(hosts) => {
                    Network::Hosts(hosts.iter().map(|h| host_name(h.trim())).collect::<Result<_, _>>()?)
                }
            };
        }
        if let Some(env) = &self.env {
            sandbox.env_keep = Some(env.split("env", &["keep"], "")?.1);
        }
        if let Some(home) = &self.home {
            sandbox.home = home.iter().map(|p| full_path("home", p.trim())).collect::<Result<_, _>>()?;
        }
        if let Some(optional) = self.optional {
            sandbox.optional = optional;
        }
        Ok(sandbox)
    }
}

impl WrittenList {
    /// `word [a, b]` or `{word: [a, b]}`, `word` one of `words`.
    fn split(
        &self,
        key: &'static str,
        words: &[&'static str],
        or: &'static str,
    ) -> Result<(&'static str, Vec<String>), BadSandbox> {
        let bad = |text: String| BadSandbox::BadList { key, text, first: words[0], or };
        let (word, list) = match self {
            WrittenList::Map(map) if map.len() == 1 => {
                let (word, list) = map.iter().next().expect("one entry");
                (word.clone(), list.clone())
            }
            WrittenList::Map(map) => return Err(bad(format!("{map:?}"))),
            WrittenList::Text(text) => {
                let (word, rest) = text.trim().split_once(char::is_whitespace).ok_or_else(|| bad(text.clone()))?;
                // The list is YAML's own flow sequence, read by the YAML crate.
                let list: Vec<String> = serde_saphyr::from_str(rest.trim()).map_err(|_| bad(text.clone()))?;
                (word.to_string(), list)
            }
        };
        let word = words.iter().find(|w| **w == word).ok_or_else(|| bad(word.clone()))?;
        Ok((word, list))
    }
}

fn full_path(key: &'static str, path: &str) -> Result<String, BadSandbox> {
    if !is_full_path(path) {
        return Err(BadSandbox::Relative { key, path: path.into() });
    }
    let trimmed = path.trim_end_matches('/');
    Ok(if trimmed.is_empty() { "/".to_string() } else { trimmed.to_string() })
}

/// Whether `path` is written from `/` or `~`, as a sandbox's places are.
pub fn is_full_path(path: &str) -> bool {
    path.starts_with('/') || path == "~" || path.starts_with("~/")
}

/// `host` as a host name (lowercase), or why it is not one.
pub fn host_name(host: &str) -> Result<String, BadSandbox> {
    // `host:port` opens that port alone; a host alone, the web's.
    let (name, port) = super::proxy::entry_parts(host);
    let port_ok = name.len() == host.len() || port.is_some_and(|p| p > 0);
    let name = name.strip_prefix("*.").unwrap_or(name);
    let ok = port_ok
        && !name.is_empty()
        && name
            .split('.')
            .all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    if ok {
        Ok(host.to_ascii_lowercase())
    } else {
        Err(BadSandbox::BadHost(host.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<Asked, BadSandbox> {
        serde_saphyr::from_str::<WrittenSandbox>(yaml).unwrap().read()
    }

    #[test]
    fn the_forms_a_person_writes_are_read() {
        assert_eq!(read("builder").unwrap(), Asked::Rules(Sandbox::profile("builder").unwrap()));
        assert_eq!(read("optional").unwrap(), Asked::Optional);
        assert_eq!(read("none").unwrap(), Asked::None);
        let Asked::Rules(s) =
            read("write: [worktree, /tmp]\nread: deny [~/.ssh, ~/.aws]\nnetwork: none\nenv: keep [PATH, HOME]\n")
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(s.write, [Place::Worktree, Place::Path("/tmp".into())]);
        assert_eq!(s.read, Read::Deny(vec!["~/.ssh".into(), "~/.aws".into()]));
        assert_eq!(s.network, Network::None);
        assert_eq!(s.env_keep, Some(vec!["PATH".into(), "HOME".into()]));
        let Asked::Rules(s) =
            read("{profile: reviewer, read: {only: [~/project]}, network: [github.com, '*.npmjs.org']}").unwrap()
        else {
            panic!()
        };
        assert_eq!(s.profile.as_deref(), Some("reviewer"));
        assert_eq!(s.read, Read::Only(vec!["~/project".into()]));
        assert_eq!(s.network, Network::Hosts(vec!["github.com".into(), "*.npmjs.org".into()]));
    }

    #[test]
    fn what_is_not_understood_is_said_with_what_to_write() {
        assert!(matches!(read("jailed"), Err(BadSandbox::UnknownProfile(_))));
        assert!(matches!(read("{network: some}"), Err(BadSandbox::BadNetwork(_))));
        assert!(matches!(read("{network: ['https://github.com']}"), Err(BadSandbox::BadHost(_))));
        assert!(matches!(read("{write: [tmp]}"), Err(BadSandbox::Relative { .. })));
        assert!(matches!(read("read: allow [~/.ssh]\n"), Err(BadSandbox::BadList { .. })));
        assert!(serde_saphyr::from_str::<WrittenSandbox>("{writes: [/tmp]}").is_err());
    }
}
