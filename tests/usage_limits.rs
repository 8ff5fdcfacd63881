//! Usage limits waited out, through the CLI as a user meets them: a run at
//! its agent's limit is paused (neither failed nor running), goes on in its
//! own session at the reset by itself, or at once on `corral resume`;
//! queued runs of that agent wait for the reset; a limit that says no reset
//! time is tried again a few times, then fails in words.

mod common;

use std::time::Duration;

use chrono::{Local, Timelike};
use common::{processes_of_run, Env};

const LIMIT: Duration = Duration::from_secs(40);

/// A Codex preset whose agent is the fake `limited`.
fn limited_env(config: &str) -> Env {
    let env = Env::new();
    env.config(config);
    env.use_fake("codex", "limited");
    env.agent_preset("cx", "codex", "");
    env
}

/// "5:40 PM" for `minutes` from now, as Codex says a reset.
fn clock_in(minutes: i64) -> String {
    (Local::now() + chrono::Duration::minutes(minutes)).format("%-I:%M %p").to_string()
}

fn turns(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
fn a_run_at_its_usage_limit_is_paused_and_goes_on_in_its_session_at_the_reset() {
    let env = limited_env("");
    let log = env.project.join("turns.log");
    // Said to the minute, and that minute is now: the reset is (about) now.
    let at = clock_in(0);
    let id = env.launch_env("cx", "do the work", &[("LIMIT_AT", &at), ("LIMIT_LOG", log.to_str().unwrap())]);
    let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["status"], "paused", "{paused:#}");
    assert_eq!(paused["pause_reason"], "usage_limit", "{paused:#}");
    assert!(paused["resumes_at"].is_string(), "{paused:#}");
    assert!(paused["error"].is_null() && paused["stop_reason"].is_null(), "not failed: {paused:#}");
    let run = env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["status"], "completed", "{run:#}\n{}", env.ok(&["tail", "-n", "all", &id]));
    assert_eq!(run["final_text"], "went on after the limit");
    let turns = turns(&log);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains("resume 01a21394-322d-71a3-a5e0-20873b64d16b"), "its own session: {turns:?}");
    let text = env.ok(&["tail", "-n", "all", &id]);
    assert!(text.contains("paused: usage limit reached") && text.contains("goes on by itself at"), "{text}");
    assert!(text.contains("Continue where you stopped"), "{text}");
}

#[test]
fn resume_goes_on_at_once_and_runs_of_that_agent_wait_for_the_reset_meanwhile() {
    let env = limited_env("");
    env.command_preset("other", &["echo", "other agents go on"]);
    // A reset two hours away (not wrapping past midnight in the fake's words).
    let at = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let first = env.launch_env("cx", "first", &[("LIMIT_AT", &at)]);
    let paused = env.wait_run(&first, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["pause_reason"], "usage_limit", "{paused:#}");
    assert!(processes_of_run(&first).is_empty(), "a paused-at-limit run holds no process");
    // Another run of the same agent waits for the reset instead of
    // starting into the wall; another agent's run goes.
    let second = env.launch_env("cx", "second", &[("LIMIT_AT", &at)]);
    let other = env.launch("other", "x");
    assert_eq!(env.wait_end(&other)["status"], "completed");
    assert_eq!(env.show(&second)["status"], "queued", "started into the wall");

    let resumed = env.json(&["resume", &first]);
    assert_eq!(resumed[0]["status"], "running", "{resumed:#}");
    let run = env.wait_end(&first);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "went on after the limit");
    // A turn of that agent that worked ends its limit: the queued run goes.
    let second_run = env.wait_run(&second, LIMIT, |r| r["status"] != "queued");
    assert_ne!(second_run["status"], "queued");
    env.ok(&["abort", &second]);
}

