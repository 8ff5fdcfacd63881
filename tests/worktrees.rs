//! A git worktree per run: the agent works on its own branch outside the
//! user's repository; `diff` shows everything it changed, `merge` brings it
//! into the branch it started from without ever losing the user's work,
//! `discard` removes it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::Env;
use serde_json::Value;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The project folder as a git repository on `main` with one commit, and a
/// preset `edit` (with a worktree) that changes a tracked file, adds one,
/// and commits one more.
fn repo() -> Env {
    let env = Env::new();
    env.config("");
    git(&env.project, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.project.join("sub")).unwrap();
    std::fs::write(env.project.join("tracked.txt"), "one\n").unwrap();
    std::fs::write(env.project.join("sub/keep.txt"), "keep\n").unwrap();
    std::fs::write(env.project.join(".gitignore"), ".corral/\n").unwrap();
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-q", "-m", "init"]);
    let script = "pwd > where; echo two >> ../tracked.txt; echo fresh > ../new.txt; \
                  git -c user.name=A -c user.email=a@a add ../new.txt && \
                  git -c user.name=A -c user.email=a@a commit -qm 'agent commit' && echo untracked > loose.txt";
    env.command_preset_with("edit", &["sh", "-c", script], "worktree: true\n");
    env
}

fn launch_in(env: &Env, dir: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = env.command(args);
    cmd.current_dir(dir);
    cmd.output().unwrap()
}

