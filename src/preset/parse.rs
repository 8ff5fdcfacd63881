//! Reading one preset file: frontmatter split, YAML through serde-saphyr,
//! and the checks that turn a raw frontmatter into a [`Preset`].
//!
//! Claude Code agent files and pi subagent files are read as they are
//! written in the wild: `tools: Read, Grep, Glob`, keys Corral does not use
//! (`color`, `thinking`, ...), no `agent:` key.

use std::time::Duration;

use serde::Deserialize;

use super::{Preset, PresetSource};
use crate::run::AgentKind;

/// A value that may be written as `a, b, c` or as a YAML list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StringOrList {
    List(Vec<Word>),
    Text(String),
}

/// One list item. YAML reads `true`, `5` or `1.5` as non-strings, but in an
/// argv (`args: [--max-turns, 5]`, `command: [true]`) they are words.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Word {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Word {
    fn into_string(self) -> String {
        match self {
            Word::Text(s) => s,
            Word::Int(i) => i.to_string(),
            Word::Float(f) => f.to_string(),
            Word::Bool(b) => b.to_string(),
        }
    }
}

fn words(list: Vec<Word>) -> Vec<String> {
    list.into_iter().map(Word::into_string).collect()
}

/// A duration written as `30m`, `1h 30m`, `90s`, or a number of seconds.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Seconds(u64),
    Text(String),
}

/// The frontmatter keys Corral reads; any other key is ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Frontmatter {
    name: Option<String>,
    description: Option<String>,
    agent: Option<String>,
    model: Option<String>,
    tools: Option<StringOrList>,
    timeout: Option<DurationValue>,
    idle_timeout: Option<DurationValue>,
    startup_timeout: Option<DurationValue>,
    children_timeout: Option<DurationValue>,
    command: Option<StringOrList>,
    args: Option<Vec<Word>>,
    worktree: Option<bool>,
    setup: Option<StringOrList>,
    teardown: Option<StringOrList>,
    worktree_include: Option<StringOrList>,
    ports: Option<u16>,
    env: Option<std::collections::BTreeMap<String, Word>>,
    notify: Option<String>,
    limits: Option<crate::cost::resources::WrittenLimits>,
    mcp: Option<String>,
    pr: Option<String>,
    schedule: Option<super::PresetSchedule>,
    budget: Option<crate::cost::budget::WrittenBudget>,
    on_budget: Option<String>,
    sandbox: Option<crate::sandbox::WrittenSandbox>,
}