#[test]
fn two_runs_paused_by_one_limit_are_one_announcement() {
    let env = limited_env("");
    let at = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let vars = [("LIMIT_AT", at.as_str()), ("LIMIT_DELAY", "0.5")];
    let runs = [env.launch_env("cx", "one", &vars), env.launch_env("cx", "two", &vars)];
    let paused: Vec<_> = runs.iter().map(|id| env.wait_run(id, LIMIT, |r| r["status"] == "paused")).collect();
    assert_eq!(paused[0]["resumes_at"], paused[1]["resumes_at"], "one limit, one reset");
    let notes = corral::attention::announce::usage_limits(&env.store()).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].1.summary.starts_with("⏸ 2 codex runs paused: usage limit, going on at"), "{notes:?}");
    env.ok(&["abort", &runs[0], &runs[1]]);
}

#[test]
fn a_run_waiting_out_a_limit_can_be_aborted() {
    let env = limited_env("");
    let at = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let id = env.launch_env("cx", "x", &[("LIMIT_AT", &at)]);
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let aborted = env.json(&["abort", &id]);
    assert_eq!(aborted[0]["status"], "aborted", "{aborted:#}");
    let run = env.wait_end(&id);
    assert_eq!(run["stop_reason"], "user_abort");
    assert!(run["resumes_at"].is_null() && run["pause_reason"].is_null(), "{run:#}");
}

#[test]
fn a_limit_without_a_reset_time_is_tried_again_then_fails_in_words() {
    let env = Env::new();
    env.config("[usage_limits]\nretry = \"200ms\"\ntries = 2\n");
    env.use_fake("claude", "rate-limited");
    env.agent_preset("cl", "claude", "");
    let log = env.project.join("turns.log");
    let id = env.launch_env("cl", "x", &[("LIMIT_LOG", log.to_str().unwrap())]);
    let run = env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["stop_reason"], "usage_limit", "{run:#}");
    let error = run["error"].as_str().unwrap();
    assert!(error.contains("still after 2 tries") && error.contains("rate limit"), "{error}");
    let turns = turns(&log);
    assert_eq!(turns.len(), 3, "the first turn and two tries: {turns:?}");
    assert!(turns[1..].iter().all(|t| t.contains("--resume")), "{turns:?}");
}

/// Claude Code's weekly limit says a day and a time, in a zone or not: the
/// run waits for that moment (in its session), never thrown at the wall.
#[test]
fn claude_codes_weekly_limit_waits_for_the_day_and_time_it_says() {
    let in_two_days = Local::now() + chrono::Duration::days(2);
    for (said, zone) in [
        (format!("{}, 4pm (Europe/Rome)", in_two_days.format("%b %-d")), Some("Europe/Rome")),
        (format!("{} at 7pm", in_two_days.format("%b %-d")), None),
        (format!("{} at 7pm", in_two_days.format("%B %-d")), None),
        (format!("{} at 7pm EST", in_two_days.format("%B %-d")), Some("EST")),
    ] {
        // An installation each: a limit holds back every run of its agent.
        let env = Env::new();
        env.config("");
        env.use_fake("claude", "claude-weekly");
        env.agent_preset("cl", "claude", "");
        let id = env.launch_env("cl", "do the work", &[("WEEKLY_AT", &said)]);
        let paused = env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
        assert_eq!(paused["pause_reason"], "usage_limit", "{said}: {paused:#}");
        let resumes: chrono::DateTime<chrono::FixedOffset> =
            chrono::DateTime::parse_from_rfc3339(paused["resumes_at"].as_str().unwrap()).unwrap();
        let hours = (resumes.with_timezone(&Local) - Local::now()).num_hours();
        assert!((24..=72).contains(&hours), "{said}: resumes in {hours} h: {paused:#}");
        if zone.is_none() {
            assert_eq!(resumes.with_timezone(&Local).hour(), 19, "{said}: {paused:#}");
        }
        env.ok(&["abort", &id]);
    }
}

