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
    common::git(dir, args)
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
    let transcript = env.ok(&["tail", "-n", "all", &id]);
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
    let transcript = env.ok(&["tail", "-n", "all", &id]);
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

/// A finished `edit` run (launched from `sub`, as it expects).
fn finished_edit(env: &Env) -> String {
    let out = launch_in(env, &env.project.join("sub"), &["launch", "edit", "change things"]);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(env.wait_end(&id)["status"], "completed");
    id
}

/// Everything git says of the user's repository: HEAD, status, index.
fn repo_state(env: &Env) -> (String, String, String) {
    (
        git(&env.project, &["rev-parse", "HEAD"]),
        git(&env.project, &["status", "--porcelain=v1", "--untracked-files=all"]),
        git(&env.project, &["ls-files", "--stage"]),
    )
}

fn refused(env: &Env, args: &[&str], says: &str) {
    let out = env.corral(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} was not refused: {err}");
    assert!(err.contains(says) && err.contains("nothing was changed"), "{args:?}: {err}");
}

#[test]
fn merge_never_undoes_or_joins_the_users_merge_in_progress() {
    let env = repo();
    let id = finished_edit(&env);
    // The user merges a branch of theirs, conflicts, and resolves half-way.
    git(&env.project, &["switch", "-q", "-c", "theirs"]);
    std::fs::write(env.project.join("sub/keep.txt"), "theirs\n").unwrap();
    git(&env.project, &["commit", "-qam", "theirs"]);
    git(&env.project, &["switch", "-q", "main"]);
    std::fs::write(env.project.join("sub/keep.txt"), "ours\n").unwrap();
    git(&env.project, &["commit", "-qam", "ours"]);
    let out = Command::new("git").arg("-C").arg(&env.project).args(["merge", "theirs"]).output().unwrap();
    assert!(!out.status.success(), "the user's merge should conflict");
    std::fs::write(env.project.join("sub/keep.txt"), "resolved by hand\n").unwrap();
    let before = repo_state(&env);
    for args in [&["merge", &id, "--no-squash"][..], &["merge", &id][..]] {
        refused(&env, args, "in the middle of a merge");
        assert_eq!(repo_state(&env), before, "{args:?} changed the user's repository");
        assert!(env.project.join(".git/MERGE_HEAD").exists(), "{args:?} undid the user's merge");
        assert_eq!(std::fs::read_to_string(env.project.join("sub/keep.txt")).unwrap(), "resolved by hand\n");
    }
}

