//! The agent's session over a run's turns: how it is started again, what
//! its adapter reads from the stream, and what every turn together
//! reported.
//!
//! A run's first turn is started by the shepherd's setup; a continuation
//! (the results of child runs) or a reply takes another turn in the same
//! session, where the agent can resume one. Each turn reads its stream
//! with a fresh adapter; what earlier turns reported is kept here and
//! added to the new one's.

use std::time::{Duration, Instant};

use super::replies::NextTurn;
use super::spawn::{self, AgentLaunch};
use crate::adapter::session_log::SessionLog;
use crate::adapter::{self, Adapter, EventKind, Invocation, Report, StreamLine, TranscriptEvent, Verdict};
use crate::process::StartedAgent;
use crate::run::{RunStatus, Usage};

/// The agent's session and what its turns reported so far.
pub(super) struct Session {
    launch: AgentLaunch,
    adapter: Box<dyn Adapter>,
    /// What earlier turns reported (a run reopened by a reply: those of
    /// earlier shepherds too).
    earlier: Option<Report>,
    /// The current turn's terminal verdict, read and not yet concluded on.
    verdict: Option<Verdict>,
    /// What the turn reported as of its terminal event: output after it
    /// (even in the same read) is transcript, never part of the outcome.
    frozen: Option<Report>,
    /// Continuation turns taken so far, of at most `max_continuations`.
    continuations: usize,
    max_continuations: usize,
    /// What the sandbox refused, over every turn, in order.
    refused: Vec<crate::sandbox::denial::Denial>,
    /// The agent's session file, followed for a live spend where its
    /// stream says usage only at a turn's end, and what it said so far.
    log: Option<SessionLog>,
    logged: Option<Usage>,
    log_read_at: Option<Instant>,
}

/// How often the agent's session file is looked at while its turn runs.
const LOG_EVERY: Duration = crate::upkeep::heal::HEAL_EVERY_AT_WORK;

impl Session {
    /// The session of `launch`, whose first turn `adapter` reads.
    pub fn new(
        launch: AgentLaunch,
        adapter: Box<dyn Adapter>,
        earlier: Option<Report>,
        max_continuations: usize,
    ) -> Session {
        let log = session_log(&launch, adapter.as_ref());
        Session {
            launch,
            adapter,
            earlier,
            verdict: None,
            frozen: None,
            continuations: 0,
            max_continuations,
            refused: Vec::new(),
            log,
            logged: None,
            log_read_at: None,
        }
    }

    /// Looks at the agent's session file (at most every [`LOG_EVERY`]):
    /// true if it says the turn spent more than it said before.
    pub fn follow_session_log(&mut self, now: Instant) -> bool {
        // Only an agent with a session file, and not more often than
        // LOG_EVERY: this is the shepherd's loop.
        if self.log.is_none()
            || self.frozen.is_some()
            || self.log_read_at.is_some_and(|at| now.duration_since(at) < LOG_EVERY)
        {
            return false;
        }
        self.log_read_at = Some(now);
        let session = self.adapter.report().session_id.or_else(|| self.earlier.as_ref()?.session_id.clone());
        let Some(log) = self.log.as_mut() else { return false };
        let said = log.follow(session.as_deref().unwrap_or_default());
        let changed = said.is_some() && said != self.logged;
        self.logged = said.or(self.logged);
        changed
    }

    /// How the agent is started (its preset, limits, cgroup).
    pub fn launch(&self) -> &AgentLaunch {
        &self.launch
    }

    /// How the agent is started, to change for the next turn (a widened
    /// sandbox).
    pub fn launch_mut(&mut self) -> &mut AgentLaunch {
        &mut self.launch
    }

    /// The current turn's adapter.
    pub fn adapter(&mut self) -> &mut dyn Adapter {
        self.adapter.as_mut()
    }

    /// One line of stdout to the adapter, its events into `out`. The
    /// terminal event's verdict is kept with what the turn reported as of
    /// it (the first one only, and none once the turn is `over`).
    pub fn read_line(&mut self, line: StreamLine<'_>, out: &mut Vec<TranscriptEvent>, over: bool) {
        let from = out.len();
        let verdict = self.adapter.read_line(line, out);
        self.note_denials(out, from);
        if self.verdict.is_none() && !over && verdict.is_some() {
            self.frozen = Some(self.adapter.report());
            self.verdict = verdict;
        }
    }

    /// What the adapter holds back (a command's output gathered into
    /// events of a size), into `out`, with the refusals it says: every
    /// event the agent's output becomes passes here or through
    /// [`Session::read_line`], so none goes unread for denials.
    pub fn flush_output(&mut self, out: &mut Vec<TranscriptEvent>) {
        let from = out.len();
        self.adapter.flush(out);
        self.note_denials(out, from);
    }

    /// Adds a denial after each event from `from` on in which a tool says
    /// the sandbox refused it (each refusal once per run).
    pub fn note_denials(&mut self, out: &mut Vec<TranscriptEvent>, from: usize) {
        let Some((sandbox, _)) = &self.launch.sandbox else { return };
        let (home, cwd) = (&self.launch.user_home, std::path::Path::new(&self.launch.cwd));
        let mut found = Vec::new();
        for event in &out[from..] {
            if matches!(event.kind, EventKind::ToolResult | EventKind::Output | EventKind::Stderr) {
                found.extend(crate::sandbox::denial::in_text(&event.text, sandbox, home, cwd));
            }
        }
        self.add_denials(found, out);
    }