/// `corral pause` of a run waiting out a limit makes it the user's pause:
/// past the reset it waits for `corral resume`. Its session is kept in the
/// store while it waits (a shepherd lost meanwhile loses nothing).
#[test]
fn a_run_waiting_out_a_limit_paused_by_the_user_waits_for_resume() {
    let env = Env::new();
    env.config("[usage_limits]\nretry = \"2s\"\ntries = 5\n");
    env.use_fake("claude", "rate-limited");
    env.agent_preset("cl", "claude", "");
    let log = env.project.join("turns.log");
    let id = env.launch_env("cl", "x", &[("LIMIT_LOG", log.to_str().unwrap())]);
    let waiting = env.wait_run(&id, LIMIT, |r| r["pause_reason"] == "usage_limit" || common::is_terminal(r));
    assert_eq!(waiting["pause_reason"], "usage_limit", "{waiting:#}");
    assert!(waiting["session_id"].is_string(), "its session only in memory: {waiting:#}");
    let reset: chrono::DateTime<chrono::FixedOffset> =
        chrono::DateTime::parse_from_rfc3339(waiting["resumes_at"].as_str().unwrap()).unwrap();
    let paused = env.json(&["pause", &id]);
    assert_eq!(paused[0]["status"], "paused", "{paused:#}");
    assert!(paused[0]["pause_reason"].is_null() && paused[0]["resumes_at"].is_null(), "{paused:#}");
    // Past the reset (and its margin), it has not gone on.
    let past = reset.with_timezone(&chrono::Utc) + chrono::Duration::seconds(7);
    common::eventually(LIMIT, || chrono::Utc::now() > past);
    assert_eq!(turns(&log).len(), 1, "it went on at the reset though paused by the user");
    assert_eq!(env.show(&id)["status"], "paused");
    // Resumed, it goes on in its session.
    env.ok(&["resume", &id]);
    assert!(common::eventually(LIMIT, || turns(&log).len() == 2), "{:?}", turns(&log));
    env.ok(&["abort", &id]);
}

/// Past its reset, a run that waits for a slot is still the user's to
/// pause: a `corral pause` then holds it until `corral resume`, though a
/// slot frees.
#[test]
fn a_run_paused_by_the_user_as_its_limit_resets_waits_for_resume() {
    let env = Env::new();
    env.config("max_parallel = 1\n[usage_limits]\nretry = \"2s\"\ntries = 5\n");
    env.use_fake("claude", "rate-limited");
    env.agent_preset("cl", "claude", "");
    let release = env.project.join("release");
    env.command_preset("hog", &[&common::fake_agent("slow"), release.to_str().unwrap()]);
    let log = env.project.join("turns.log");
    let id = env.launch_env("cl", "x", &[("LIMIT_LOG", log.to_str().unwrap())]);
    let waiting = env.wait_run(&id, LIMIT, |r| r["pause_reason"] == "usage_limit" || common::is_terminal(r));
    assert_eq!(waiting["pause_reason"], "usage_limit", "{waiting:#}");
    let hog = env.ok(&["launch", "hog", "hold the one slot"]).trim().to_string();
    assert_eq!(env.wait_run(&hog, LIMIT, |r| r["status"] == "running" || common::is_terminal(r))["status"], "running");
    // Past the reset and its margin: it waits for the slot the hog holds.
    let reset: chrono::DateTime<chrono::FixedOffset> =
        chrono::DateTime::parse_from_rfc3339(waiting["resumes_at"].as_str().unwrap()).unwrap();
    let past = reset.with_timezone(&chrono::Utc) + chrono::Duration::seconds(2);
    common::eventually(LIMIT, || chrono::Utc::now() > past);
    let paused = env.json(&["pause", &id]);
    assert_eq!(paused[0]["status"], "paused", "{paused:#}");
    env.ok(&["abort", &hog]);
    // The slot is free: it stays paused, by the user's word.
    let gone_on = common::eventually(Duration::from_secs(3), || turns(&log).len() > 1);
    assert!(!gone_on, "it went on though paused by the user");
    assert_eq!(env.show(&id)["status"], "paused");
    env.ok(&["resume", &id]);
    assert!(common::eventually(LIMIT, || turns(&log).len() == 2), "{:?}", turns(&log));
    env.ok(&["abort", &id]);
}