#[test]
fn merge_refuses_during_a_rebase_cherry_pick_revert_bisect_or_unmerged_files() {
    let env = repo();
    let id = finished_edit(&env);
    let before = repo_state(&env);
    let git_dir = env.project.join(".git");
    for (marker, says) in [
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase"),
        ("BISECT_LOG", "a bisect"),
    ] {
        let path = git_dir.join(marker);
        if marker.starts_with("rebase") {
            std::fs::create_dir(&path).unwrap();
        } else {
            std::fs::write(&path, "").unwrap();
        }
        for args in [&["merge", &id][..], &["merge", &id, "--no-squash"][..]] {
            refused(&env, args, says);
            assert_eq!(repo_state(&env), before, "{marker}: {args:?} changed the repository");
        }
        if path.is_dir() {
            std::fs::remove_dir(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    // Unmerged files with no operation in progress: a `stash pop` that
    // conflicted.
    std::fs::write(env.project.join("sub/keep.txt"), "stashed\n").unwrap();
    git(&env.project, &["stash", "-q"]);
    std::fs::write(env.project.join("sub/keep.txt"), "committed\n").unwrap();
    git(&env.project, &["commit", "-qam", "mine"]);
    let popped = Command::new("git").arg("-C").arg(&env.project).args(["stash", "pop", "-q"]).output().unwrap();
    assert!(!popped.status.success(), "the stash should conflict");
    let before = repo_state(&env);
    refused(&env, &["merge", &id], "unmerged files");
    assert_eq!(repo_state(&env), before);
    git(&env.project, &["reset", "-q", "--hard"]);
    env.ok(&["merge", &id]);
}

#[test]
fn a_squash_merge_never_commits_what_the_user_staged() {
    let env = repo();
    let id = finished_edit(&env);
    // Staged work of the user's in a file the run never touched.
    std::fs::write(env.project.join("sub/keep.txt"), "my staged work\n").unwrap();
    git(&env.project, &["add", "sub/keep.txt"]);
    env.ok(&["merge", &id]);
    let committed = git(&env.project, &["show", "--name-only", "--format=", "HEAD"]);
    assert!(!committed.contains("sub/keep.txt"), "the user's staged file went into Corral's commit: {committed}");
    assert!(committed.contains("tracked.txt") && committed.contains("new.txt"), "{committed}");
    let staged = git(&env.project, &["diff", "--cached", "--name-only"]);
    assert_eq!(staged.trim(), "sub/keep.txt", "the user's staged work is no longer staged");
    assert_eq!(std::fs::read_to_string(env.project.join("sub/keep.txt")).unwrap(), "my staged work\n");
    assert_eq!(std::fs::read_to_string(env.project.join("tracked.txt")).unwrap(), "one\ntwo\n");
}

#[test]
fn a_merge_whose_branch_cannot_move_leaves_the_repository_as_before() {
    let env = repo();
    let id = finished_edit(&env);
    // A hook that refuses to move main: the last step of the merge fails.
    let hook = env.project.join(".git/hooks/reference-transaction");
    let refuse = "#!/bin/sh\n[ \"$1\" = prepared ] && grep -q ' refs/heads/main$' && exit 1\nexit 0\n";
    std::fs::write(&hook, refuse).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = repo_state(&env);
    refused(&env, &["merge", &id], "cannot move main");
    assert_eq!(repo_state(&env), before, "a failed merge left the repository changed");
    assert!(!env.project.join("new.txt").exists());
    std::fs::remove_file(&hook).unwrap();
    env.ok(&["merge", &id]);
}

#[test]
fn a_run_that_changed_20000_files_can_be_merged() {
    let env = repo();
    let script = "mkdir many && cd many && seq 20000 | sed 's/^/file-with-a-longish-name-/' | xargs touch";
    env.command_preset_with("many", &["sh", "-c", script], "worktree: true\n");
    let id = env.launch("many", "make files");
    assert_eq!(env.wait_run(&id, Duration::from_secs(120), |r| !r["exited_at"].is_null())["status"], "completed");
    env.ok(&["merge", &id]);
    let count = std::fs::read_dir(env.project.join("many")).unwrap().count();
    assert_eq!(count, 20000);
}

#[test]
fn rm_removes_a_run_for_good_but_keeps_a_worktree_with_unmerged_changes() {
    let env = repo();
    let id = finished_edit(&env);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    let out = env.corral(&["rm", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("removed") && said.contains("kept") && said.contains("tracked.txt"), "{said}");
    assert!(Path::new(&worktree).exists(), "a worktree holding unmerged work was removed");
    assert!(!env.run_dir(&id).exists(), "the run's folder is left");
    let out = env.corral(&["show", &id]);
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("no run '{id}'")));
    assert!(
        env.json(&["search", "change things"]).as_array().unwrap().is_empty(),
        "its transcript is still searchable"
    );

    // Merged first, its worktree goes with it.
    let id = finished_edit(&env);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    git(&env.project, &["reset", "-q", "--hard"]);
    env.ok(&["merge", &id]);
    env.ok(&["rm", &id]);
    assert!(!Path::new(&worktree).exists(), "a merged worktree was kept");
}

/// A global preset `slow` that works until the file it returns exists.
fn global_slow_preset(env: &Env) -> std::path::PathBuf {
    let release = env.project.join("release");
    let slow = format!(
        "---\nname: slow\ndescription: s\nagent: command\ncommand: [{}, {}]\n---\n",
        common::fake_agent("slow"),
        release.display()
    );
    env.preset_file(env.home.join("presets"), "slow.md", &slow);
    release
}

#[test]
fn rm_and_prune_never_touch_an_active_run_and_take_a_runs_children_with_it() {
    let env = Env::new();
    env.config("");
    let release = global_slow_preset(&env);
    env.command_preset("quick", &["true"]);
    let busy = env.launch("slow", "x");
    env.wait_run(&busy, Duration::from_secs(20), |r| r["status"] == "running");
    let out = env.corral(&["rm", &busy]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("abort it first"));
    assert_eq!(env.show(&busy)["status"], "running");
    // A parent with a child: removed together.
    env.command_preset("lead", &["sh", "-c", "corral launch quick child --wait >/dev/null"]);
    let lead = env.launch("lead", "y");
    let lead_run = env.wait_end(&lead);
    let child = lead_run["children"][0].as_str().unwrap().to_string();
    // A child of a run still working stays with it.
    env.command_preset(
        "holder",
        &[
            "sh",
            "-c",
            &format!(
                "corral launch quick inner --wait >/dev/null; while [ ! -e '{}' ]; do sleep 0.02; done",
                release.display()
            ),
        ],
    );
    let holder = env.launch("holder", "z");
    let inner = env.wait_run(&holder, Duration::from_secs(20), |r| r["children"][0].is_string())["children"][0]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_end(&inner);
    let out = env.corral(&["rm", &inner]);
    assert_eq!(out.status.code(), Some(2), "a child of a working run was removed");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&holder), "{}", String::from_utf8_lossy(&out.stderr));
    let dry = env.ok(&["prune", "--older-than", "0s", "--dry-run"]);
    assert!(dry.contains(&lead) && dry.contains("would remove"), "{dry}");
    assert!(!dry.contains(&busy), "an active run was offered for pruning: {dry}");
    assert_eq!(env.show(&lead)["status"], "completed", "a dry run removed something");
    let pruned = env.ok(&["prune", "--older-than", "0s", "--preset", "lead"]);
    assert!(pruned.contains(&format!("{lead}  removed, with 1 run(s) it launched: {child}")), "{pruned}");
    for id in [&lead, &child] {
        assert!(!env.corral(&["show", id]).status.success(), "{id} is still there");
    }
    assert_eq!(env.show(&busy)["status"], "running", "prune touched an active run");
    std::fs::write(&release, "").unwrap();
    env.wait_end(&busy);
    env.wait_end(&holder);
}

