//! What the desktop says when runs end: one notification per piece of work,
//! in proportion to attention.
//!
//! A run launched by another run does not speak for itself: its top-level
//! run's announcement speaks for the whole tree ("lead completed · 3
//! children: 2 completed, 1 failed · 41k tokens · $0.18"). A preset's
//! `notify: always | failures | never` overrides that. Endings that arrive
//! close together are one summary; [`Pacer`] keeps any number of endings to
//! a few notifications a minute. Failures are urgent. Tauri-free, so the
//! rules are tested here and the app only shows what they decide.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::cost::budget::short_count;
use crate::preset::Notify;
use crate::run::{Run, RunStatus};
use crate::store::{PullRequestRow, Store, StoreError};
use crate::text::time;

/// One notification: its words, where its click leads, how urgent.
#[derive(Debug, Clone, PartialEq)]
pub struct Announcement {
    /// The title line.
    pub summary: String,
    /// The body.
    pub body: String,
    /// The run to open on click; `None`: the runs list.
    pub run: Option<String>,
    /// For a summary: the list opens filtered to runs that ended since
    /// then (the first of those it speaks for).
    pub ended_since: Option<String>,
    /// A failure: shown as critical, and stays until dismissed.
    pub urgent: bool,
}

/// True if `run`'s ending is announced on its own: a top-level run, or a
/// child a person replied to, unless its preset's `notify` says otherwise.
/// `went_wrong`: it or a run of its tree ended badly or was refused
/// something, which `notify: failures` announces (a parent that
/// completed speaks for its failed child, which defers to it).
pub fn speaks(run: &Run, notify: Option<Notify>, went_wrong: bool) -> bool {
    match notify {
        Some(Notify::Always) => true,
        Some(Notify::Failures) => went_wrong,
        Some(Notify::Never) => false,
        None => run.parent_id.is_none() || run.replied_at.is_some(),
    }
}

/// Of runs that just ended, those announced on their own (by their preset's
/// `notify`, read from the store).
pub fn speakers(store: &Store, ended: Vec<Run>) -> Result<Vec<Run>, StoreError> {
    let mut out = Vec::new();
    for run in ended {
        let notify = store.run_preset(&run.id).ok().and_then(|p| p.notify);
        let wrong = |r: &Run| r.ended_badly() || !r.denied.is_empty();
        let went_wrong = match notify {
            Some(Notify::Failures) => wrong(&run) || descendants(store, &run.id)?.iter().any(wrong),
            _ => false,
        };
        if speaks(&run, notify, went_wrong) {
            out.push(run);
        }
    }
    Ok(out)
}

/// The announcement of one run, with its whole tree of runs.
pub fn single(store: &Store, run: &Run) -> Result<Announcement, StoreError> {
    let tree = descendants(store, &run.id)?;
    let duration = run.duration(time::now()).map(time::human_duration);
    let mut took = duration.map(|d| format!(" in {d}")).unwrap_or_default();
    if let Some(host) = &run.host {
        took = format!(" on {host}{took}");
    }
    let mut summary = match run.status {
        RunStatus::Completed => format!("✓ {} completed{took}", run.preset),
        RunStatus::Failed => format!("✗ {} failed{took}", run.preset),
        RunStatus::Aborted => format!("■ {} aborted{took}", run.preset),
        RunStatus::Lost => format!("? {} lost: its supervisor died", run.preset),
        active => format!("{} {active}", run.preset),
    };
    if !tree.is_empty() {
        let children = tree.iter().filter(|r| r.parent_id.as_deref() == Some(&run.id)).count();
        let tokens: u64 = run.usage.total() + tree.iter().map(|r| r.usage.total()).sum::<u64>();
        let costs: Vec<f64> = std::iter::once(run).chain(&tree).filter_map(|r| r.cost_usd).collect();
        summary.push_str(&format!(" · {children} {}: {}", plural(children, "child", "children"), outcomes(&tree)));
        if tokens > 0 {
            summary.push_str(&format!(" · {} tokens", short_count(tokens)));
        }
        if !costs.is_empty() {
            let estimated = std::iter::once(run).chain(&tree).any(|r| r.cost_estimated);
            summary.push_str(&format!(" · {}${:.2}", if estimated { "≈" } else { "" }, costs.iter().sum::<f64>()));
        }
    }
    let headline = Some(run.headline()).filter(|l| !l.is_empty()).unwrap_or(run.task.trim());
    let mut body: String = headline.chars().take(200).collect();
    // Denied actions need the user: said first, and urgent.
    let denied: Vec<String> = std::iter::once(run).chain(&tree).flat_map(|r| r.denied.iter().cloned()).collect();
    let denied_note = crate::run::denied_note(&denied);
    if let Some(note) = &denied_note {
        body = format!("{note}\n{body}");
    }
    // A failed child is said, not hidden behind its parent's completion.
    if run.status == RunStatus::Completed {
        for child in tree.iter().filter(|r| alarms(r)) {
            body.push_str(&format!("\n{}", line_of(child)));
        }
    }
    let failed = alarms(run) || tree.iter().any(alarms);
    Ok(Announcement {
        summary,
        body,
        run: Some(run.id.clone()),
        ended_since: None,
        urgent: failed || denied_note.is_some(),
    })
}