    /// Denials for hosts the sandbox's proxy refused.
    pub fn refused_hosts(&mut self, hosts: Vec<String>, out: &mut Vec<TranscriptEvent>) {
        let found = hosts.into_iter().map(crate::sandbox::denial::Denial::Connect).collect();
        self.add_denials(found, out);
    }

    /// Each new refusal, as an event after `out`'s and in the run's list.
    fn add_denials(&mut self, found: Vec<crate::sandbox::denial::Denial>, out: &mut Vec<TranscriptEvent>) {
        for denial in found {
            if self.refused.contains(&denial) {
                continue;
            }
            let json = serde_json::json!({"sandbox": denial.entry()});
            out.push(TranscriptEvent {
                kind: EventKind::Denial,
                text: denial.describe(&self.launch.run_id, &self.launch.user_home),
                json: Some(json),
            });
            self.refused.push(denial);
        }
    }

    /// The terminal verdict read and not yet concluded on, taken.
    pub fn take_verdict(&mut self) -> Option<Verdict> {
        self.verdict.take()
    }

    /// What the stream said, over every turn.
    pub fn report(&self) -> Report {
        let mut now = self.frozen.clone().unwrap_or_else(|| self.adapter.report());
        // Until the stream says the turn's usage, what its session file
        // said so far.
        if now.usage.total() == 0 {
            if let Some(logged) = self.logged {
                now.usage = logged;
            }
        }
        now.denied.extend(self.refused.iter().map(|d| d.entry()));
        match &self.earlier {
            Some(earlier) => {
                // A later turn is priced on its own while it runs (Claude
                // Code says a turn's cost only at its end), then added to
                // what the earlier turns cost: else their cost stood for
                // the whole run, and no budget was ever crossed.
                if !self.adapter.usage_is_cumulative()
                    && crate::cost::price::complete(&mut now, self.launch.model.as_deref())
                {
                    now.cost_estimated = true;
                }
                earlier.then(&now, false)
            }
            None => now,
        }
    }

    /// True if a continuation turn can hand results to the agent.
    pub fn can_continue(&self, verdict: &Verdict) -> bool {
        verdict.status == RunStatus::Completed && self.continuations < self.max_continuations && self.can_resume()
    }

    /// True if the agent's session can take another turn (a reply's).
    pub fn can_resume(&self) -> bool {
        self.resume_invocation("").is_some()
    }

    /// The next turn with the children's results: `prompt` in the agent's
    /// session.
    pub fn continuation(&mut self, prompt: String) -> NextTurn {
        self.continuations += 1;
        let notes = vec![
            TranscriptEvent::text(
                EventKind::System,
                format!("continuation turn {}: handing the results of child runs to the agent", self.continuations),
            ),
            TranscriptEvent::text(EventKind::System, format!("prompt: {prompt}")),
        ];
        NextTurn { prompt, allowed: None, notes, reply: false }
    }

    /// How `next` starts in the agent's session (taking its allowed tools),
    /// or `None` if the session cannot be resumed.
    pub fn next_invocation(&mut self, next: &mut NextTurn) -> Option<Invocation> {
        if let Some(allowed) = next.allowed.take() {
            self.launch.allowed = allowed;
        }
        self.resume_invocation(&next.prompt)
    }

    /// Starts the next turn's agent: what this turn reported becomes
    /// earlier turns' (a reply's turn forgets the refusals the user
    /// answered), and a fresh adapter reads the new stream. The error is in
    /// words, naming the binary and what to do.
    pub fn start_next(&mut self, invocation: &Invocation, reply: bool) -> Result<StartedAgent, String> {
        let mut earlier = self.report();
        if reply {
            earlier.denied.clear();
        }
        self.adapter = adapter::for_agent(self.launch.preset.agent);
        if self.adapter.usage_is_cumulative() {
            // The stream's usage will cover every turn: keep only the texts.
            earlier.usage = Default::default();
            earlier.cost_usd = None;
        }
        self.earlier = Some(earlier);
        self.verdict = None;
        self.frozen = None;
        self.log = session_log(&self.launch, self.adapter.as_ref());
        self.logged = None;
        self.log_read_at = None;
        self.launch.spawn(invocation).map_err(|e| spawn::spawn_error(&invocation.program, &self.launch.preset.path, &e))
    }

    fn resume_invocation(&self, prompt: &str) -> Option<Invocation> {
        let session = self.report().session_id.unwrap_or_default();
        self.adapter.resume_invocation(&self.launch.context(prompt), &session)
    }
}

/// The session file of a turn of `launch`'s agent starting now, where its
/// adapter has one: under the agent's folder as the agent sees it — a
/// sandboxed run's own copy, the folder its environment names, the user's.
fn session_log(launch: &AgentLaunch, adapter: &dyn Adapter) -> Option<SessionLog> {
    let format = adapter.session_log()?;
    let mut roots = Vec::new();
    if let Some(var) = format.folder_env() {
        let named = match &launch.env {
            Some(env) => env.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone()),
            None => std::env::var_os(var),
        };
        roots.extend(named.filter(|v| !v.is_empty()).map(std::path::PathBuf::from));
    }
    if launch.sandbox.is_some() {
        let copies = crate::sandbox::own::copies_in(&crate::adapter::agent_dir(&launch.run_dir));
        roots.push(copies.join(format.folder()));
    }
    roots.push(launch.user_home.join(format.folder()));
    Some(SessionLog::new(format, roots, crate::text::time::format(crate::text::time::now())))
}
