//! `corral top` driven through a pseudo-terminal, as a user at a terminal
//! (over SSH, in tmux) meets it: what needs you pinned, the runs, keys that
//! act, and `q` that leaves the terminal as it was.

mod common;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, Env};

const LIMIT: Duration = Duration::from_secs(30);

/// `corral top` on a pseudo-terminal (120×40 unless asked): the child, the terminal's
/// end to type on, and what it drew so far (escape sequences removed).
struct Top {
    child: std::process::Child,
    keys: std::fs::File,
    drawn: Arc<Mutex<String>>,
    /// Every byte it wrote to the terminal, escape sequences and all.
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Top {
    fn start(env: &Env) -> Top {
        Top::start_with(env, &[])
    }

    fn start_with(env: &Env, args: &[&str]) -> Top {
        Top::start_sized(env, 40, 120, args)
    }

    /// `corral top` on a pseudo-terminal of `rows`×`cols`.
    fn start_sized(env: &Env, rows: u16, cols: u16, args: &[&str]) -> Top {
        let size = nix::pty::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = nix::pty::openpty(Some(&size), None).unwrap();
        let tty = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let mut command = env.command(&[&["top"], args].concat());
        command.env("TERM", "xterm-256color").stdin(tty(&pty.slave)).stdout(tty(&pty.slave)).stderr(tty(&pty.slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the pty is its
        // controlling terminal, as at a login.
        unsafe {
            command.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        drop(pty.slave);
        let master = std::fs::File::from(pty.master);
        let keys = master.try_clone().unwrap();
        let drawn = Arc::new(Mutex::new(String::new()));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (into, raw_into) = (Arc::clone(&drawn), Arc::clone(&raw));
        std::thread::spawn(move || {
            let mut master = master;
            let mut buf = [0u8; 65536];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                raw_into.lock().unwrap().extend_from_slice(&buf[..n]);
                into.lock().unwrap().push_str(&plain(&String::from_utf8_lossy(&buf[..n])));
            }
        });
        Top { child, keys, drawn, raw }
    }

    /// True if it drew `text` (spaces aside: a terminal is drawn with
    /// cursor moves over what stays blank).
    fn shows(&self, text: &str) -> bool {
        self.shows_since(0, text)
    }

    /// How much it has drawn so far: a mark for [`Top::shows_since`].
    fn mark(&self) -> usize {
        self.drawn.lock().unwrap().len()
    }

    /// True if it drew `text` after `mark` (a terminal redraws only the
    /// cells that change, so text drawn again is drawn in part).
    fn shows_since(&self, mark: usize, text: &str) -> bool {
        let squeeze = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let drawn = self.drawn.lock().unwrap();
        squeeze(drawn.get(mark..).unwrap_or_default()).contains(&squeeze(text))
    }

    fn press(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
    }
}

/// `text` without its escape sequences (CSI, and the two-byte ones).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

/// A run of a spending agent, paused at its $1 budget.
fn paused_at_a_dollar() -> (Env, String) {
    let env = Env::new();
    env.config("");
    env.use_fake("pi", "spender");
    env.agent_preset("spend", "pi", "");
    let id = env.ok(&["launch", "--budget", "$1", "spend", "a task"]).trim().to_string();
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    (env, id)
}

#[test]
fn top_pins_what_needs_you_and_its_keys_answer_it() {
    let (env, id) = paused_at_a_dollar();
    let mut top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows("Needs you (1)")), "{}", top.drawn.lock().unwrap());
    assert!(top.shows("budget of $1.00 reached") && top.shows(&id), "{}", top.drawn.lock().unwrap());
    assert!(top.shows("1 Allow $1.00 more"), "{}", top.drawn.lock().unwrap());
    // Its transcript: each message with its usage folded in, no row of its own.
    let folded = || top.shows("spent message 1 · 1000 in / 100 out");
    assert!(eventually(LIMIT, folded), "{}", top.drawn.lock().unwrap());
    assert!(!top.shows("usage 1000 in / 100 out"), "{}", top.drawn.lock().unwrap());
    // Tab to what needs you; 1: its first action, "Allow $1.00 more".
    top.press("\t1");
    assert!(eventually(LIMIT, || env.show(&id)["budget"]["usd"] == 2.0), "the key did not allow more");
    // Paused again at $2: the runs list acts too (a: abort the selected run).
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused" && r["budget"]["usd"] == 2.0);
    top.press("\taa");
    let ended = env.wait_run(&id, LIMIT, common::is_terminal);
    assert_eq!(ended["status"], "aborted");
    assert!(eventually(LIMIT, || top.shows("aborted")), "the list followed the store");
    top.press("q");
    let gone = eventually(LIMIT, || top.child.try_wait().unwrap().is_some());
    assert!(gone, "q did not leave");
    assert!(top.child.wait().unwrap().success());
}

#[test]
fn d_shows_the_selected_runs_unmerged_changes_and_d_again_its_transcript() {
    let env = Env::new();
    env.config("");
    let git = |args: &[&str]| common::git(&env.project, args);
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join("notes.txt"), "first line\n").unwrap();
    std::fs::write(env.project.join(".gitignore"), ".corral/\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    env.command_preset_with(
        "edit",
        &["sh", "-c", "echo an-added-line >> notes.txt; echo said-in-transcript"],
        "worktree: true\n",
    );
    let id = env.launch("edit", "x");
    env.wait_end(&id);
    let mut top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows("said-in-transcript")), "{}", top.drawn.lock().unwrap());
    let before = top.mark();
    top.press("d");
    let diff = || top.shows_since(before, "PgDn/PgUp") && top.shows_since(before, "+an-added-line");
    assert!(eventually(LIMIT, diff), "{}", top.drawn.lock().unwrap());
    // Merged from here (m), nothing is left to show.
    let before = top.mark();
    top.press("m");
    assert!(eventually(LIMIT, || top.shows_since(before, "no unmerged changes")), "{}", top.drawn.lock().unwrap());
    assert_eq!(std::fs::read_to_string(env.project.join("notes.txt")).unwrap(), "first line\nan-added-line\n");
    let before = top.mark();
    top.press("d");
    assert!(eventually(LIMIT, || top.shows_since(before, "said-in-transcript")), "{}", top.drawn.lock().unwrap());
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
}

