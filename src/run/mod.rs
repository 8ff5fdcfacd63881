//! A run: one launch of a preset with a task, as the store records it.
//!
//! Everything in [`Run`] is persisted; what a shepherd holds only while it
//! supervises (pipes, timers, the adapter's parse state) lives in
//! `shepherd`, never here.
//!
//! The wing around it holds what ties a process to its run: the run's
//! environment (`env`), which run a process works for (`caller`) and
//! whether it really blocks that run's agent (`blocking`), which runs an
//! agent may touch (`scope`), and the run's block of ports (`ports`).

pub mod blocking;
pub mod caller;
pub mod env;
pub mod ports;
pub mod scope;

use serde::{Deserialize, Serialize};

pub use crate::worktree::ChangeCount;

use crate::text::word::word_enum;
pub use crate::text::word::UnknownWord;

word_enum! {
    /// The agent CLIs Corral knows.
    pub enum AgentKind as "agent" {
        /// pi (`pi --mode json`).
        Pi = "pi",
        /// Claude Code (`claude -p --output-format stream-json`).
        Claude = "claude",
        /// Codex CLI (`codex exec --json`).
        Codex = "codex",
        /// Gemini CLI (`gemini --output-format stream-json`).
        Gemini = "gemini",
        /// opencode (`opencode run --format json`).
        Opencode = "opencode",
        /// Any program: the preset's `command`.
        Command = "command",
    }
}

word_enum! {
    /// Where a run is in its life. The last four are terminal.
    pub enum RunStatus as "status" {
        /// Waiting for a slot under `max_parallel`.
        Queued = "queued",
        /// Its shepherd is starting the agent.
        Starting = "starting",
        /// The agent is working.
        Running = "running",
        /// The agent ended its turn; the run waits on its child runs.
        Waiting = "waiting",
        /// Frozen by `corral pause`: every process of the run stopped, its
        /// clocks stopped, holding no slot, until `corral resume`.
        Paused = "paused",
        /// The agent finished its task.
        Completed = "completed",
        /// The agent or its process failed.
        Failed = "failed",
        /// Someone stopped it.
        Aborted = "aborted",
        /// Its shepherd died, so its end is unknown.
        Lost = "lost",
    }
}

word_enum! {
    /// Why a run is paused, when not by a person's `pause`.
    pub enum PauseReason as "pause reason" {
        /// It (or a run it belongs to) crossed a budget: it waits for the
        /// user to allow more or stop it.
        Budget = "budget",
        /// Its agent's usage limit was reached: it goes on by itself at
        /// `resumes_at`.
        UsageLimit = "usage_limit",
    }
}

impl RunStatus {
    /// True once the run's outcome is committed; it never changes after.
    pub fn is_terminal(self) -> bool {
        Self::TERMINAL.contains(&self)
    }

    /// True while the run counts as running (everything before terminal).
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }

    /// The statuses counted as running (everything before terminal).
    pub const ACTIVE: &'static [RunStatus] =
        &[Self::Queued, Self::Starting, Self::Running, Self::Waiting, Self::Paused];

    /// The statuses of a run whose outcome is committed.
    pub const TERMINAL: &'static [RunStatus] = &[Self::Completed, Self::Failed, Self::Aborted, Self::Lost];

    /// The statuses that hold a slot under `max_parallel` (unless the run's
    /// agent is blocked waiting on other runs; see `store::slots`).
    pub const SLOTTED: &'static [RunStatus] = &[Self::Starting, Self::Running];

    /// `statuses` as an SQL list, `('a', 'b')`: every status list in SQL is
    /// derived from these constants, never written by hand.
    pub fn sql_list(statuses: &[RunStatus]) -> String {
        Self::sql_list_of(statuses)
    }

    /// [`RunStatus::TERMINAL`] as an SQL list, made once.
    pub fn terminal_sql() -> &'static str {
        static LIST: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| RunStatus::sql_list_of(RunStatus::TERMINAL));
        &LIST
    }

    /// [`RunStatus::ACTIVE`] as an SQL list, made once: `status IN` these
    /// goes through the status index, where `status NOT IN` the terminal
    /// ones reads every run ever.
    pub fn active_sql() -> &'static str {
        static LIST: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| RunStatus::sql_list_of(RunStatus::ACTIVE));
        &LIST
    }

    fn sql_list_of(statuses: &[RunStatus]) -> String {
        let words: Vec<String> = statuses.iter().map(|s| format!("'{}'", s.as_str())).collect();
        format!("({})", words.join(", "))
    }
}

