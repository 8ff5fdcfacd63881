//! Presets: markdown files with YAML frontmatter that say which agent to run,
//! how, and with what system prompt.
//!
//! They are found in several places (see [`discover`]); a later source
//! overrides an earlier one by name. A file that cannot be used is reported
//! with its path and the reason and never stops the others from loading.

pub mod available;
mod discover;
mod parse;
mod shipped;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::run::AgentKind;
use crate::text::word::word_enum;

pub use discover::{discover, discover_named, Roots};
pub use parse::{parse_preset, PresetError};
pub use shipped::SHIPPED;

word_enum! {
    /// Where a preset was found, lowest precedence first.
    pub enum PresetSource as "preset source" {
        /// Shipped with Corral (embedded in the binary).
        Shipped = "shipped",
        /// `~/.claude/agents/`.
        ClaudeUser = "claude-user",
        /// `~/.pi/agent/subagents/`.
        PiUser = "pi-user",
        /// Corral's global presets folder.
        Global = "global",
        /// The nearest `.claude/agents/` above the working folder.
        ClaudeProject = "claude-project",
        /// The nearest `.pi/subagents/` above the working folder.
        PiProject = "pi-project",
        /// The nearest `.corral/presets/` above the working folder.
        CorralProject = "corral-project",
    }
}

word_enum! {
    /// When a run of a preset is announced on its own (preset key `notify`).
    pub enum Notify as "notify setting" {
        /// Whenever it ends.
        Always = "always",
        /// Only when it does not complete.
        Failures = "failures",
        /// Never (its top-level run still speaks for it).
        Never = "never",
    }
}

word_enum! {
    /// Which runs an agent of a preset may see and act on over MCP
    /// (preset key `mcp`).
    pub enum McpScope as "mcp scope" {
        /// The runs it launched, and their runs (the default).
        Own = "own",
        /// Every run of the installation.
        All = "all",
    }
}

word_enum! {
    /// Whether an agent of a preset may open pull requests itself (preset
    /// key `pr`): a person always may (`corral pr`); an agent, or a
    /// schedule's run, only where its preset says `pr: allow`.
    pub enum PrPolicy as "pr policy" {
        /// Its agent may open pull requests of its runs (`corral pr`,
        /// MCP `open_pull_request`).
        Allow = "allow",
        /// Only a person opens them (the default).
        Ask = "ask",
    }
}

impl PresetSource {
    /// The agent a file from here runs when it names none.
    pub fn default_agent(self) -> Option<AgentKind> {
        match self {
            Self::ClaudeUser | Self::ClaudeProject => Some(AgentKind::Claude),
            Self::PiUser | Self::PiProject => Some(AgentKind::Pi),
            Self::Shipped | Self::Global | Self::CorralProject => None,
        }
    }
}

/// A usable preset, as parsed from its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preset {
    /// Unique name; later sources override earlier ones by it.
    pub name: String,
    /// One line saying what it is for.
    pub description: String,
    /// Which agent CLI runs it.
    pub agent: AgentKind,
    /// Model to ask the agent for.
    pub model: Option<String>,
    /// Tools the agent may use (agent-specific names).
    pub tools: Vec<String>,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Limit on silence after the first output.
    pub idle_timeout: Option<Duration>,
    /// Limit on the wait for the first output.
    pub startup_timeout: Option<Duration>,
    /// Limit on waiting for child runs.
    pub children_timeout: Option<Duration>,
    /// Program and arguments, for `agent: command`.
    pub command: Vec<String>,
    /// Extra arguments for the agent CLI.
    pub args: Vec<String>,
    /// When its runs are announced on their own; `None`: top-level runs
    /// always, runs launched by another run never (their top-level run's
    /// announcement speaks for the whole tree).
    #[serde(default)]
    pub notify: Option<Notify>,
    /// Run in a git worktree of its own (see `worktree`).
    #[serde(default)]
    pub worktree: bool,
    /// A program and arguments run in the worktree before the agent starts
    /// (`[npm, ci]`); if it fails, the run fails with its output.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files git ignores in the user's checkout carried into the run's
    /// worktree before `setup`, in gitignore syntax (`[.env,
    /// node_modules/]`), besides the checkout's `.worktreeinclude`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worktree_include: Vec<String>,
    /// A program and arguments run when the run's worktree is discarded or
    /// removed (`[dropdb, "app_{run}"]`), inside the run's cgroup and
    /// sandbox, with its environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teardown: Vec<String>,
    /// How many ports its runs get: `CORRAL_PORT` is the first of a block
    /// no other active run has and nothing listens on; `config.toml`'s
    /// `ports` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<u16>,
    /// Environment of its runs (and of `setup` and `teardown`), with
    /// `{run}`, `{port}` and `{worktree}` put in: `DATABASE_URL:
    /// postgres:///app_{run}`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Limits on the run's whole process tree (`limits: {memory: 4G, cpu:
    /// 200%, tasks: 512}`); `config.toml`'s `[limits]` fill the rest.
    #[serde(default, skip_serializing_if = "crate::cost::resources::ResourceLimits::is_empty")]
    pub limits: crate::cost::resources::ResourceLimits,
    /// Which runs its agent may act on over MCP (`mcp: all`; default: its
    /// own runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpScope>,
    /// Whether its agent may open pull requests (`pr: allow`; default: only
    /// a person does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr: Option<PrPolicy>,
    /// When it launches itself (`schedule: {cron: "0 3 * * *", task: …}`):
    /// a global preset's schedule is kept as a schedule of its own name
    /// (see `schedule::sync`). As written; read by the schedule module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<PresetSchedule>,
    /// What a run (with its child runs) may spend (`budget: {usd: 2,
    /// tokens: 2M}`); `config.toml`'s `[budget]` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::cost::budget::Budget>,
    /// What crossing the budget does: `pause` (and ask) or `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_budget: Option<crate::cost::budget::OnBudget>,
    /// `sandbox:`: what its runs may touch (a profile, rules, `optional`
    /// or `none`); `None` leaves it to `[sandbox]` in config.toml.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::Asked>,
    /// The markdown body: appended to the agent's system prompt.
    pub system_prompt: String,
    /// Where it was found.
    pub source: PresetSource,
    /// Its file (`builtin:presets/NAME.md` for shipped ones).
    pub path: String,
    /// What looks wrong but does not stop it: a key Corral does not read
    /// that is close to one it does (`timout:`, did you mean `timeout:`?).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Preset {
    /// Whether its `env:`, `setup` or `teardown` names `{port}`: its runs
    /// need a block of ports of their own, or every run would share the
    /// same empty one (`app_` for every run's database).
    pub fn uses_port(&self) -> bool {
        let named = |word: &String| word.contains("{port}");
        self.env.values().any(named) || self.setup.iter().any(named) || self.teardown.iter().any(named)
    }
}