/// A run waiting out a limit has no process of its own: if its shepherd
/// dies meanwhile, the run is not lost but queued to go on in its session
/// once the limit has reset (held while it stands).
#[test]
fn a_run_whose_shepherd_died_waiting_out_a_limit_goes_on_in_its_session() {
    let kill_shepherd = |env: &Env, id: &str| {
        let pid = env.show(id)["shepherd_pid"].as_i64().expect("a shepherd") as i32;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        let gone = common::eventually(LIMIT, || {
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        assert!(gone, "the shepherd lives on");
    };
    // A reset hours away: queued, held while the limit stands.
    let later = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let env = limited_env("");
    let held = env.launch_env("cx", "x", &[("LIMIT_AT", &later)]);
    env.wait_run(&held, LIMIT, |r| r["status"] == "paused");
    kill_shepherd(&env, &held);
    let run = env.wait_run(&held, LIMIT, |r| r["status"] != "paused");
    assert_eq!(run["status"], "queued", "{run:#}");
    assert!(
        !common::eventually(Duration::from_secs(2), || env.show(&held)["status"] != "queued"),
        "started into the wall"
    );
    let text = env.ok(&["tail", "-n", "all", &held]);
    assert!(text.contains("shepherd died while it waited out a usage limit"), "{text}");
    env.ok(&["abort", &held]);

    // A reset about now (another installation: the limit above stands
    // for hours there): it goes on in its own session.
    let env = limited_env("");
    let log = env.project.join("turns.log");
    let id = env.launch_env("cx", "do the work", &[("LIMIT_AT", &clock_in(0)), ("LIMIT_LOG", log.to_str().unwrap())]);
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    kill_shepherd(&env, &id);
    let run = env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["status"], "completed", "{run:#}\n{}", env.ok(&["tail", "-n", "all", &id]));
    assert_eq!(run["final_text"], "went on after the limit");
    let turns = turns(&log);
    assert!(turns.last().unwrap().contains("resume 01a21394-322d-71a3-a5e0-20873b64d16b"), "{turns:?}");
}

/// Item 21 of round 6: a run queued behind a usage limit starts at the
/// reset with no Corral process looking (the limited run was aborted, so
/// no shepherd waits it out): something wakes at the reset. The store is
/// read directly here, never through a command that would heal it.
#[test]
fn runs_queued_behind_a_limit_start_at_its_reset_with_nobody_looking() {
    let env = limited_env("");
    let said = "You've hit your usage limit. Try again in 4s.";
    let first = env.launch_env("cx", "first", &[("LIMIT_SAID", said), ("LIMIT_ALWAYS", "1")]);
    let paused = env.wait_run(&first, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["pause_reason"], "usage_limit", "{paused:#}");
    let second = env.launch_env("cx", "second", &[("LIMIT_SAID", said), ("LIMIT_ALWAYS", "1")]);
    assert_eq!(env.show(&second)["status"], "queued", "started into the wall");
    env.ok(&["abort", &first]);
    env.wait_end(&first);
    let status = |id: &str| env.store().run(id).unwrap().status;
    assert!(
        common::eventually(LIMIT, || status(&second) != corral::run::RunStatus::Queued),
        "the queued run never started after the reset"
    );
    env.ok(&["abort", &second]);
}

/// Item 15 of round 6: a run waiting out a limit whose shepherd is killed
/// is queued again in one commit: waiters woken meanwhile (the tray is
/// one) never see it `lost` on the way, and go on waiting.
#[test]
fn waiters_never_see_a_run_lost_on_its_way_back_to_the_queue() {
    let later = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let env = limited_env("");
    let id = env.launch_env("cx", "x", &[("LIMIT_AT", &later)]);
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let waiters: Vec<std::process::Child> = (0..8)
        .map(|_| {
            env.command(&["wait", &id])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Each waiter asleep in poll(2), following the shepherd's pidfd.
    let asleep = |child: &std::process::Child| {
        std::fs::read_to_string(format!("/proc/{}/wchan", child.id())).is_ok_and(|w| w.contains("poll"))
    };
    assert!(common::eventually(LIMIT, || waiters.iter().all(asleep)), "the waiters never blocked");
    let pid = env.show(&id)["shepherd_pid"].as_i64().expect("a shepherd") as i32;
    common::signal_pid(pid, corral::process::Sig::Kill).unwrap();
    let run = env.wait_run(&id, LIMIT, |r| r["status"] != "paused");
    assert_eq!(run["status"], "queued", "{run:#}");
    env.ok(&["abort", &id]);
    for waiter in waiters {
        let out = waiter.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!said.contains("lost"), "a waiter saw the run lost: {said}");
        assert!(said.contains("aborted"), "{said}");
    }
}

/// A night's money, item 6: a limit whose dated reset is already past (Codex's
/// "try again at Nov 23rd, 2026 5:40 PM" read days later) is tried again
/// the few times a limit without a reset is, then fails in words: never
/// a request every few seconds all night.
#[test]
fn a_reset_already_past_is_tried_a_few_times_then_fails() {
    let env = limited_env("[usage_limits]\nretry = \"200ms\"\ntries = 2\n");
    let log = env.project.join("turns.log");
    let said = "You've hit your usage limit. Try again at Nov 23rd, 2026 5:40 PM.";
    let vars = [("LIMIT_SAID", said), ("LIMIT_ALWAYS", "1"), ("LIMIT_LOG", log.to_str().unwrap())];
    let id = env.launch_env("cx", "x", &vars);
    let run = env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["stop_reason"], "usage_limit", "{run:#}");
    assert!(run["error"].as_str().unwrap().contains("still after 2 tries"), "{run:#}");
    assert_eq!(turns(&log).len(), 3, "the first turn and two tries: {:?}", turns(&log));
}

/// What needs you, item 14: a limit that resets in three days is said with
/// its day, in `needs` and `ls`, never as a time that reads as today's.
#[test]
fn a_reset_days_away_is_said_with_its_day() {
    let env = limited_env("");
    let said = "You've hit your usage limit. Try again in 3 days.";
    let id = env.launch_env("cx", "x", &[("LIMIT_SAID", said), ("LIMIT_ALWAYS", "1")]);
    env.wait_run(&id, LIMIT, |r| r["status"] == "paused");
    let day = (Local::now() + chrono::Duration::days(3)).format("%-d %b").to_string();
    let needs = env.ok(&["needs"]);
    assert!(needs.contains("goes on by itself at") && needs.contains(&day), "{needs}");
    let ls = env.ok(&["ls"]);
    assert!(ls.contains(&day), "{ls}");
    env.ok(&["abort", &id]);
}

/// A hostile reading's finding: a limit that says its reset is now, again
/// and again (said to the minute, repeated within that minute), is tried
/// the few times a limit with no reset is, longer apart, then fails: never
/// every few seconds.
#[test]
fn a_reset_said_to_be_now_again_and_again_is_tried_a_few_times() {
    let env = limited_env("[usage_limits]\nretry = \"200ms\"\ntries = 2\n");
    let log = env.project.join("turns.log");
    let said = "You've hit your usage limit. Try again in 1 second.";
    let vars = [("LIMIT_SAID", said), ("LIMIT_ALWAYS", "1"), ("LIMIT_LOG", log.to_str().unwrap())];
    let id = env.launch_env("cx", "x", &vars);
    let run = env.wait_run(&id, LIMIT, |r| common::is_terminal(r) && !r["exited_at"].is_null());
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["stop_reason"], "usage_limit", "{run:#}");
    assert!(turns(&log).len() <= 4, "tried {} times: {:?}", turns(&log).len(), turns(&log));
}

/// A hostile reading's finding: a usage limit outlives the run that hit it
/// (aborted): the runs it holds in the queue need you, with when they
/// start, never "nothing needs you".
#[test]
fn runs_a_limit_holds_in_the_queue_are_said() {
    let env = limited_env("");
    let at = if Local::now().hour() < 21 { clock_in(120) } else { clock_in(30) };
    let first = env.launch_env("cx", "first", &[("LIMIT_AT", &at)]);
    env.wait_run(&first, LIMIT, |r| r["status"] == "paused");
    let second = env.launch_env("cx", "second", &[("LIMIT_AT", &at)]);
    env.ok(&["abort", &first]);
    env.wait_end(&first);
    assert_eq!(env.show(&second)["status"], "queued");
    let needs = env.ok(&["needs"]);
    assert!(needs.contains(&second) && needs.contains("queued behind codex's usage limit"), "{needs}");
    env.ok(&["abort", &second]);
}