/// Why a file is not a usable preset; each message says how to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PresetError {
    #[error("no YAML frontmatter: the file must start with a `---` line")]
    NoFrontmatter,
    #[error("the frontmatter is not closed: add a `---` line after it")]
    Unclosed,
    #[error("invalid YAML frontmatter: {0}")]
    Yaml(String),
    #[error(transparent)]
    BadLimit(#[from] crate::cost::resources::BadLimit),
    #[error("missing `{0}:` in the frontmatter")]
    Missing(&'static str),
    #[error("`name: {0}` must be one word without spaces or slashes")]
    BadName(String),
    #[error("`agent`: {0}")]
    UnknownAgent(#[from] crate::run::UnknownWord),
    #[error("`notify`: {0}")]
    BadNotify(crate::run::UnknownWord),
    #[error("`mcp`: {0}")]
    BadMcp(crate::run::UnknownWord),
    #[error("`pr`: {0}")]
    BadPr(crate::run::UnknownWord),
    #[error("`budget`: {0}")]
    BadBudget(#[from] crate::cost::budget::BadBudget),
    #[error("`on_budget`: {0}")]
    BadOnBudget(crate::run::UnknownWord),
    #[error("`sandbox`: {0}")]
    BadSandbox(#[from] crate::sandbox::BadSandbox),
    #[error("missing `agent:` (one of pi, claude, codex, gemini, opencode, command)")]
    NoAgent,
    #[error("`command: {0}` must be a list of arguments, e.g. `command: [cargo, test]` (no shell is used)")]
    CommandNotList(String),
    #[error("`agent: command` needs `command:`, a list such as [cargo, test]")]
    NoCommand,
    #[error("`setup: {0}` must be a list of arguments, e.g. `setup: [npm, ci]` (no shell is used)")]
    SetupNotList(String),
    #[error(
        "`teardown: {0}` must be a list of arguments, e.g. `teardown: [dropdb, \"app_{{run}}\"]` (no shell is used)"
    )]
    TeardownNotList(String),
    #[error("`env: {0}` is not a name for an environment variable (letters, digits and _, not starting with a digit)")]
    BadEnvName(String),
    #[error("`env: {0}` is Corral's own (it ties a process to its run and its store): a preset cannot set it")]
    CorralEnv(String),
    #[error("`env: {0}` holds a NUL byte, which no environment variable can")]
    NulInEnv(String),
    #[error("`ports: {0}`: at most 1000 ports a run")]
    TooManyPorts(u16),
    #[error(
        "`env: {name}` uses {{{word}}}, which Corral does not fill in: it knows {{run}}, {{port}} and {{worktree}}"
    )]
    BadPlaceholder { name: String, word: String },
    #[error("`{key}: {text}` is not a duration ({reason}); write e.g. 30m, 90s, 1h 30m")]
    BadDuration { key: &'static str, text: String, reason: String },
    #[error("cannot read the file: {0}")]
    Unreadable(String),
}

/// Parses a preset file's text. `path` and `source` say where it came from.
pub fn parse_preset(text: &str, path: &str, source: PresetSource) -> Result<Preset, PresetError> {
    let (yaml, body) = split_frontmatter(text)?;
    let front: Frontmatter = if yaml.trim().is_empty() {
        Frontmatter::default()
    } else {
        serde_saphyr::from_str(yaml).map_err(|e| PresetError::Yaml(e.to_string()))?
    };

    let name = required(front.name, "name")?;
    if name.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(PresetError::BadName(name));
    }
    let description = required(front.description, "description")?;
    let agent = match front.agent.as_deref().map(str::trim) {
        Some(word) => word.parse::<AgentKind>()?,
        None => source.default_agent().ok_or(PresetError::NoAgent)?,
    };
    // Claude Code writes `model: inherit` for "whatever the session uses".
    let model = front.model.map(|m| m.trim().to_string()).filter(|m| !m.is_empty() && m != "inherit");
    let tools = match front.tools {
        None => Vec::new(),
        Some(StringOrList::List(list)) => words(list),
        Some(StringOrList::Text(text)) => text.split(',').map(str::to_string).collect(),
    };
    let tools = tools.into_iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
    let command = match front.command {
        None => Vec::new(),
        Some(StringOrList::List(list)) => words(list),
        Some(StringOrList::Text(text)) => return Err(PresetError::CommandNotList(text)),
    };
    if agent == AgentKind::Command && command.is_empty() {
        return Err(PresetError::NoCommand);
    }
    let setup = match front.setup {
        None => Vec::new(),
        Some(StringOrList::List(list)) => words(list),
        Some(StringOrList::Text(text)) => return Err(PresetError::SetupNotList(text)),
    };
    let teardown = match front.teardown {
        None => Vec::new(),
        Some(StringOrList::List(list)) => words(list),
        Some(StringOrList::Text(text)) => return Err(PresetError::TeardownNotList(text)),
    };
    // One pattern per line, as in .worktreeinclude, or a list.
    let worktree_include = match front.worktree_include {
        None => Vec::new(),
        Some(StringOrList::List(list)) => words(list),
        Some(StringOrList::Text(text)) => text.lines().map(str::to_string).collect(),
    };
    let env = front.env.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_string())).collect();
    check_env(&env)?;

    Ok(Preset {
        name,
        description,
        agent,
        model,
        tools,
        timeout: duration(front.timeout, "timeout")?,
        idle_timeout: duration(front.idle_timeout, "idle_timeout")?,
        startup_timeout: duration(front.startup_timeout, "startup_timeout")?,
        children_timeout: duration(front.children_timeout, "children_timeout")?,
        command,
        args: front.args.map(words).unwrap_or_default(),
        notify: front.notify.as_deref().map(|w| w.trim().parse()).transpose().map_err(PresetError::BadNotify)?,
        mcp: front.mcp.as_deref().map(|w| w.trim().parse()).transpose().map_err(PresetError::BadMcp)?,
        pr: front.pr.as_deref().map(|w| w.trim().parse()).transpose().map_err(PresetError::BadPr)?,
        worktree: front.worktree.unwrap_or(false),
        setup,
        teardown,
        worktree_include,
        ports: match front.ports {
            Some(n) if n > crate::run::ports::MOST => return Err(PresetError::TooManyPorts(n)),
            ports => ports.filter(|&n| n > 0),
        },
        env,
        limits: front
            .limits
            .as_ref()
            .map(crate::cost::resources::ResourceLimits::parse)
            .transpose()?
            .unwrap_or_default(),
        schedule: front.schedule,
        budget: front.budget.as_ref().map(crate::cost::budget::WrittenBudget::read).transpose()?,
        on_budget: front
            .on_budget
            .as_deref()
            .map(|w| w.trim().parse())
            .transpose()
            .map_err(PresetError::BadOnBudget)?,
        sandbox: front.sandbox.as_ref().map(crate::sandbox::WrittenSandbox::read).transpose()?,
        system_prompt: body.trim().to_string(),
        source,
        path: path.to_string(),
        warnings: if yaml.trim().is_empty() { Vec::new() } else { misspelled_keys(yaml) },
    })
}

