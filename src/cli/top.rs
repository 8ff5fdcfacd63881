//! `corral top`: what the tray and the window show, in a terminal (over
//! SSH, in tmux): what needs you pinned at the top, the runs, and the
//! selected run's transcript, live. It sleeps until the store changes or a
//! key is pressed (and ticks once a second only while runs work, for their
//! clocks and figures); a commit that changed no status reads only the
//! selected transcript, and no sooner than the desktop's processes look;
//! keys act on the selected run or need as the CLI would, and
//! `d` turns the lower pane to the selected run's unmerged changes.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use corral::attention::Item;
use corral::store::RunFilter;
use corral::text::time;
use corral::upkeep::queue::ShepherdCommand;
use corral::watch::{Wake, Watcher, LOOK_AT_MOST_EVERY};
use corral::{Run, Store};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, List, ListItem, ListState, Paragraph, Wrap};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Runs listed (newest first).
    #[arg(short = 'n', long, default_value_t = 50)]
    pub limit: usize,
}

/// Which list the arrows move in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Focus {
    Needs,
    Runs,
}

/// What the lower pane shows of the selected run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pane {
    Transcript,
    Diff,
}

/// What is on screen. Runtime state only.
struct Screen {
    needs: Vec<Item>,
    /// Older ended runs that need the user, beyond those listed.
    needs_beyond: u64,
    runs: Vec<Run>,
    focus: Focus,
    needs_at: ListState,
    runs_at: ListState,
    /// The selected run's last events, and what they were read for (its
    /// id and its last event).
    transcript: Vec<Line<'static>>,
    transcript_of: Option<(String, i64)>,
    /// Transcript or changes.
    pane: Pane,
    /// The selected run's unmerged changes, coloured, and what they were
    /// measured for (its id and end): measured again only when either
    /// changes, not on every look.
    diff: Vec<Line<'static>>,
    diff_of: Option<(String, Option<String>)>,
    /// How far the changes are scrolled (PgDn, PgUp).
    diff_scroll: u16,
    /// What the last action said, or the reply being written.
    said: String,
    /// A reply being written to this run.
    replying: Option<(String, String)>,
    /// A run whose abort was asked once: a second `a` aborts it, any other
    /// key keeps it (a stray key never stops paid work).
    aborting: Option<String>,
    /// The selected need's actions as last drawn: a number key acts on the
    /// action its number was shown beside, never on one that took its
    /// place since (a retrying run's "2 Stop" that became "2 Relaunch").
    drawn_actions: Vec<corral::attention::Action>,
    /// What runs and pauses the whole store counts (the title says them,
    /// not only those listed).
    counts: Option<corral::store::Counts>,
}

/// Events of the selected run shown.
const TRANSCRIPT: usize = 200;

pub fn run(store: &mut Store, args: Args, shepherd: &ShepherdCommand) -> anyhow::Result<i32> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "corral top draws on a terminal, and this is not one: `corral needs` and `corral ls` say the same once, \
             `corral watch` follows it"
        );
    }
    let mut terminal = ratatui::try_init()?;
    let result = follow(&mut terminal, store, &args, shepherd);
    ratatui::restore();
    result
}