#[test]
fn ls_here_in_a_subfolder_finds_the_worktree_runs_launched_from_it_and_only_that_folder() {
    let env = repo();
    let sub = env.project.join("sub");
    let out = launch_in(&env, &sub, &["launch", "edit", "from sub"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    env.wait_end(&id);
    // A folder whose name differs only in case is another folder.
    let upper = env.project.join("Sub");
    std::fs::create_dir_all(&upper).unwrap();
    let here = |dir: &Path| -> Vec<String> {
        let out = launch_in(&env, dir, &["ls", "--here", "--all", "--json"]);
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
        runs.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(here(&sub), vec![id.clone()], "ls --here in the subfolder missed the worktree run launched from it");
    assert_eq!(here(&env.project), vec![id.clone()]);
    assert!(here(&upper).is_empty(), "ls --here in Sub listed a run of sub");
}

#[test]
fn what_corral_makes_is_the_users_alone_in_a_home_others_can_read() {
    use std::os::unix::fs::PermissionsExt;
    let env = repo();
    // A CORRAL_HOME the user made, readable by everyone.
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = env.launch("edit", "change things");
    env.wait_end(&id);
    for dir in [env.home.join("worktrees"), env.home.join("runs"), env.run_dir(&id)] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}: other users can read it", dir.display());
    }
}

/// Launches `preset` from the project and waits for its end; its id.
fn finished(env: &Env, preset: &str) -> String {
    let id = env.launch(preset, "do it");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    id
}

/// A preset (with a worktree) whose agent runs `script` in its folder.
fn script_preset(env: &Env, name: &str, script: &str) {
    env.command_preset_with(name, &["sh", "-c", script], "worktree: true\n");
}

/// The user's commit on main, made as a user makes it.
fn user_commits(env: &Env, file: &str, text: &str) {
    let path = env.project.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    git(&env.project, &["add", file]);
    git(&env.project, &["commit", "-qm", &format!("mine: {file}")]);
}

#[test]
fn a_change_lands_on_its_own_lines_when_the_branch_moved_above_a_look_alike() {
    let env = repo();
    // Two sections alike, longer than a patch's context.
    let section = "begin\n  step 1\n  step 2\n  x = 1\n  step 3\n  step 4\nend\n";
    user_commits(&env, "flow.txt", &section.repeat(2));
    // The run changes the second section.
    script_preset(&env, "second", "sed -i '11s/x = 1/x = 2/' flow.txt");
    let id = finished(&env, "second");
    // Meanwhile the user adds as many lines above: the first section now
    // sits where the second was.
    let intro: String = (1..=7).map(|i| format!("intro {i}\n")).collect();
    user_commits(&env, "flow.txt", &format!("{intro}{}", section.repeat(2)));
    env.ok(&["merge", &id]);
    let merged = std::fs::read_to_string(env.project.join("flow.txt")).unwrap();
    let want = format!("{intro}{section}{}", section.replace("x = 1", "x = 2"));
    assert_eq!(merged, want, "the run's change landed on a look-alike section");
}

#[test]
fn a_merge_follows_no_git_setting_of_the_users() {
    let env = repo();
    for (key, value) in [("diff.noprefix", "true"), ("apply.whitespace", "fix"), ("diff.hex.textconv", "od -c")] {
        git(&env.project, &["config", key, value]);
    }
    user_commits(&env, ".gitattributes", "*.bin diff=hex\n");
    user_commits(&env, "data.bin", "raw\n");
    script_preset(
        &env,
        "edits",
        "mkdir -p src && printf 'spaced   \\n' > src/new.txt && printf 'cooked\\n' > data.bin",
    );
    let id = finished(&env, "edits");
    let diff = env.ok(&["diff", &id]);
    assert!(diff.contains("b/src/new.txt") && diff.contains("+cooked"), "{diff}");
    env.ok(&["merge", &id]);
    let files = git(&env.project, &["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.lines().any(|f| f == "src/new.txt"), "the new file was committed under another path: {files}");
    assert_eq!(git(&env.project, &["show", "HEAD:src/new.txt"]), "spaced   \n", "the content was changed");
    assert_eq!(git(&env.project, &["show", "HEAD:data.bin"]), "cooked\n", "a textconv'd text was committed");
    assert_eq!(std::fs::read_to_string(env.project.join("data.bin")).unwrap(), "cooked\n");
}

#[test]
fn merge_reply_merge_takes_exactly_the_follow_ups_work() {
    let env = repo();
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "worktree: true\n");
    let log = env.project.join("turns.log");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_WRITE", "notes.txt")];
    let id = env.launch_env("talk", "first line", &vars);
    assert_eq!(env.wait_end(&id)["status"], "completed");
    env.ok(&["merge", &id]);
    assert_eq!(std::fs::read_to_string(env.project.join("notes.txt")).unwrap(), "first line\n");
    let out = env.ok(&["reply", &id, "second line", "--wait"]);
    assert!(out.contains("completed"), "{out}");
    // What is not merged yet: the follow-up alone.
    let diff = env.ok(&["diff", &id]);
    assert!(diff.contains("+second line") && !diff.contains("+first line"), "{diff}");
    let out = env.corral(&["merge", &id]);
    assert!(out.status.success(), "the follow-up was refused: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(env.project.join("notes.txt")).unwrap(), "first line\nsecond line\n");
    let last = git(&env.project, &["show", "--format=", "HEAD", "--", "notes.txt"]);
    assert!(last.contains("+second line") && !last.contains("+first line"), "{last}");
    // Nothing left to merge.
    let again = env.corral(&["merge", &id]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to merge"));
}

#[test]
fn a_repository_the_agent_made_in_its_worktree_is_refused_and_never_judged_merged() {
    let env = repo();
    let id = {
        script_preset(
            &env,
            "clone",
            "git init -q inner && echo patched > inner/f && git -C inner add f && \
             git -C inner -c user.name=a -c user.email=a@a commit -qm x && echo note > note.txt",
        );
        finished(&env, "clone")
    };
    let before = repo_state(&env);
    refused(&env, &["merge", &id], "repositories inside its worktree");
    refused(&env, &["merge", &id, "--no-squash"], "repositories inside its worktree");
    assert_eq!(repo_state(&env), before);
    let said = env.ok(&["rm", &id]);
    assert!(said.contains("kept") && said.contains("inner"), "the agent's repository would be deleted: {said}");
    let kept = env.project.parent().unwrap().join("corral-home/worktrees").join(&id).join("inner/f");
    assert!(kept.exists(), "{}", kept.display());
}

#[test]
fn a_squash_merge_that_cannot_update_the_users_files_changes_nothing() {
    let env = repo();
    user_commits(&env, ".gitignore", ".corral/\n*.log\n");
    // The run replaces the folder sub/ by a link.
    script_preset(&env, "relink", "rm -r sub && ln -s tracked.txt sub");
    let id = finished(&env, "relink");
    // A file of the user's, not tracked, in that folder: the merge cannot
    // replace it without losing the file.
    std::fs::write(env.project.join("sub/draft.md"), "mine\n").unwrap();
    let before = repo_state(&env);
    let out = env.corral(&["merge", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(repo_state(&env), before, "a refused merge changed the user's tree");
    assert_eq!(std::fs::read_to_string(env.project.join("sub/keep.txt")).unwrap(), "keep\n");
    assert_eq!(std::fs::read_to_string(env.project.join("sub/draft.md")).unwrap(), "mine\n");
    // Moved away, the merge is git's own: the folder is the link, all clean.
    std::fs::remove_file(env.project.join("sub/draft.md")).unwrap();
    env.ok(&["merge", &id]);
    assert!(env.project.join("sub").symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(git(&env.project, &["status", "--porcelain"]), "");
}

#[test]
fn no_squash_merges_only_the_runs_own_commits_and_never_stashes() {
    let env = repo();
    // A branch with a commit nobody reviewed; the run starts from it.
    git(&env.project, &["switch", "-q", "-c", "feature"]);
    user_commits(&env, "unreviewed.txt", "feature work\n");
    git(&env.project, &["switch", "-q", "main"]);
    let out = launch_in(&env, &env.project.join("sub"), &["launch", "edit", "x", "--base", "feature"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(env.wait_end(&id)["status"], "completed");
    let before = repo_state(&env);
    refused(&env, &["merge", &id, "--no-squash"], "does not hold");
    assert_eq!(repo_state(&env), before);
    assert!(!env.project.join("unreviewed.txt").exists());
    // The squash takes the run's change alone.
    env.ok(&["merge", &id]);
    assert!(!env.project.join("unreviewed.txt").exists(), "the squash brought the base's commits");

    // merge.autoStash: never a stash of the user's edit.
    script_preset(
        &env,
        "append",
        "echo more >> tracked.txt && git add tracked.txt && git -c user.name=a -c user.email=a@a commit -qm run",
    );
    let id = finished(&env, "append");
    git(&env.project, &["config", "merge.autoStash", "true"]);
    let edited = format!("{}mine\n", std::fs::read_to_string(env.project.join("tracked.txt")).unwrap());
    std::fs::write(env.project.join("tracked.txt"), &edited).unwrap();
    let out = env.corral(&["merge", &id, "--no-squash"]);
    assert!(!out.status.success(), "merged over the user's uncommitted edit");
    assert_eq!(std::fs::read_to_string(env.project.join("tracked.txt")).unwrap(), edited);
    assert_eq!(git(&env.project, &["stash", "list"]), "", "the user's edit was stashed");
}

#[test]
fn the_repositorys_hooks_judge_a_merge() {
    use std::os::unix::fs::PermissionsExt;
    let env = repo();
    let hooks = env.project.join(".git/hooks");
    let hook = |name: &str, text: &str| {
        std::fs::write(hooks.join(name), text).unwrap();
        std::fs::set_permissions(hooks.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    hook(
        "pre-commit",
        "#!/bin/sh\nif git diff --cached --name-only | grep -q secret; then echo 'secret scanner: secret.txt holds a key'; exit 1; fi\n",
    );
    hook("commit-msg", "#!/bin/sh\nprintf '\\nReviewed-by: hook\\n' >> \"$1\"\n");
    script_preset(&env, "leak", "echo 'AKIA...' > secret.txt");
    let leak = finished(&env, "leak");
    let before = repo_state(&env);
    let out = env.corral(&["merge", &leak]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a file the hook refuses landed on main");
    assert!(err.contains("pre-commit hook refused") && err.contains("secret scanner"), "{err}");
    assert_eq!(repo_state(&env), before);
    let id = finished_edit(&env);
    env.ok(&["merge", &id]);
    let message = git(&env.project, &["log", "-1", "--format=%B"]);
    assert!(message.contains("Reviewed-by: hook"), "the commit-msg hook never ran: {message}");
}

#[test]
fn a_worktree_is_the_runs_and_nothing_of_it_stays_in_the_users_git() {
    let env = repo();
    // Untracked files of the run are not written into the user's .git.
    let unique = format!("unique content {}\n", std::process::id());
    script_preset(&env, "loose", &format!("printf '{}' > loose.txt", unique.trim_end()));
    let id = finished(&env, "loose");
    let hash = {
        let mut child = Command::new("git")
            .arg("-C")
            .arg(&env.project)
            .args(["hash-object", "--stdin"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), unique.trim_end().as_bytes()).unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string()
    };
    env.ok(&["diff", &id]);
    let stored = Command::new("git").arg("-C").arg(&env.project).args(["cat-file", "-e", &hash]).status().unwrap();
    assert!(!stored.success(), "the run's untracked file was written into the user's .git");
    env.ok(&["discard", &id]);

    // A run working in another run's worktree keeps it.
    let parent = finished_edit(&env);
    let release = global_slow_preset(&env);
    let folder = env.show(&parent)["worktree"]["path"].as_str().unwrap().to_string();
    let child = env.ok(&["launch", "slow", "x", "--cwd", &folder, "--no-worktree"]).trim().to_string();
    env.wait_run(&child, Duration::from_secs(20), |r| r["status"] == "running");
    let out = env.corral(&["discard", &parent]);
    assert!(!out.status.success(), "discard removed a worktree a run works in");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("run {child} works in")));
    assert!(Path::new(&folder).is_dir());
    std::fs::write(&release, "").unwrap();
    env.wait_end(&child);

    // A merged run is merged by its record, whatever main became since.
    let id = finished_edit(&env);
    env.ok(&["merge", &id]);
    user_commits(&env, "tracked.txt", "one\ntwo\nlater edit of mine\n");
    let said = env.ok(&["rm", &id]);
    assert!(!said.contains("kept"), "a merged run's worktree was kept: {said}");

    // A worktree run from a folder that is not committed is refused at once.
    std::fs::create_dir_all(env.project.join("draft")).unwrap();
    let out = launch_in(&env, &env.project.join("draft"), &["launch", "edit", "x"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not in commit"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_squash_merge_equals_gits_own_merge_squash_of_the_runs_branch() {
    let env = repo();
    let seed =
        std::env::var("CORRAL_MERGE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let files = ["a.txt", "b.txt", "c.txt"];
    let lines = |rng: &mut fastrand::Rng| (0..12).map(|i| format!("line {i} {}\n", rng.u8(..))).collect::<Vec<_>>();
    let edit = |rng: &mut fastrand::Rng, text: &[String], who: &str| {
        let mut text = text.to_vec();
        for _ in 0..rng.usize(1..=2) {
            let at = rng.usize(..text.len());
            match rng.u8(..3) {
                0 => text[at] = format!("{who} changed {}\n", rng.u16(..)),
                1 => text.insert(at, format!("{who} added {}\n", rng.u16(..))),
                _ => {
                    text.remove(at);
                }
            }
        }
        text.concat()
    };
    let mut base: Vec<Vec<String>> = files.iter().map(|_| lines(&mut rng)).collect();
    for (file, text) in files.iter().zip(&base) {
        user_commits(&env, file, &text.concat());
    }
    let staging = env.project.parent().unwrap().join("run-files");
    for round in 0..8 {
        // The run's edits, committed on its branch by the agent.
        std::fs::create_dir_all(&staging).unwrap();
        let theirs: Vec<String> = base.iter().map(|t| edit(&mut rng, t, "run")).collect();
        for (file, text) in files.iter().zip(&theirs) {
            std::fs::write(staging.join(file), text).unwrap();
        }
        let script = format!(
            "cp {}/*.txt . && git add -A . && git -c user.name=a -c user.email=a@a commit -qm 'run {round}'",
            staging.display()
        );
        script_preset(&env, "random", &script);
        let id = finished(&env, "random");
        // Meanwhile, the user's own edits.
        let ours: Vec<String> = base.iter().map(|t| edit(&mut rng, t, "user")).collect();
        for (file, text) in files.iter().zip(&ours) {
            std::fs::write(env.project.join(file), text).unwrap();
        }
        git(&env.project, &["commit", "-qam", &format!("user {round}")]);
        // git's own squash merge, in a clone.
        let clone = env.project.parent().unwrap().join(format!("clone-{round}"));
        let ok = |args: &[&str]| Command::new("git").args(args).output().unwrap();
        ok(&["clone", "-q", env.project.to_str().unwrap(), clone.to_str().unwrap()]);
        let branch = format!("corral/{id}");
        ok(&["-C", clone.to_str().unwrap(), "fetch", "-q", env.project.to_str().unwrap(), &branch]);
        let squash = ok(&[
            "-C",
            clone.to_str().unwrap(),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "--squash",
            "FETCH_HEAD",
        ]);
        let out = env.corral(&["merge", &id]);
        let context = format!("seed {seed} round {round}: set CORRAL_MERGE_SEED={seed} to replay");
        if squash.status.success() {
            assert!(
                out.status.success(),
                "{context}: git merged, Corral refused: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let expected = String::from_utf8(ok(&["-C", clone.to_str().unwrap(), "write-tree"]).stdout).unwrap();
            let got = git(&env.project, &["rev-parse", "HEAD^{tree}"]);
            assert_eq!(got.trim(), expected.trim(), "{context}: Corral's merge differs from git's");
        } else {
            assert!(!out.status.success(), "{context}: git conflicted, Corral merged");
            assert!(String::from_utf8_lossy(&out.stderr).contains("conflicts"), "{context}");
        }
        base = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(env.project.join(f)).unwrap();
                text.lines().map(|l| format!("{l}\n")).collect()
            })
            .collect();
        env.ok(&["discard", &id]);
    }
}

#[test]
fn a_childs_worktree_outlives_its_parents_and_every_printed_command_names_a_folder_that_exists() {
    let env = repo();
    let parent = finished_edit(&env);
    env.ok(&["merge", &parent]);
    // A run launched in the parent's worktree, with a worktree of its own.
    let child_preset = "---\nname: deeper\ndescription: d\nagent: command\ncommand: [sh, -c, 'echo child > child.txt']\nworktree: true\n---\n";
    env.preset_file(env.home.join("presets"), "deeper.md", child_preset);
    let folder = env.show(&parent)["worktree"]["path"].as_str().unwrap().to_string();
    let child = env.ok(&["launch", "deeper", "x", "--cwd", &folder]).trim().to_string();
    assert_eq!(env.wait_end(&child)["status"], "completed");
    let said = env.ok(&["rm", &parent]);
    assert!(!said.contains("kept"), "{said}");
    assert!(!Path::new(&folder).exists());
    let child_folder = env.show(&child)["worktree"]["path"].as_str().unwrap().to_string();
    assert_eq!(
        git(Path::new(&child_folder), &["status", "--porcelain"]),
        "?? child.txt\n",
        "the child's worktree broke"
    );
    let said = env.ok(&["rm", &child]);
    assert!(said.contains("kept"), "{said}");
    for folder in said.split("git -C ").skip(1).map(|rest| rest.split_whitespace().next().unwrap()) {
        assert!(Path::new(folder).is_dir(), "a printed command names {folder}, which does not exist: {said}");
    }
}

/// An edit of the same size made in the second the worktree was made (a
/// quick command changing one word) is seen: `diff` shows it and `rm`
/// keeps the worktree that holds it. A snapshot's copy of the index once
/// carried a new time, so git took the file for unchanged, and `rm`
/// deleted the run's only work.
#[test]
fn a_same_size_edit_made_at_once_is_seen_and_never_removed() {
    let env = repo();
    std::fs::write(env.project.join("tracked.txt"), "AAA\n").unwrap();
    git(&env.project, &["commit", "-qam", "three letters"]);
    env.command_preset_with("swap", &["sh", "-c", "echo \"$CORRAL_TASK\" > tracked.txt"], "worktree: true\n");
    for _ in 0..3 {
        let id = env.launch("swap", "R1R");
        env.wait_end(&id);
        let stat = env.ok(&["diff", &id, "--stat"]);
        assert!(stat.contains("tracked.txt"), "the edit was missed: {stat}");
        let worktree = std::path::PathBuf::from(env.show(&id)["worktree"]["path"].as_str().unwrap());
        let removed = env.corral(&["rm", &id]);
        let said = String::from_utf8_lossy(&removed.stdout).to_string() + &String::from_utf8_lossy(&removed.stderr);
        let kept = std::fs::read_to_string(worktree.join("tracked.txt")).ok();
        assert_eq!(kept.as_deref(), Some("R1R\n"), "rm removed the run's only work: {said}");
        assert!(said.contains("kept"), "{said}");
        git(&env.project, &["worktree", "remove", "--force", worktree.to_str().unwrap()]);
    }
}

/// `corral wait` returns at a run's end; its processes may take a moment
/// more to go. A merge typed right after waits that moment (told by the
/// store) rather than refuse, as a user scripting `launch --wait` then
/// `merge` expects.
#[test]
fn a_merge_right_after_wait_waits_for_the_runs_last_processes() {
    let env = repo();
    // The agent leaves a child behind: the run ends when the agent exits,
    // its processes are gone once the child is stopped.
    env.command_preset_with(
        "lingers",
        &["sh", "-c", "echo \"$CORRAL_TASK\" > lingered.txt; sleep 30 &"],
        "worktree: true\n",
    );
    for n in 0..2 {
        let launched = env.json(&["launch", "lingers", "--wait", &format!("change {n}")]);
        let id = launched["id"].as_str().unwrap();
        let merged = env.corral(&["merge", id]);
        assert!(
            merged.status.success(),
            "merge right after the run's end: {}",
            String::from_utf8_lossy(&merged.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(env.project.join("lingered.txt")).unwrap(), "change 1\n");
}