/// Checks `env:`: names a shell can export, and only the placeholders
/// Corral fills in (a typo such as `{rnu}` would reach the agent as is).
fn check_env(env: &std::collections::BTreeMap<String, String>) -> Result<(), PresetError> {
    for (name, value) in env {
        let first_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !first_ok || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(PresetError::BadEnvName(name.clone()));
        }
        if name.starts_with("CORRAL_") {
            return Err(PresetError::CorralEnv(name.clone()));
        }
        if value.contains('\0') {
            return Err(PresetError::NulInEnv(name.clone()));
        }
        let mut rest = value.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { break };
            let word = &rest[open + 1..open + close];
            if !crate::run::env::PLACEHOLDERS.contains(&word)
                && !word.is_empty()
                && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(PresetError::BadPlaceholder { name: name.clone(), word: word.to_string() });
            }
            rest = &rest[open + close + 1..];
        }
    }
    Ok(())
}

/// The keys Corral reads in a frontmatter.
const KEYS: &[&str] = &[
    "name",
    "description",
    "agent",
    "model",
    "tools",
    "timeout",
    "idle_timeout",
    "startup_timeout",
    "children_timeout",
    "command",
    "args",
    "worktree",
    "setup",
    "teardown",
    "worktree_include",
    "ports",
    "env",
    "notify",
    "limits",
    "mcp",
    "pr",
    "schedule",
    "budget",
    "on_budget",
    "sandbox",
];

/// A warning for each key that Corral does not read but that is one or two
/// edits from a key it does. Other keys are left alone: Claude Code's and
/// pi's own (`color`, `thinking`) are read by them, not by Corral.
fn misspelled_keys(yaml: &str) -> Vec<String> {
    let Ok(keys) = serde_saphyr::from_str::<std::collections::BTreeMap<String, serde::de::IgnoredAny>>(yaml) else {
        return Vec::new();
    };
    keys.keys()
        .filter(|key| !KEYS.contains(&key.as_str()))
        .filter_map(|key| {
            let (distance, near) = KEYS.iter().map(|k| (edit_distance(key, k), *k)).min()?;
            (distance <= 2 && distance < key.len() / 2 + 1)
                .then(|| format!("`{key}:` is not a key Corral reads, so it does nothing: did you mean `{near}:`?"))
        })
        .collect()
}