fn follow(
    terminal: &mut ratatui::DefaultTerminal,
    store: &mut Store,
    args: &Args,
    shepherd: &ShepherdCommand,
) -> anyhow::Result<i32> {
    let mut screen = Screen {
        needs: Vec::new(),
        needs_beyond: 0,
        runs: Vec::new(),
        focus: Focus::Runs,
        needs_at: ListState::default(),
        runs_at: ListState::default().with_selected(Some(0)),
        transcript: Vec::new(),
        transcript_of: None,
        pane: Pane::Transcript,
        diff: Vec::new(),
        diff_of: None,
        diff_scroll: 0,
        said: String::new(),
        replying: None,
        aborting: None,
        drawn_actions: Vec::new(),
        counts: None,
    };
    let mut watcher = Watcher::new(store)?;
    let stdin = std::io::stdin();
    // What to read before the next draw: everything (a status changed, a
    // key acted, a second passed while runs work), or only the selected
    // run's transcript (another commit: streaming runs commit many times a
    // second, and each needs no more).
    let mut look = Some(Look::Everything);
    let mut statuses = -1;
    loop {
        match look.take() {
            Some(Look::Transcript) if store.status_version()? == statuses => screen.read_transcript(store)?,
            Some(_) => {
                statuses = store.status_version()?;
                screen.read(store, args.limit)?;
            }
            None => {}
        }
        terminal.draw(|frame| screen.draw(frame))?;
        // Asleep until the store changes or a key comes; once a second
        // while runs work (their clocks and figures).
        let working = screen.runs.iter().any(|r| r.status.is_active() && r.status != corral::RunStatus::Paused);
        let deadline = working.then(|| Instant::now() + Duration::from_secs(1));
        watcher.heal_if_due(store, shepherd)?;
        let wake = match watcher.wait(store, deadline, &[stdin.as_fd()])? {
            // After a commit, keys alone for a moment: a store that commits
            // many times a second is looked at no more often than the
            // desktop's processes look.
            Wake::Changed => match keys_within(&stdin, LOOK_AT_MOST_EVERY)? {
                true => Wake::Extra(0),
                false => Wake::Changed,
            },
            other => other,
        };
        match wake {
            Wake::Changed => look = Some(Look::Transcript),
            Wake::Deadline => look = Some(Look::Everything),
            Wake::Extra(_) => {
                while event::poll(Duration::ZERO)? {
                    let key = match event::read()? {
                        Event::Key(key) => key,
                        // Drawn again at its new size, whatever else is.
                        Event::Resize(..) => {
                            look = look.or(Some(Look::Transcript));
                            continue;
                        }
                        _ => continue,
                    };
                    if key.kind != KeyEventKind::Press {
                        continue;
                    }
                    let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || (screen.replying.is_none() && key.code == KeyCode::Char('q')) {
                        return Ok(0);
                    }
                    if screen.key(store, key.code) {
                        look = Some(Look::Everything);
                    }
                }
            }
        }
    }
}

/// What is read again before a draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    Everything,
    Transcript,
}

/// True if a key comes on `stdin` within `wait`.
fn keys_within(stdin: &std::io::Stdin, wait: Duration) -> std::io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(wait.as_millis() as i32).unwrap_or(PollTimeout::ZERO);
    match poll(&mut fds, timeout) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

impl Screen {
    /// Reads what is shown from the store.
    fn read(&mut self, store: &Store, limit: usize) -> anyhow::Result<()> {
        // The selection stays on the run and the need it was on, wherever
        // they moved (a new run above, a need answered): a key acts on
        // what the user chose, never on what slid under the cursor.
        let run_was = self.runs_at.selected().and_then(|i| self.runs.get(i)).map(|r| r.id.clone());
        let need_was = self.needs_at.selected().and_then(|i| self.needs.get(i)).map(|n| n.subject.clone());
        corral::attention::Needs { items: self.needs, beyond: self.needs_beyond } = corral::attention::needs(store)?;
        self.runs = store.runs(&RunFilter { limit: Some(limit), ..RunFilter::default() })?;
        self.counts = store.local_counts().ok();
        // One that left (answered, cleared, past `-n`) leaves nothing
        // selected: the next key acts on nothing until one is chosen.
        let keep = |at: &mut ListState, len: usize, was: Option<Option<usize>>| {
            at.select(match was {
                Some(found) => found,
                None if len == 0 => None,
                None => Some(at.selected().unwrap_or(0).min(len - 1)),
            });
        };
        let run_at = run_was.map(|id| self.runs.iter().position(|r| r.id == id));
        let need_at = need_was.map(|was| self.needs.iter().position(|n| n.subject == was));
        keep(&mut self.needs_at, self.needs.len(), need_at);
        keep(&mut self.runs_at, self.runs.len(), run_at);
        if self.focus == Focus::Needs && self.needs.is_empty() {
            self.focus = Focus::Runs;
        }
        self.transcript_of = None;
        self.read_transcript(store)?;
        if self.pane == Pane::Diff {
            self.read_diff();
        }
        Ok(())
    }