word_enum! {
    /// Why a run ended.
    pub enum StopReason as "stop reason" {
        /// The agent ended its turn normally.
        EndTurn = "end_turn",
        /// The agent hit its turn limit.
        MaxTurns = "max_turns",
        /// The model's API failed for good.
        ApiError = "api_error",
        /// The agent reported an error of its own.
        AgentError = "agent_error",
        /// The wall-clock `timeout` passed.
        Timeout = "timeout",
        /// No output for `idle_timeout`.
        Idle = "idle",
        /// No first output within `startup_timeout`.
        StartupTimeout = "startup_timeout",
        /// Its process was killed by a signal nobody in Corral sent.
        Signal = "signal",
        /// Its process exited with this exit code (see `exit_code`).
        ExitCode = "exit_code",
        /// A user or agent aborted it.
        UserAbort = "user_abort",
        /// Its shepherd died before the run ended.
        ShepherdDied = "shepherd_died",
        /// Its children were still running when `children_timeout` passed.
        ChildrenTimeout = "children_timeout",
        /// The agent could not be started at all.
        SpawnFailed = "spawn_failed",
        /// The run's worktree could not be made, or the preset's `setup`
        /// failed.
        SetupFailed = "setup_failed",
        /// The kernel's OOM killer ended the agent: the run used more than
        /// its memory limit.
        OutOfMemory = "out_of_memory",
        /// It crossed its budget with `on_budget: stop`.
        Budget = "budget",
        /// Its agent's usage or rate limit was reached, and it could not
        /// be waited out (no reset time said, and the tries ran out).
        UsageLimit = "usage_limit",
    }
}

/// Token counts of a run, summed over its model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens not read from cache.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// All tokens together.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    /// Each count added to the other's.
    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cache_read_tokens: self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens + other.cache_write_tokens,
        }
    }
}

/// "2 actions were denied: Bash(npm test), Edit(src/x.rs)" for refused tool
/// calls, if there are any.
pub fn denied_note(denied: &[String]) -> Option<String> {
    let n = denied.len();
    (n > 0).then(|| format!("{n} {} denied: {}", if n == 1 { "action was" } else { "actions were" }, denied.join(", ")))
}