/// True if `run`'s end is bad news the user did not make: it failed or was
/// lost, or Corral stopped it (a time limit, a budget). A stop the user
/// asked for raises no alarm.
fn alarms(run: &Run) -> bool {
    run.ended_badly()
}

/// One run in a line, naming it: `✗ fixer (k3x9abcd) failed: 529: Overloaded`.
fn line_of(run: &Run) -> String {
    let mark = match run.status {
        RunStatus::Completed => "✓",
        RunStatus::Failed => "✗",
        RunStatus::Aborted => "■",
        RunStatus::Lost => "?",
        _ => "·",
    };
    let why = match run.status {
        RunStatus::Completed => String::new(),
        _ => run.error.as_deref().map(|e| format!(": {}", crate::attention::error_words(e))).unwrap_or_default(),
    };
    let denied = run.denied_note().map(|d| format!(" ({d})")).unwrap_or_default();
    let line = format!("{mark} {} ({}) {}{why}{denied}", run.preset, run.id, run.status);
    line.chars().take(160).collect()
}

/// Runs paused at their agent's usage limit, one announcement per limit
/// (agent and reset time), however many runs it paused: "⏸ 2 codex runs
/// paused: usage limit, going on at 17:40". Each with its key, so it is
/// said once.
pub fn usage_limits(store: &Store) -> Result<Vec<(String, Announcement)>, StoreError> {
    let filter = crate::store::RunFilter { status: Some(RunStatus::Paused), ..Default::default() };
    let mut limits: std::collections::BTreeMap<(String, String), Vec<Run>> = Default::default();
    for run in store.runs(&filter)? {
        if let (Some(crate::run::PauseReason::UsageLimit), Some(at)) = (run.pause_reason, run.resumes_at.clone()) {
            limits.entry((run.agent.to_string(), at)).or_default().push(run);
        }
    }
    let mut out = Vec::new();
    for ((agent, at), runs) in limits {
        let when = time::parse(&at).map_or(at.clone(), time::clock);
        let n = runs.len();
        let summary = format!("⏸ {n} {agent} {} paused: usage limit, going on at {when}", plural(n, "run", "runs"));
        let said = store.agent_limit(runs[0].agent)?.map(|l| format!("{}\n", l.said)).unwrap_or_default();
        let body = format!("{said}They go on by themselves in their own sessions; `corral resume` goes on now.");
        let run = (n == 1).then(|| runs[0].id.clone());
        out.push((format!("{agent} {at}"), Announcement { summary, body, run, ended_since: None, urgent: false }));
    }
    Ok(out)
}

/// What the forge asks of runs' pull requests (failed checks, changes
/// requested) and the ones merged or closed there whose worktrees are
/// still here, each with the key it is said under once (see
/// [`pull_request`]).
pub fn pull_requests(store: &Store) -> Result<Vec<(String, Announcement)>, StoreError> {
    let mut out = Vec::new();
    for pr in store.pull_requests()? {
        out.extend(pull_request(store, &pr)?);
    }
    Ok(out)
}