    /// The selected run's last events, read again only if it has new ones
    /// (or another run is selected).
    fn read_transcript(&mut self, store: &Store) -> anyhow::Result<()> {
        let Some(id) = self.selected_run() else {
            self.transcript = Vec::new();
            self.transcript_of = None;
            return Ok(());
        };
        let last = store.last_event_seq(&id)?;
        if self.transcript_of.as_ref() == Some(&(id.clone(), last)) {
            return Ok(());
        }
        // Usage folded into the row it follows, as the window shows it; a
        // long result said in its first line and how many more it has.
        let events = store.events_before(&id, i64::MAX, TRANSCRIPT)?;
        self.transcript = corral::store::fold_usage(&events)
            .into_iter()
            .map(|row| {
                let e = &row.event;
                let mut spans = vec![
                    Span::styled(format!("{:>8} ", e.kind.as_str()), dim()),
                    Span::raw(printable(e.text.lines().next().unwrap_or_default())),
                ];
                let more = e.text.trim_end().lines().count().saturating_sub(1);
                if more > 0 {
                    spans.push(Span::styled(format!("  (+{more} lines)"), dim()));
                }
                if !row.usage.is_empty() {
                    spans.push(Span::styled(format!("  · {}", printable(&row.usage.join(" · "))), dim()));
                }
                Line::from(spans)
            })
            .collect();
        self.transcript_of = Some((id, last));
        Ok(())
    }

    /// The selected run's unmerged changes, measured when it or its end
    /// changed since the last measure.
    fn read_diff(&mut self) {
        let Some(run) = self.selected_run().and_then(|id| self.runs.iter().find(|r| r.id == id).cloned()) else {
            self.diff = vec![Line::styled("no run selected", dim())];
            self.diff_of = None;
            return;
        };
        let key = (run.id.clone(), run.exited_at.clone());
        if self.diff_of.as_ref() == Some(&key) {
            return;
        }
        self.diff_of = Some(key);
        self.diff_scroll = 0;
        self.diff = match corral::verbs::review::worktree_of(&run)
            .map_err(|e| e.to_string())
            .and_then(|w| corral::worktree::patch(w).map_err(|e| e.to_string()))
        {
            Ok(patch) if patch.trim().is_empty() => vec![Line::styled("no unmerged changes", dim())],
            Ok(patch) => patch.lines().map(diff_line).collect(),
            Err(why) => vec![Line::styled(printable(&why), dim())],
        };
    }

    /// The run the keys act on: the selected run, or the selected need's.
    fn selected_run(&self) -> Option<String> {
        match self.focus {
            Focus::Runs => self.runs_at.selected().and_then(|i| self.runs.get(i)).map(|r| r.id.clone()),
            Focus::Needs => match self.needs_at.selected().and_then(|i| self.needs.get(i)).map(|n| &n.subject) {
                Some(corral::attention::Subject::Run { id, .. }) => Some(id.clone()),
                _ => None,
            },
        }
    }