/// Levenshtein distance between two short words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Splits `---\nYAML\n---\nbody`. Accepts a BOM, CRLF and `...` as the end.
fn split_frontmatter(text: &str) -> Result<(&str, &str), PresetError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(PresetError::NoFrontmatter);
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            return Ok((&text[start..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(PresetError::Unclosed)
}

fn required(value: Option<String>, key: &'static str) -> Result<String, PresetError> {
    value.map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).ok_or(PresetError::Missing(key))
}

fn duration(value: Option<DurationValue>, key: &'static str) -> Result<Option<Duration>, PresetError> {
    let (text, parsed) = match value {
        None => return Ok(None),
        Some(DurationValue::Seconds(s)) => (s.to_string(), Ok(Duration::from_secs(s))),
        Some(DurationValue::Text(text)) => {
            let parsed = humantime::parse_duration(text.trim()).map_err(|e| e.to_string());
            (text, parsed)
        }
    };
    let bad = |reason: String| PresetError::BadDuration { key, text: text.clone(), reason };
    let d = parsed.map_err(bad)?;
    match crate::text::time::too_long(d) {
        Some(why) => Err(bad(why)),
        None => Ok(Some(d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_of_a_key_gets_a_did_you_mean_and_foreign_keys_do_not() {
        let text =
            "---\nname: x\ndescription: d\nagent: pi\ntimout: 5m\nidle-timeout: 1m\ncolor: blue\nthinking: high\n---\n";
        let preset = parse(text, PresetSource::Global).unwrap();
        assert_eq!(
            preset.warnings,
            [
                "`idle-timeout:` is not a key Corral reads, so it does nothing: did you mean `idle_timeout:`?",
                "`timout:` is not a key Corral reads, so it does nothing: did you mean `timeout:`?",
            ]
        );
    }

    fn parse(text: &str, source: PresetSource) -> Result<Preset, PresetError> {
        parse_preset(text, "/x/p.md", source)
    }

    #[test]
    fn reads_a_claude_code_agent_as_written() {
        let text = "---\nname: code-reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob\nmodel: inherit\ncolor: blue\n---\nYou review code.\n";
        let p = parse(text, PresetSource::ClaudeUser).unwrap();
        assert_eq!(p.agent, AgentKind::Claude);
        assert_eq!(p.tools, ["Read", "Grep", "Glob"]);
        assert_eq!(p.model, None);
        assert_eq!(p.system_prompt, "You review code.");
    }

    #[test]
    fn reads_durations_lists_and_crlf() {
        let text = "---\r\nname: t\r\ndescription: d\r\nagent: command\r\nargs: [--max-turns, 5, true]\r\ncommand: [cargo, test]\r\ntimeout: 1h 30m\r\nidle_timeout: 90\r\ntools:\r\n  - read\r\n  - grep\r\n---\r\nbody";
        let p = parse(text, PresetSource::Global).unwrap();
        assert_eq!(p.timeout, Some(Duration::from_secs(5400)));
        assert_eq!(p.idle_timeout, Some(Duration::from_secs(90)));
        assert_eq!(p.command, ["cargo", "test"]);
        assert_eq!(p.args, ["--max-turns", "5", "true"]);
        assert_eq!(p.tools, ["read", "grep"]);
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases = [
            ("no frontmatter", "frontmatter"),
            ("---\nname: x\n", "not closed"),
            ("---\nname: [x\n---\n", "invalid YAML"),
            ("---\nname: x\n---\n", "missing `description:`"),
            ("---\nname: x\ndescription: d\n---\n", "missing `agent:`"),
            ("---\nname: x\ndescription: d\nagent: gpt\n---\n", "unknown agent 'gpt'"),
            ("---\nname: x\ndescription: d\nagent: command\n---\n", "needs `command:`"),
            ("---\nname: x\ndescription: d\nagent: pi\ntimeout: soon\n---\n", "not a duration"),
        ];
        for (text, want) in cases {
            let err = parse(text, PresetSource::Global).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