#[test]
fn keys_pressed_together_act_once_and_allow_what_the_run_was_launched_with() {
    let (env, id) = paused_at_a_dollar();
    let mut top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows("1 Allow $1.00 more")), "{}", top.drawn.lock().unwrap());
    // Two presses in one write: the second finds the need answered.
    top.press("\t11");
    assert!(eventually(LIMIT, || top.shows("no longer offered")), "{}", top.drawn.lock().unwrap());
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused" && r["budget"]["usd"] == 2.0);
    // Paused again at $2: "Allow more" offers the $1 it was launched with,
    // not the budget as it grew.
    let needs = env.ok(&["needs"]);
    assert!(needs.contains("Allow $1.00 more: corral resume") && needs.contains("--budget usd=3"), "{needs}");
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
}

#[test]
fn a_key_acts_on_the_run_chosen_when_a_new_one_comes_above_it() {
    let env = Env::new();
    env.config("");
    env.command_preset_with("slow", &["sleep", "60"], "");
    let chosen = env.launch("slow", "the one chosen");
    let other = env.launch("slow", "another");
    let mut top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows(&other) && top.shows(&chosen)), "{}", top.drawn.lock().unwrap());
    // The newest is first: down once is the one chosen.
    // (Where the newer run comes, before or after the key, the selection
    // follows the run it was on.)
    top.press("j");
    // A task that shares no letter with the row it is drawn over (a
    // terminal is redrawn only where cells change).
    let newer = env.launch("slow", "ZQXZQXZQX");
    assert!(eventually(LIMIT, || top.shows("ZQXZQXZQX")), "{}", top.drawn.lock().unwrap());
    top.press("p");
    env.wait_run(&chosen, LIMIT, |r| r["status"] == "paused");
    for id in [&other, &newer] {
        assert_eq!(env.show(id)["status"], "running", "{id} was not the one chosen");
    }
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
    env.ok(&["abort", &chosen, &other, &newer]);
}

#[test]
fn what_a_preset_or_an_agent_named_cannot_rewrite_the_terminal() {
    let env = Env::new();
    env.config("");
    // A repository's preset named to retitle the terminal, and an agent
    // refused a write to a path named to do the same.
    let text = "---\nname: \"ev\\e]0;PWNED\\ail\"\ndescription: d\nagent: command\ncommand: [\"false\"]\n---\n";
    env.preset_file(".corral/presets", "evil.md", text);
    let id = env.launch("ev\x1b]0;PWNED\x07il", "x");
    env.wait_end(&id);
    let top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows(&id)), "{}", top.drawn.lock().unwrap());
    assert!(eventually(LIMIT, || top.shows("Needs you")), "{}", top.drawn.lock().unwrap());
    let raw = String::from_utf8_lossy(&top.raw.lock().unwrap()).into_owned();
    assert!(!raw.contains("\x1b]0;PWNED"), "the preset's name reached the terminal raw");
    let needs = env.ok(&["needs"]);
    assert!(!needs.contains('\x1b'), "{needs:?}");
}