/// One run as stored. Serializes to the `--json` run object of the CLI
/// contract (plus `children`, filled by the caller that knows them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    pub parent_id: Option<String>,
    /// Ids of runs launched from this one, oldest first.
    pub children: Vec<String>,
    pub preset: String,
    /// The preset file the run was launched from (`builtin:` for shipped ones).
    pub preset_path: String,
    pub agent: AgentKind,
    pub task: String,
    pub cwd: String,
    /// The model asked for, if any.
    pub model: Option<String>,
    /// The model the agent reports it used.
    pub resolved_model: Option<String>,
    pub status: RunStatus,
    pub stop_reason: Option<StopReason>,
    pub exit_code: Option<i32>,
    /// The signal that ended the agent's process, if one did.
    pub exit_signal: Option<i32>,
    pub final_text: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    /// `cost_usd` is Corral's estimate from the usage and its price table:
    /// the agent reported none.
    #[serde(default)]
    pub cost_estimated: bool,
    pub session_id: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    /// Semantic completion: when the outcome was committed.
    pub completed_at: Option<String>,
    /// When the last process of the run was reaped.
    pub exited_at: Option<String>,
    /// When a user or agent asked to stop it.
    pub abort_requested_at: Option<String>,
    pub notified_at: Option<String>,
    pub dismissed_at: Option<String>,
    /// The shepherd process, for identity checks (pid + start time).
    pub shepherd_pid: Option<i32>,
    #[serde(skip)]
    pub shepherd_start: Option<u64>,
    /// The agent process (leader of its process group).
    pub agent_pid: Option<i32>,
    #[serde(skip)]
    pub agent_start: Option<u64>,
    /// When its parent got its result (waited on it, read it, or was handed
    /// it in a continuation turn).
    pub collected_at: Option<String>,
    /// When it last began waiting on its children.
    pub waiting_at: Option<String>,
    /// When it got its slot (it started at once, or left the queue).
    pub promoted_at: Option<String>,
    /// The process that gave it its slot and starts its shepherd.
    #[serde(skip)]
    pub promoter_pid: Option<i32>,
    #[serde(skip)]
    pub promoter_start: Option<u64>,
    /// Tool calls the agent was refused (`Bash(npm test)`), in order.
    #[serde(default)]
    pub denied: Vec<String>,
    /// Its git worktree, while it has one (see `worktree`).
    pub worktree: Option<crate::worktree::Worktree>,
    /// The repository it was launched in, when it has (or had) a worktree.
    pub worktree_repo: Option<String>,
    /// Where its worktree is or was, even once discarded.
    #[serde(skip)]
    pub worktree_dir: Option<String>,
    /// The branch checked out there at launch: where `merge` brings changes.
    #[serde(skip)]
    pub worktree_from_branch: Option<String>,
    /// When a person (not another run's agent) last replied to it (`corral
    /// reply`): from then on it is their conversation, announced on its own.
    pub replied_at: Option<String>,
    /// While it runs: its agent is retrying a failing model call, as it
    /// says ("authentication_failed 401 (7/10), next try in 1119 ms").
    #[serde(default)]
    pub retrying: Option<String>,
    /// What its worktree changed, as last measured (at its end, and by
    /// every diff); `None` without a worktree or before any measure.
    pub changes: Option<ChangeCount>,
    /// How its processes are held: its cgroup, the limits applied and
    /// those that could not be, or why it has no cgroup.
    #[serde(default)]
    pub containment: Option<crate::cost::resources::Containment>,
    /// What its whole process tree used (CPU seconds, peak memory), as
    /// last measured; `None` before the first measure.
    #[serde(default)]
    pub resources: Option<crate::cost::resources::Resources>,
    /// While it is `paused`: since when.
    #[serde(default)]
    pub paused_at: Option<String>,
    /// Why it is paused, when Corral paused it (a budget crossed); `None`
    /// for a pause by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<crate::run::PauseReason>,
    /// Paused at its agent's usage limit: when it goes on by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes_at: Option<String>,
    /// Its ports (`CORRAL_PORT` is the first), if its preset asks for some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<crate::run::ports::PortBlock>,
    /// What it, with its child runs, may spend; `None`: no budget of its
    /// own (a run that launched it may still have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::cost::budget::Budget>,
    /// What crossing its budget does (pause and ask, or stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_budget: Option<crate::cost::budget::OnBudget>,
    /// How much of the database its transcript takes, and what a
    /// transcript cap left out.
    #[serde(default)]
    pub transcript: TranscriptSize,
    /// The `[hosts.NAME]` it runs on; `None` for a run of this machine.
    #[serde(default)]
    pub host: Option<String>,
    /// While its host cannot be reached and it was active when last seen:
    /// since when (its status is then as last seen, not known now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<String>,
    /// Why its host cannot be followed, in words that say what to do; set
    /// with `unreachable_since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_trouble: Option<String>,
}

/// A transcript's size in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptSize {
    /// Bytes of events kept (text and structured detail).
    pub bytes: u64,
    /// Events past the transcript cap, counted and not kept.
    pub dropped_events: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
}