/// What the forge asks of run `pr`'s pull request, or its end there, if it
/// needs the user now: the same item as "Needs you", with the key it is
/// said under once (a new ask, its feedback changed, or the end is a new
/// key). The click opens the run, whose Send to the run answers it.
pub fn pull_request(store: &Store, pr: &PullRequestRow) -> Result<Option<(String, Announcement)>, StoreError> {
    let Some(item) = crate::attention::pull_request_item(store, pr)? else { return Ok(None) };
    let id = &pr.run_id;
    let (key, body, urgent) = if pr.asks() {
        let feedback = pr.feedback.as_deref().unwrap_or_default();
        let asked: Vec<&str> = feedback.lines().filter(|l| !l.trim().is_empty()).take(3).collect();
        let body = format!("{}\nSend it to the run: `corral pr {id} --send`, or from the window.", asked.join("\n"));
        let key = format!("pr:{id}:{}", pr.feedback_at.as_deref().unwrap_or_default());
        (key, body, pr.checks.as_deref() == Some("failing"))
    } else {
        // The item's own command: every worktree of the pull request's runs.
        let remove = item.actions.first().map_or_else(|| format!("discard {id}"), |a| a.argv.join(" "));
        (format!("pr:{id}:{}", pr.state), format!("Remove the worktree: `corral {remove}`, or from the window."), false)
    };
    let body = body.chars().take(400).collect();
    let summary = format!("⇅ {}", item.words);
    Ok(Some((key, Announcement { summary, body, run: Some(id.clone()), ended_since: None, urgent })))
}

/// One announcement for many endings, naming them: what went wrong first
/// (a run, or a run it launched, that failed or was refused something),
/// then the rest. "All completed" only when all of them and every run they
/// launched completed with nothing refused. `while_closed`: they ended
/// while the app was not running.
pub fn summary(store: &Store, runs: &[Run], while_closed: bool) -> Result<Announcement, StoreError> {
    // Each run with what went wrong in its tree.
    let mut wrong = Vec::new();
    let mut fine = Vec::new();
    let mut launched_badly = Vec::new();
    for run in runs {
        let tree = descendants(store, &run.id)?;
        launched_badly.extend(tree.iter().filter(|r| alarms(r)).cloned());
        let bad: Vec<&Run> = std::iter::once(run).chain(&tree).filter(|r| alarms(r) || !r.denied.is_empty()).collect();
        if bad.is_empty() {
            fine.push(line_of(run));
        } else {
            wrong.extend(bad.into_iter().map(line_of));
        }
    }
    let summary = summary_title(runs, &launched_badly, while_closed);
    let urgent = !wrong.is_empty();
    let mut lines = wrong;
    if lines.is_empty() {
        lines.push("All completed.".to_string());
    }
    lines.extend(fine);
    let shown = 6;
    let more = lines.len().saturating_sub(shown);
    lines.truncate(shown);
    if more > 0 {
        lines.push(format!("and {more} more"));
    }
    let ended_since = runs.iter().filter_map(|r| r.completed_at.clone()).min();
    Ok(Announcement { summary, body: lines.join("\n"), run: None, ended_since, urgent })
}

/// A summary's title. It counts what its lines name: "2 completed" never
/// stands above a launched run's "✗ … failed" unexplained.
fn summary_title(runs: &[Run], launched_badly: &[Run], while_closed: bool) -> String {
    let n = runs.len();
    let finished = format!("{n} {} finished", plural(n, "run", "runs"));
    match (while_closed, launched_badly.is_empty()) {
        (true, _) => format!("{finished} while Corral was closed"),
        (false, true) => format!("{finished}: {}", outcomes(runs)),
        (false, false) => {
            format!("{finished}: {}; of the runs they launched, {}", outcomes(runs), outcomes(launched_badly))
        }
    }
}