/// A preset's `schedule:` as written: when, the task, and the rules of
/// its fires (the same as `corral schedule add`'s options).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetSchedule {
    /// A cron expression in the local time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A period: `2h`, `1d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// A calendar phrase in the local time zone: `weekdays 09:00`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The task of each fire; `{item}` is a precheck line with `each`.
    pub task: String,
    /// The folder its runs work in (default: the user's home; `~/` works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `skip` (default), `queue` or `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// A command and its arguments run before each fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precheck: Option<Vec<String>>,
    /// One run per new line the precheck prints.
    #[serde(default)]
    pub each: bool,
    /// How long the precheck may take: `60s` (the default), `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precheck_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_fire: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_hour: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// What its fires' runs may spend in a day: `$5`, `usd=5,tokens=5M`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_per_day: Option<String>,
    /// `keep: {last: 10, days: 14}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<PresetKeep>,
}

/// `keep:` of a preset's schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresetKeep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
}

/// A file that could not be used as a preset, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresetProblem {
    /// The file.
    pub path: String,
    /// Where it was found.
    pub source: PresetSource,
    /// What is wrong and how to fix it.
    pub reason: String,
}

/// A preset in effect, with the files it overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effective {
    /// The winning preset.
    #[serde(flatten)]
    pub preset: Preset,
    /// Paths of lower-precedence presets of the same name, nearest last.
    pub overrides: Vec<String>,
    /// Why its agent cannot start here, once asked (see
    /// [`PresetSet::mark_unavailable`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Every preset in effect for one working folder, and every problem found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PresetSet {
    /// In effect, sorted by name.
    pub presets: Vec<Effective>,
    /// Files that could not be used, in discovery order.
    pub problems: Vec<PresetProblem>,
    /// The folders searched, lowest precedence first.
    pub searched: Vec<PathBuf>,
}

/// A preset name that is not in effect.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no preset '{name}'{hint}: see 'corral presets'")]
pub struct UnknownPreset {
    /// What was asked for.
    pub name: String,
    /// A note about a broken file of that name, if any.
    pub hint: String,
}

impl PresetSet {
    /// Marks each preset whose agent cannot start from `cwd` with `path` as
    /// its PATH, with why (see `available`).
    pub fn mark_unavailable(&mut self, path: Option<&std::ffi::OsStr>, cwd: &std::path::Path) {
        for e in &mut self.presets {
            e.unavailable = available::unavailable(&e.preset, path, cwd);
        }
    }

    /// The preset in effect under `name`.
    pub fn get(&self, name: &str) -> Result<&Preset, UnknownPreset> {
        if let Some(found) = self.presets.iter().find(|e| e.preset.name == name) {
            return Ok(&found.preset);
        }
        let broken =
            self.problems.iter().find(|p| std::path::Path::new(&p.path).file_stem().is_some_and(|stem| stem == name));
        let hint = match broken {
            Some(p) => format!(" (the file {} has a problem: {})", p.path, p.reason),
            None => String::new(),
        };
        Err(UnknownPreset { name: name.to_string(), hint })
    }
}