impl Run {
    /// True if it ended in a way its user must hear of: failed, lost, or
    /// stopped by anything but the user (its budget's `on_budget: stop`, a
    /// signal, the memory limit). The notifications' alarm and what needs
    /// the user both ask this ([`Run::ENDED_BADLY_SQL`] is the same rule
    /// for the store).
    pub fn ended_badly(&self) -> bool {
        match self.status {
            RunStatus::Failed | RunStatus::Lost => true,
            RunStatus::Aborted => self.stop_reason != Some(StopReason::UserAbort),
            _ => false,
        }
    }

    /// [`Run::ended_badly`] as an SQL condition on `runs`.
    pub const ENDED_BADLY_SQL: &'static str =
        "(status IN ('failed', 'lost') OR (status = 'aborted' AND coalesce(stop_reason, '') <> 'user_abort'))";

    /// "2 actions were denied: Bash(npm test), Edit(src/x.rs)", if any were.
    pub fn denied_note(&self) -> Option<String> {
        denied_note(&self.denied)
    }

    /// Why it stopped, when that says more than its status: `None` for a
    /// run that completed the ordinary way (its agent's turn ended, its
    /// command exited 0), where "exit code" beside "completed" read like
    /// an error. `show`, `wait` and the window's run page say this.
    pub fn stop_reason_said(&self) -> Option<StopReason> {
        match (self.status, self.stop_reason) {
            (RunStatus::Completed, Some(StopReason::EndTurn | StopReason::ExitCode)) => None,
            (_, reason) => reason,
        }
    }

    /// The line `corral wait` prints for the run as it ended: its id, its
    /// status, why it stopped when that says more, and its headline, shown
    /// as a terminal may show it (the agent wrote it).
    pub fn ended_line(&self) -> String {
        let reason = self.stop_reason_said().map(|r| format!(" ({r})")).unwrap_or_default();
        format!("{}  {}{reason}  {}", self.id, self.status, crate::text::shown::name(self.headline()))
    }

    /// What one line about the run should say: the first non-blank line of
    /// its error, else of its final text — but of a command's final text
    /// (the last lines of its output) the last, where a command says how it
    /// came out. The notifications, `wait` and a parent's summary of its
    /// children all say this.
    pub fn headline(&self) -> &str {
        let from_end = self.error.is_none() && self.agent == AgentKind::Command;
        let detail = self.error.as_deref().or(self.final_text.as_deref()).unwrap_or("");
        let mut lines = detail.lines().map(str::trim).filter(|l| !l.is_empty());
        (if from_end { lines.next_back() } else { lines.next() }).unwrap_or("")
    }

    /// The folder the run was launched in: with a worktree, the same
    /// subfolder of the repository it was launched from.
    pub fn launch_folder(&self) -> std::path::PathBuf {
        let cwd = std::path::Path::new(&self.cwd);
        self.folder_launched_for(cwd).unwrap_or_else(|| cwd.to_path_buf())
    }

    /// For a folder inside this run's worktree (kept or discarded), the
    /// same folder in the repository the run was launched from.
    pub fn folder_launched_for(&self, folder: &std::path::Path) -> Option<std::path::PathBuf> {
        let (worktree, repo) = (self.worktree_dir.as_ref()?, self.worktree_repo.as_ref()?);
        let inside = folder.strip_prefix(worktree).ok()?;
        Some(std::path::Path::new(repo).join(inside))
    }

    /// Wall time from start to semantic completion (or, while active, to
    /// now; while paused, to the moment it was frozen: a frozen run does
    /// not tick).
    pub fn duration(&self, now: crate::text::time::Timestamp) -> Option<chrono::Duration> {
        let start = crate::text::time::parse(self.started_at.as_deref()?)?;
        let end = match (&self.completed_at, &self.paused_at) {
            (Some(done), _) => crate::text::time::parse(done)?,
            (None, Some(frozen)) if self.status == RunStatus::Paused => crate::text::time::parse(frozen)?,
            (None, _) if self.status.is_active() => now,
            (None, _) => return None,
        };
        Some(end - start)
    }
}