#[test]
fn a_key_acts_on_nothing_once_the_chosen_run_left_the_list() {
    let env = Env::new();
    env.config("");
    env.command_preset_with("slow", &["sleep", "60"], "");
    let one = env.launch("slow", "one");
    let two = env.launch("slow", "two");
    let mut top = Top::start_with(&env, &["-n", "2"]);
    assert!(eventually(LIMIT, || top.shows(&one) && top.shows(&two)), "{}", top.drawn.lock().unwrap());
    top.press("j");
    // A third run pushes the one chosen past `-n 2`.
    let three = env.launch("slow", "ZQXZQXZQX");
    assert!(eventually(LIMIT, || top.shows("ZQXZQXZQX")), "{}", top.drawn.lock().unwrap());
    top.press("aa");
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
    for id in [&one, &two, &three] {
        assert_eq!(env.show(id)["status"], "running", "{id} was aborted by a key on a run no longer chosen");
    }
    env.ok(&["abort", &one, &two, &three]);
}

/// `s` on a failed run: looked at, as its page or `corral show` would
/// mark it, so it leaves what needs you.
#[test]
fn s_marks_a_failure_seen_and_it_needs_you_no_more() {
    let env = Env::new();
    env.config("");
    env.command_preset("fails", &["sh", "-c", "echo broke >&2; exit 3"]);
    let id = env.launch("fails", "x");
    env.wait_end(&id);
    let mut top = Top::start(&env);
    assert!(eventually(LIMIT, || top.shows("Needs you (1)")), "{}", top.drawn.lock().unwrap());
    top.press("\ts");
    // (What the screen redraws is only what changed: the store says it.)
    assert!(eventually(LIMIT, || !env.ok(&["needs"]).contains(&id)), "still needs you");
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
}

/// What needs you, round 2, item 15: the title counts every run at work,
/// not only those listed (`-n 2` with three running says three).
#[test]
fn the_title_counts_every_run_at_work_not_only_those_listed() {
    let env = Env::new();
    env.config("max_parallel = 10\n");
    env.command_preset("long", &["sh", "-c", "sleep 30"]);
    let ids: Vec<String> = (0..3).map(|n| env.launch("long", &format!("t{n}"))).collect();
    for id in &ids {
        env.wait_run(id, LIMIT, |r| r["status"] == "running");
    }
    let mut top = Top::start_with(&env, &["-n", "2"]);
    assert!(eventually(LIMIT, || top.shows("Runs (3 running)")), "{}", top.drawn.lock().unwrap());
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()));
    env.ok(&["abort", &ids[0], &ids[1], &ids[2]]);
}

/// At 80×24 (a terminal's default size) a need's keys and the help are
/// whole; `a` asks before it aborts, and any other key keeps the run.
#[test]
fn at_eighty_columns_the_keys_are_shown_and_abort_asks_first() {
    let (env, id) = paused_at_a_dollar();
    let mut top = Top::start_sized(&env, 24, 80, &[]);
    assert!(eventually(LIMIT, || top.shows("1 Allow $1.00 more")), "{}", top.drawn.lock().unwrap());
    // A frame may reach the terminal in several writes.
    assert!(
        eventually(LIMIT, || top.shows("d diff · q quit")),
        "the help runs off the edge: {}",
        top.drawn.lock().unwrap()
    );
    // `a`, then another key; `R` after them opens a reply, drawn once both
    // were taken (keys are taken in order).
    let mark = top.mark();
    top.press("axR");
    assert!(eventually(LIMIT, || top.shows_since(mark, "Enter sends, Esc cancels")), "{}", top.drawn.lock().unwrap());
    assert_eq!(env.show(&id)["status"], "paused", "one key stopped paid work");
    top.child.kill().unwrap();
    top.child.wait().unwrap();
    // `a` twice aborts.
    let mut top = Top::start_sized(&env, 24, 80, &[]);
    assert!(eventually(LIMIT, || top.shows(&id)), "{}", top.drawn.lock().unwrap());
    top.press("aa");
    assert_eq!(env.wait_run(&id, LIMIT, common::is_terminal)["status"], "aborted");
    top.press("q");
    assert!(eventually(LIMIT, || top.child.try_wait().unwrap().is_some()), "q did not leave");
}