    /// A key: true if what is shown must be read again.
    fn key(&mut self, store: &mut Store, code: KeyCode) -> bool {
        if let Some((run, text)) = &mut self.replying {
            match code {
                KeyCode::Enter => {
                    let (run, text) = (run.clone(), text.clone());
                    self.replying = None;
                    self.act(&["reply", &run, "--", &text]);
                    return true;
                }
                KeyCode::Esc => self.replying = None,
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) => text.push(c),
                _ => {}
            }
            return false;
        }
        if let Some(run) = self.aborting.take() {
            self.said = match code {
                KeyCode::Char('a') => {
                    self.act(&["abort", &run]);
                    return true;
                }
                _ => format!("{run} not aborted"),
            };
            return true;
        }
        let moved = |at: &mut ListState, len: usize, by: isize| {
            if len > 0 {
                let now = at.selected().unwrap_or(0) as isize;
                at.select(Some((now + by).clamp(0, len as isize - 1) as usize));
            }
        };
        match code {
            KeyCode::Char('d') => {
                self.pane = if self.pane == Pane::Diff { Pane::Transcript } else { Pane::Diff };
                self.diff_of = None;
                return true;
            }
            KeyCode::PageDown | KeyCode::PageUp if self.pane == Pane::Diff => {
                let by: i32 = if code == KeyCode::PageDown { 20 } else { -20 };
                let most = self.diff.len().saturating_sub(1) as i32;
                self.diff_scroll = (i32::from(self.diff_scroll) + by).clamp(0, most) as u16;
                return false;
            }
            KeyCode::Tab => {
                self.focus =
                    if self.focus == Focus::Runs && !self.needs.is_empty() { Focus::Needs } else { Focus::Runs };
                return true;
            }
            KeyCode::Down | KeyCode::Char('j') | KeyCode::Up | KeyCode::Char('k') => {
                let by = if matches!(code, KeyCode::Down | KeyCode::Char('j')) { 1 } else { -1 };
                match self.focus {
                    Focus::Runs => moved(&mut self.runs_at, self.runs.len(), by),
                    Focus::Needs => moved(&mut self.needs_at, self.needs.len(), by),
                }
                return true;
            }
            // A need's own actions, by number.
            KeyCode::Char(c @ '1'..='9') if self.focus == Focus::Needs => {
                let n = c as usize - '1' as usize;
                let action = self.drawn_actions.get(n);
                if let Some(action) = action.cloned() {
                    // Only while the list still offers it: keys pressed
                    // together act once (a budget is raised once).
                    if !corral::attention::still_offered(store, &action.argv).unwrap_or(false) {
                        self.said = format!("{}: no longer offered (answered meanwhile)", printable(&action.label));
                        return true;
                    }
                    let argv: Vec<&str> = action.argv.iter().map(String::as_str).collect();
                    self.act(&argv);
                    return true;
                }
            }
            _ => {}
        }
        let Some(run) = self.selected_run() else { return false };
        let verb = match code {
            KeyCode::Char('a') => {
                self.said = format!("abort {run}? a again aborts it, any other key keeps it");
                self.aborting = Some(run);
                return true;
            }
            KeyCode::Char('p') => "pause",
            KeyCode::Char('r') => "resume",
            KeyCode::Char('m') => "merge",
            KeyCode::Char('R') => {
                self.replying = Some((run, String::new()));
                return false;
            }
            KeyCode::Char('A') => {
                self.act(&["reply", &run, "--allow-denied"]);
                return true;
            }
            // Looked at: its failure or refusal no longer needs you, as
            // when its page is opened in the window or `corral show`n.
            KeyCode::Char('s') => {
                let ended = store.run(&run).is_ok_and(|r| r.status.is_terminal());
                self.said = match ended {
                    true => match store.mark_seen(&run) {
                        Ok(()) => format!("{run}: seen"),
                        Err(e) => format!("{run}: {e}"),
                    },
                    false => format!("{run} has not ended: nothing to have seen yet"),
                };
                return true;
            }
            _ => return false,
        };
        self.act(&[verb, &run]);
        true
    }

    /// `corral ARGV`, as at a terminal; what it said goes on the last line.
    fn act(&mut self, argv: &[&str]) {
        // A merge or a discard changes what is left to show.
        self.diff_of = None;
        let program = std::env::current_exe().unwrap_or_else(|_| "corral".into());
        self.said = match std::process::Command::new(program).args(argv).stdin(std::process::Stdio::null()).output() {
            Ok(out) if out.status.success() => {
                format!("corral {}: {}", argv.join(" "), String::from_utf8_lossy(&out.stdout).trim())
            }
            Ok(out) => format!("corral {}: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr).trim()),
            Err(e) => format!("cannot run corral: {e}"),
        };
        self.said = self.said.lines().next().unwrap_or_default().chars().filter(|c| !c.is_control()).collect();
    }

    fn draw(&mut self, frame: &mut ratatui::Frame<'_>) {
        let help = match &self.replying {
            Some((run, text)) => format!("reply to {run}: {text}▏ (Enter sends, Esc cancels)"),
            None if !self.said.is_empty() => self.said.clone(),
            None => "↑↓ select · Tab needs/runs · 1-9 a need's action · a abort · p pause · r resume · R reply · \
                     A allow denied · s seen · m merge · d diff · q quit"
                .into(),
        };
        // The help wraps rather than run off a narrow terminal (80 columns).
        let width = frame.area().width.max(1) as usize;
        let footer_height = help.chars().count().div_ceil(width).clamp(1, 3) as u16;
        let needs_height = if self.needs.is_empty() { 0 } else { (2 * self.needs.len() as u16 + 2).min(10) };
        let [needs, runs, transcript, footer] = Layout::vertical([
            Constraint::Length(needs_height),
            Constraint::Min(6),
            Constraint::Percentage(40),
            Constraint::Length(footer_height),
        ])
        .areas(frame.area());
        let focused = |f: Focus| {
            if self.focus == f {
                Style::default().add_modifier(Modifier::BOLD)
            } else {
                dim()
            }
        };
        if !self.needs.is_empty() {
            let items: Vec<ListItem> = self
                .needs
                .iter()
                .map(|n| {
                    let keys: Vec<String> = n
                        .actions
                        .iter()
                        .enumerate()
                        .map(|(i, a)| format!("{} {}", i + 1, printable(&a.label)))
                        .collect();
                    // Its keys on a line of their own: a narrow terminal
                    // cuts the words, never the answers.
                    ListItem::new(vec![
                        Line::from(vec![
                            Span::styled(format!(" {} ", n.chip), Style::default().fg(Color::White).bg(Color::Red)),
                            Span::raw(format!(" {}", printable(&n.words))),
                        ]),
                        Line::styled(format!("    {}", keys.join(" · ")), dim()),
                    ])
                })
                .collect();
            self.drawn_actions =
                self.needs_at.selected().and_then(|i| self.needs.get(i)).map(|n| n.actions.clone()).unwrap_or_default();
            // The whole count; the list holds the newest.
            let title = match self.needs_beyond {
                0 => format!("Needs you ({})", self.needs.len()),
                beyond => {
                    format!("Needs you ({}; the {beyond} oldest: corral needs)", self.needs.len() as u64 + beyond)
                }
            };
            let list = List::new(items)
                .block(Block::bordered().title(title).border_style(focused(Focus::Needs)))
                .highlight_symbol("▶ ");
            frame.render_stateful_widget(list, needs, &mut self.needs_at);
        }
        let now = time::now();
        let rows: Vec<ListItem> = self
            .runs
            .iter()
            .map(|r| {
                let took = r.duration(now).map(time::human_duration).unwrap_or_else(|| "-".into());
                let ago = time::parse(&r.created_at).map(|at| time::ago(at, now)).unwrap_or_default();
                let cost = r.cost_usd.map(|c| format!("${c:.2}")).unwrap_or_else(|| "-".into());
                let task: String = printable(&r.task).chars().take(60).collect();
                ListItem::new(format!(
                    "{:<9} {:<12} {:>9} {:>8} {:>7} {:>7}  {:<8} {task}",
                    r.status.as_str(),
                    printable(&r.preset),
                    ago,
                    took,
                    short_count(r.usage.total()),
                    cost,
                    r.id
                ))
            })
            .collect();
        // Paused is not running: counted apart, as the tray counts them;
        // the whole store's, not only the runs listed.
        let (running, paused) = match &self.counts {
            Some(c) => (c.running as usize, c.paused as usize),
            None => {
                let paused = self.runs.iter().filter(|r| r.status == corral::RunStatus::Paused).count();
                (self.runs.iter().filter(|r| r.status.is_active()).count() - paused, paused)
            }
        };
        let title = match paused {
            0 => format!("Runs ({running} running)"),
            _ => format!("Runs ({running} running · {paused} paused)"),
        };
        let list = List::new(rows)
            .block(Block::bordered().title(title).border_style(focused(Focus::Runs)))
            .highlight_symbol("▶ ")
            .highlight_style(Style::default().add_modifier(Modifier::REVERSED));
        let state = if self.focus == Focus::Runs { &mut self.runs_at } else { &mut ListState::default() };
        frame.render_stateful_widget(list, runs, state);
        let id = self.selected_run().unwrap_or_default();
        let pane = match self.pane {
            Pane::Transcript => {
                let shown = transcript.height.saturating_sub(2) as usize;
                let lines = self.transcript[self.transcript.len().saturating_sub(shown)..].to_vec();
                Paragraph::new(lines)
                    .block(Block::bordered().title(format!("Transcript of {id}")))
                    .wrap(Wrap { trim: false })
            }
            Pane::Diff => Paragraph::new(self.diff.clone())
                .block(Block::bordered().title(format!("Changes of {id} (PgDn/PgUp, d: transcript)")))
                .scroll((self.diff_scroll, 0)),
        };
        frame.render_widget(pane, transcript);
        frame.render_widget(Paragraph::new(help).style(dim()).wrap(Wrap { trim: true }), footer);
    }
}

/// One line of a unified diff, coloured as `git diff` colours it.
fn diff_line(line: &str) -> Line<'static> {
    let text: String = line.chars().map(|c| if c == '\t' { ' ' } else { c }).filter(|c| !c.is_control()).collect();
    let style = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
        Style::default().add_modifier(Modifier::BOLD)
    } else if line.starts_with('+') {
        Style::default().fg(Color::Green)
    } else if line.starts_with('-') {
        Style::default().fg(Color::Red)
    } else if line.starts_with("@@") {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default()
    };
    Line::styled(text, style)
}

fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Text an agent wrote, one line, without control characters (a screen
/// clear, a clipboard write).
fn printable(text: &str) -> String {
    super::table::name(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// 950, 705k, 1.2M; "-" for none.
fn short_count(n: u64) -> String {
    if n == 0 {
        "-".into()
    } else {
        corral::cost::budget::short_count(n)
    }
}