/// `2 completed, 1 failed` in a fixed order.
fn outcomes(runs: &[Run]) -> String {
    let parts: Vec<String> = RunStatus::TERMINAL
        .iter()
        .chain(RunStatus::ACTIVE)
        .filter_map(|status| {
            let n = runs.iter().filter(|r| r.status == *status).count();
            (n > 0).then(|| format!("{n} {status}"))
        })
        .collect();
    parts.join(", ")
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Every run below `id`, at any depth.
fn descendants(store: &Store, id: &str) -> Result<Vec<Run>, StoreError> {
    let mut found = Vec::new();
    let mut frontier = vec![id.to_string()];
    while let Some(parent) = frontier.pop() {
        for child in store.child_runs(&parent)? {
            frontier.push(child.id.clone());
            found.push(child);
        }
    }
    Ok(found)
}

/// How endings become notifications over time: those that arrive within
/// [`Pacer::GATHER`] of each other are gathered, and at most
/// [`Pacer::PER_MINUTE`] notifications go out in any minute; what waits
/// meanwhile goes out as one summary. Runtime state only.
#[derive(Debug, Default)]
pub struct Pacer {
    pending: Vec<Run>,
    first_pending: Option<Instant>,
    sent: VecDeque<Instant>,
}

/// What to show now.
#[derive(Debug, Clone, PartialEq)]
pub enum Release {
    /// One run on its own.
    One(Box<Run>),
    /// Several, as one summary.
    Many(Vec<Run>),
}

impl Pacer {
    /// How long endings are gathered before one notification.
    pub const GATHER: Duration = Duration::from_millis(1500);
    /// Most notifications in any minute while only good news waits.
    pub const PER_MINUTE: usize = 3;
    /// Most in any minute when bad news waits (a failure, a stop Corral
    /// made): it is not held behind successes an every-minute schedule
    /// announced, nor for most of a minute.
    pub const ALARMS_PER_MINUTE: usize = 6;

    /// The cap that holds what waits now.
    fn cap(&self) -> usize {
        match self.pending.iter().any(alarms) {
            true => Self::ALARMS_PER_MINUTE,
            false => Self::PER_MINUTE,
        }
    }

    /// Endings to announce.
    pub fn push(&mut self, runs: Vec<Run>, now: Instant) {
        if runs.is_empty() {
            return;
        }
        self.first_pending.get_or_insert(now);
        self.pending.extend(runs);
    }

    /// True while endings wait.
    pub fn is_waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Everything waiting, at once: notifications resume after "Do not
    /// disturb", whatever the pace.
    pub fn release_all(&mut self, now: Instant) -> Option<Release> {
        self.first_pending?;
        Some(self.take(now))
    }

    /// What to show now, if anything.
    pub fn release(&mut self, now: Instant) -> Option<Release> {
        let first = self.first_pending?;
        while self.sent.front().is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60)) {
            self.sent.pop_front();
        }
        if now.duration_since(first) < Self::GATHER || self.sent.len() >= self.cap() {
            return None;
        }
        Some(self.take(now))
    }

    /// When [`Pacer::release`] will have something to show, while endings
    /// wait: a waiting process sleeps until then, not on a clock.
    pub fn next_release(&self) -> Option<Instant> {
        let gathered = self.first_pending? + Self::GATHER;
        // Once this one is a minute old, fewer than the cap were sent in
        // the last minute.
        let pace = self
            .sent
            .len()
            .checked_sub(self.cap())
            .and_then(|i| self.sent.get(i))
            .map(|t| *t + Duration::from_secs(60));
        Some(pace.map_or(gathered, |p| p.max(gathered)))
    }

    /// Everything waiting, as one release sent `now`.
    fn take(&mut self, now: Instant) -> Release {
        self.sent.push_back(now);
        self.first_pending = None;
        let mut runs = std::mem::take(&mut self.pending);
        if runs.len() == 1 {
            Release::One(Box::new(runs.remove(0)))
        } else {
            Release::Many(runs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, parent: Option<&str>, status: RunStatus) -> Run {
        serde_json::from_value(serde_json::json!({
            "id": id, "parent_id": parent, "children": [], "preset": "p", "preset_path": "p.md",
            "agent": "command", "task": "t", "cwd": "/", "status": status,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
            "created_at": "2026-11-22T10:00:00.000Z",
        }))
        .unwrap()
    }

    #[test]
    fn the_next_release_is_when_release_gives_something() {
        let mut pacer = Pacer::default();
        let t0 = Instant::now();
        assert_eq!(pacer.next_release(), None);
        pacer.push(vec![run("a", None, RunStatus::Completed)], t0);
        assert_eq!(pacer.next_release(), Some(t0 + Pacer::GATHER));
        assert!(pacer.release(t0 + Pacer::GATHER - Duration::from_millis(1)).is_none());
        assert!(pacer.release(t0 + Pacer::GATHER).is_some());
        for i in 0..3 {
            let at = t0 + Duration::from_secs(2 + i);
            pacer.push(vec![run("b", None, RunStatus::Completed)], at);
            pacer.release_all(at);
        }
        let at = t0 + Duration::from_secs(10);
        pacer.push(vec![run("c", None, RunStatus::Completed)], at);
        let next = pacer.next_release().unwrap();
        assert!(pacer.release(next - Duration::from_millis(1)).is_none());
        assert!(pacer.release(next).is_some(), "paced: a minute after the oldest of the last three");
    }

    #[test]
    fn a_child_speaks_only_when_its_preset_says_so() {
        let top = run("a", None, RunStatus::Completed);
        let child = run("b", Some("a"), RunStatus::Failed);
        assert!(speaks(&top, None, false));
        assert!(!speaks(&child, None, true), "its top-level run speaks for it");
        let mut replied = run("c", Some("a"), RunStatus::Completed);
        replied.replied_at = Some("2026-11-22T10:05:00.000Z".into());
        assert!(speaks(&replied, None, false), "a child a person replied to is theirs to hear about");
        assert!(speaks(&child, Some(Notify::Always), false));
        assert!(speaks(&child, Some(Notify::Failures), true));
        assert!(!speaks(&top, Some(Notify::Failures), false), "nothing went wrong, and only failures are announced");
        assert!(speaks(&top, Some(Notify::Failures), true), "completed, with a failed child");
        assert!(!speaks(&top, Some(Notify::Never), true));
    }

    #[test]
    fn a_burst_of_endings_is_one_summary_and_a_flood_stays_a_few_a_minute() {
        let t0 = Instant::now();
        let mut pacer = Pacer::default();
        pacer.push((0..30).map(|i| run(&format!("r{i}"), None, RunStatus::Completed)).collect(), t0);
        assert_eq!(pacer.release(t0 + Duration::from_millis(100)), None, "still gathering");
        match pacer.release(t0 + Pacer::GATHER) {
            Some(Release::Many(runs)) => assert_eq!(runs.len(), 30),
            other => panic!("{other:?}"),
        }
        // One ending every half second for two minutes: a few a minute.
        let mut shown = Vec::new();
        for step in 0..240u64 {
            let now = t0 + Duration::from_secs(2) + Duration::from_millis(step * 500);
            pacer.push(vec![run(&format!("s{step}"), None, RunStatus::Failed)], now);
            if pacer.release(now).is_some() {
                shown.push(now);
            }
        }
        for (i, at) in shown.iter().enumerate() {
            let in_minute = shown[i..].iter().take_while(|t| t.duration_since(*at) < Duration::from_secs(60)).count();
            assert!(in_minute <= Pacer::ALARMS_PER_MINUTE, "{in_minute} notifications in a minute");
        }
        assert!(pacer.is_waiting() || shown.len() >= 2);
        // Successes spend only their own few: a failure after three of an
        // every-minute schedule goes once gathered, not most of a minute on.
        let mut busy = Pacer::default();
        for i in 0..3u64 {
            let at = t0 + Duration::from_secs(i * 10);
            busy.push(vec![run(&format!("ok{i}"), None, RunStatus::Completed)], at);
            assert!(busy.release(at + Pacer::GATHER).is_some());
        }
        let later = t0 + Duration::from_secs(30);
        busy.push(vec![run("ok3", None, RunStatus::Completed)], later);
        assert_eq!(busy.release(later + Pacer::GATHER), None, "a fourth success in the minute waits");
        busy.push(vec![run("bad", None, RunStatus::Failed)], later + Duration::from_secs(1));
        assert!(busy.release(later + Pacer::GATHER * 2).is_some(), "a failure is not held behind successes");
        // Everything waiting goes at once when "Do not disturb" ends.
        let mut quiet = Pacer::default();
        quiet.push(vec![run("q1", None, RunStatus::Completed), run("q2", None, RunStatus::Failed)], t0);
        assert!(matches!(quiet.release_all(t0), Some(Release::Many(r)) if r.len() == 2));
        assert_eq!(quiet.release_all(t0), None);
        // A single ending on its own is announced as itself.
        let mut quiet = Pacer::default();
        quiet.push(vec![run("one", None, RunStatus::Completed)], t0);
        assert!(matches!(quiet.release(t0 + Pacer::GATHER), Some(Release::One(r)) if r.id == "one"));
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&crate::home::Home::at(dir.path().to_path_buf())).unwrap();
        (dir, store)
    }

    #[test]
    fn a_summary_counts_outcomes_and_names_what_went_wrong_first() {
        let (_dir, store) = store();
        let mut runs = [
            run("a", None, RunStatus::Completed),
            run("b", None, RunStatus::Completed),
            run("c", None, RunStatus::Failed),
        ];
        runs[2].error = Some(r#"529 {"type":"error","error":{"message":"Overloaded"}}"#.into());
        let note = summary(&store, &runs, false).unwrap();
        assert_eq!(note.summary, "3 runs finished: 2 completed, 1 failed");
        assert!(note.urgent);
        assert_eq!(note.body.lines().next(), Some("✗ p (c) failed: 529: Overloaded"), "{}", note.body);
        assert!(note.body.contains("✓ p (a) completed") && !note.body.contains("All completed"), "{}", note.body);
        assert_eq!(summary(&store, &runs[..1], true).unwrap().summary, "1 run finished while Corral was closed");
        // A refusal is never folded into "All completed".
        runs[2] = run("c", None, RunStatus::Completed);
        runs[1].denied = vec!["sandbox: write /etc/hosts".into()];
        let note = summary(&store, &runs, false).unwrap();
        assert!(note.urgent && note.body.starts_with("✓ p (b) completed (1 action was denied"), "{}", note.body);
        runs[1].denied.clear();
        let note = summary(&store, &runs, false).unwrap();
        assert!(!note.urgent && note.body.starts_with("All completed."), "{}", note.body);
    }

    #[test]
    fn a_summary_title_counts_the_launched_runs_its_lines_name() {
        let leads = [run("a", None, RunStatus::Completed), run("b", None, RunStatus::Completed)];
        let child = run("c", Some("a"), RunStatus::Failed);
        assert_eq!(
            summary_title(&leads, std::slice::from_ref(&child), false),
            "2 runs finished: 2 completed; of the runs they launched, 1 failed"
        );
        assert_eq!(summary_title(&leads, &[], false), "2 runs finished: 2 completed");
    }

    #[test]
    fn a_stop_the_user_asked_for_raises_no_alarm() {
        let (_dir, store) = store();
        let mut stopped = run("a", None, RunStatus::Aborted);
        stopped.stop_reason = Some(crate::run::StopReason::UserAbort);
        assert!(!summary(&store, std::slice::from_ref(&stopped), false).unwrap().urgent);
        stopped.stop_reason = Some(crate::run::StopReason::Timeout);
        assert!(summary(&store, std::slice::from_ref(&stopped), false).unwrap().urgent, "Corral stopped it");
    }

    #[test]
    fn a_summary_opens_the_list_of_what_it_speaks_for() {
        let (_dir, store) = store();
        let mut runs = [run("a", None, RunStatus::Completed), run("b", None, RunStatus::Failed)];
        runs[0].completed_at = Some("2026-11-22T10:00:02.000Z".into());
        runs[1].completed_at = Some("2026-11-22T10:00:01.000Z".into());
        let note = summary(&store, &runs, false).unwrap();
        assert_eq!((note.run, note.ended_since.as_deref()), (None, Some("2026-11-22T10:00:01.000Z")));
    }
}