#[test]
fn a_run_works_on_its_own_branch_and_is_reviewed_merged_and_discarded() {
    let env = repo();
    let sub = env.project.join("sub");
    let out = launch_in(&env, &sub, &["launch", "edit", "change things", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let worktree = &run["worktree"];
    let path = worktree["path"].as_str().unwrap();
    assert!(path.starts_with(env.home.to_str().unwrap()), "outside the user's repository: {path}");
    assert_eq!(worktree["branch"], format!("corral/{id}"));
    assert_eq!(worktree["base"].as_str().unwrap(), git(&env.project, &["rev-parse", "HEAD"]).trim());
    // The agent worked in the same subfolder of its worktree.
    let wher = std::fs::read_to_string(Path::new(path).join("sub/where")).unwrap();
    assert_eq!(wher.trim(), Path::new(path).join("sub").to_str().unwrap());
    // The user's tree is untouched.
    assert_eq!(std::fs::read_to_string(env.project.join("tracked.txt")).unwrap(), "one\n");
    assert!(!env.project.join("new.txt").exists());
    let transcript = env.ok(&["tail", &id]);
    assert!(transcript.contains(&format!("worktree {path} on branch corral/{id}")), "{transcript}");
    // Measured as the run ended, for the window's list.
    assert_eq!(run["changes"], serde_json::json!({"files": 4, "added": 4, "removed": 0}));

    // Review: commits, uncommitted and untracked files alike.
    let diff = env.json(&["diff", &id]);
    let files: Vec<(&str, u64, u64)> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["added"].as_u64().unwrap(), f["removed"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        files,
        [("new.txt", 1, 0), ("sub/loose.txt", 1, 0), ("sub/where", 1, 0), ("tracked.txt", 1, 0)],
        "{diff:#}"
    );
    assert!(diff["diff"].as_str().unwrap().contains("+two"));
    let stat = env.ok(&["diff", &id, "--stat"]);
    assert!(stat.contains("4 files changed, +4 -0"), "{stat}");

    // Take it: one commit on main whose message is the preset and task.
    let merged = env.json(&["merge", &id]);
    assert_eq!(merged["branch"], "main");
    let log = git(&env.project, &["log", "--format=%s", "-n", "2"]);
    assert_eq!(log, "edit: change things\ninit\n");
    assert_eq!(std::fs::read_to_string(env.project.join("tracked.txt")).unwrap(), "one\ntwo\n");
    assert!(env.project.join("sub/loose.txt").exists());

    // Drop it: worktree and branch gone.
    env.ok(&["discard", &id]);
    assert!(!Path::new(path).exists());
    assert!(!git(&env.project, &["branch", "--list"]).contains("corral/"));
    assert!(env.show(&id)["worktree"].is_null());
    let again = env.corral(&["diff", &id]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("discarded"));
    // Relaunching it (as the window does) starts from where it was launched.
    let run = env.store().run(&id).unwrap();
    assert_eq!(run.launch_folder(), env.project.join("sub"), "not the discarded worktree's folder");
    let again = env.corral(&["reply", &id, "more"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("worktree was discarded"));
}

#[test]
fn merge_never_loses_the_users_work() {
    let env = repo();
    let out = launch_in(&env, &env.project.join("sub"), &["launch", "edit", "change things"]);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    env.wait_end(&id);
    // The user edited a file the run also changed, and did not commit.
    std::fs::write(env.project.join("tracked.txt"), "one\nmine\n").unwrap();
    let head = git(&env.project, &["rev-parse", "HEAD"]);
    let out = env.corral(&["merge", &id]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing was changed") && err.contains("tracked.txt"), "{err}");
    assert_eq!(std::fs::read_to_string(env.project.join("tracked.txt")).unwrap(), "one\nmine\n");
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head);
    assert!(!env.project.join("new.txt").exists());
    assert!(env.show(&id)["worktree"].is_object(), "the worktree stays");
    // With --no-squash the agent's commits come along, under the same rule.
    std::fs::write(env.project.join("tracked.txt"), "one\n").unwrap();
    env.ok(&["merge", &id, "--no-squash"]);
    let log = git(&env.project, &["log", "--format=%s"]);
    assert!(log.contains("agent commit"), "{log}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let env = Env::new();
    env.config("");
    env.command_preset_with("edit", &["true"], "worktree: true\n");
    env.command_preset("plain", &["true"]);
    let out = env.corral(&["launch", "edit", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not in a git repository"));
    let out = env.corral(&["launch", "plain", "x", "--base", "main"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--base main only applies to a run with a worktree"));
    // --no-worktree runs in the folder itself.
    env.ok(&["launch", "edit", "x", "--no-worktree"]);
    let id = env.launch("plain", "y");
    env.wait_end(&id);
    let out = env.corral(&["diff", &id]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no worktree"));

    let env = repo();
    let out = env.corral(&["launch", "edit", "x", "--base", "no-such-branch"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--base no-such-branch is not a commit"));
}

#[test]
fn setup_runs_first_and_a_failing_setup_fails_the_run() {
    let env = repo();
    env.command_preset_with(
        "prepared",
        &["sh", "-c", "cat ready"],
        "worktree: true\nsetup: [sh, -c, 'echo installing; echo ok > ready']\n",
    );
    let id = env.launch("prepared", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "ok");
    let transcript = env.ok(&["tail", &id]);
    assert!(transcript.contains("setup: sh -c") && transcript.contains("installing"), "{transcript}");

    env.command_preset_with("broken", &["true"], "worktree: true\nsetup: [sh, -c, 'echo npm ERR missing; exit 3']\n");
    let id = env.launch("broken", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "failed");
    assert_eq!(run["stop_reason"], "setup_failed");
    assert!(run["error"].as_str().unwrap().contains("npm ERR missing"), "{run:#}");
}

#[test]
fn an_abort_during_a_long_setup_stops_it_at_once() {
    let env = repo();
    let started = env.project.join("setup-started");
    let script = format!("touch '{}'; exec sleep 600", started.display());
    env.command_preset_with("slowsetup", &["true"], &format!("worktree: true\nsetup: [sh, -c, \"{script}\"]\n"));
    let id = env.launch("slowsetup", "x");
    assert!(common::eventually(Duration::from_secs(20), || started.exists()), "setup never started");
    let asked = std::time::Instant::now();
    env.ok(&["abort", &id]);
    let run = env.wait_end(&id);
    println!("abort during setup: ended {} ms after the abort", asked.elapsed().as_millis());
    assert_eq!(run["status"], "aborted", "{run:#}");
    assert_eq!(run["stop_reason"], "user_abort");
    assert_eq!(run["error"], "aborted during setup");
    assert!(common::processes_of_run(&id).is_empty(), "setup's processes outlived the run");
}

#[test]
fn a_child_launched_in_a_worktree_works_in_it_and_discard_waits_for_the_end() {
    let env = repo();
    let release = env.project.join("release");
    env.command_preset("peek", &["sh", "-c", "pwd"]);
    let script =
        format!("corral launch peek look >/dev/null; while [ ! -e '{}' ]; do sleep 0.02; done", release.display());
    env.command_preset_with("lead", &["sh", "-c", &script], "worktree: true\n");
    let id = env.launch("lead", "x");
    let running =
        env.wait_run(&id, Duration::from_secs(10), |r| r["children"].as_array().is_some_and(|c| !c.is_empty()));
    let out = env.corral(&["discard", &id]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("still active"));
    std::fs::write(&release, "").unwrap();
    let run = env.wait_end(&id);
    let child = env.wait_end(running["children"][0].as_str().unwrap());
    let path = run["worktree"]["path"].as_str().unwrap();
    assert_eq!(child["final_text"].as_str().unwrap().trim(), path, "the child works in its parent's worktree");
    assert!(child["worktree"].is_null());
}
