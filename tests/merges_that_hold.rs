//! Merges that take back only what they made, as a user meets them through
//! the CLI with a real repository: a set lands whole or not at all, so a
//! refusal undoes nothing of anyone else's (the user's commit, another
//! merge); two merges of one repository never interleave; nothing is
//! merged from a worktree a run still writes; the same change twice and
//! pairs judged on the branch are said before anything is merged.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{git, Env};

const LIMIT: Duration = Duration::from_secs(30);

/// A repository on `main` with one committed file, `notes.txt`, of five
/// lines.
fn repo() -> Env {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join("notes.txt"), "l1\nl2\nl3\nl4\nl5\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    env
}

/// Runs of a preset adding a file named by their task, each ended.
fn adding(env: &Env, tasks: &[&str]) -> Vec<String> {
    env.command_preset_with("add", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    let ids: Vec<String> = tasks.iter().map(|task| env.launch("add", task)).collect();
    for id in &ids {
        assert_eq!(env.wait_end(id)["status"], "completed");
    }
    ids
}

/// A `pre-commit` hook that, the `at`-th time it runs, says so in a file
/// and waits for `release` to exist, then exits `code`; any other time it
/// passes. Returns (the file it says it waits in, the release file).
fn waiting_hook(env: &Env, at: u32, code: i32) -> (PathBuf, PathBuf) {
    let dir = env.project.parent().unwrap();
    let (count, waiting, release) = (dir.join("hook.count"), dir.join("hook.waiting"), dir.join("hook.release"));
    let script = format!(
        "#!/bin/sh\nn=$(cat {c} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {c}\n\
         if [ \"$n\" = {at} ]; then touch {w}; while [ ! -e {r} ]; do sleep 0.05; done; exit {code}; fi\nexit 0\n",
        c = count.display(),
        w = waiting.display(),
        r = release.display()
    );
    let hook = env.project.join(".git/hooks/pre-commit");
    std::fs::write(&hook, script).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (waiting, release)
}

fn spawn_merge(env: &Env, ids: &[&str]) -> Child {
    let mut args = vec!["merge"];
    args.extend(ids);
    env.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finished(child: Child) -> (bool, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Item 1: `merge A B` refused at B (its hook says no) while the user
/// commits and another `corral merge X` is asked for meanwhile: nothing of
/// the set lands, the user's commit stays, X merges after the set (it
/// waits for the repository's merge lock) and stays merged with its file.
#[test]
fn a_refused_set_undoes_nothing_of_the_users_or_another_merges() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a", "b", "x"]);
    let (waiting, release) = waiting_hook(&env, 2, 1);
    let set = spawn_merge(&env, &[&ids[0], &ids[1]]);
    assert!(common::eventually(LIMIT, || waiting.exists()), "the set never reached its second hook");
    // The user commits meanwhile, and asks for another merge.
    std::fs::write(p.join("mine.txt"), "precious\n").unwrap();
    git(p, &["add", "mine.txt"]);
    git(p, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "mine"]);
    let mine = git(p, &["rev-parse", "HEAD"]);
    let other = spawn_merge(&env, &[&ids[2]]);
    std::fs::write(&release, "").unwrap();
    let (ok, said) = finished(set);
    assert!(!ok, "{said}");
    assert!(said.contains(&format!("run {} cannot be merged after {}", ids[1], ids[0])), "{said}");
    assert!(said.contains("none of them is merged"), "{said}");
    let (ok, said) = finished(other);
    assert!(ok, "the other merge: {said}");
    // The user's commit is under X's merge; the set's files never landed.
    assert_eq!(git(p, &["rev-parse", "HEAD^"]), mine, "the user's commit was taken back");
    assert_eq!(std::fs::read_to_string(p.join("mine.txt")).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(p.join("x.txt")).unwrap(), "mine\n");
    assert!(!p.join("a.txt").exists() && !p.join("b.txt").exists());
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "the checkout is as the branch");
    assert!(!env.show(&ids[2])["worktree"]["merged"].is_null(), "X not recorded merged");
    for id in &ids[..2] {
        assert!(env.show(id)["worktree"]["merged"].is_null(), "{id} recorded merged");
    }
    // X is merged: `rm` takes its worktree as merged work, and its file stays.
    env.ok(&["rm", &ids[2]]);
    assert!(p.join("x.txt").exists());
}

/// Item 2: the same run merged twice at once (a retried MCP `merge_run`,
/// the window and the CLI): one merges, the other says there is nothing
/// to merge, and the checkout holds the merge's files, nothing staged.
#[test]
fn two_merges_of_one_run_at_once_merge_it_once_and_leave_its_files() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a"]);
    let (waiting, release) = waiting_hook(&env, 1, 0);
    let first = spawn_merge(&env, &[&ids[0]]);
    assert!(common::eventually(LIMIT, || waiting.exists()), "the first merge never reached its hook");
    let second = spawn_merge(&env, &[&ids[0]]);
    std::fs::write(&release, "").unwrap();
    let (a, said_a) = finished(first);
    let (b, said_b) = finished(second);
    assert!(a && !b, "one merges, one is refused: {said_a} / {said_b}");
    assert!(said_b.contains("nothing to merge"), "{said_b}");
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "mine\n");
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "the merge's files were taken back or staged");
    assert_eq!(git(p, &["rev-list", "--count", "HEAD"]).trim(), "2");
}

/// Item 4: nothing is merged from a worktree in which another run is
/// active (a helper launched there): refused, and said; once it ends, the
/// merge goes in.
#[test]
fn a_worktree_a_run_still_writes_in_is_not_merged() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a"]);
    let folder = env.show(&ids[0])["worktree"]["path"].as_str().unwrap().to_string();
    let gate = p.parent().unwrap().join("helper.gate");
    let script =
        format!("echo half > half.txt; while [ ! -e {} ]; do sleep 0.05; done; echo whole > half.txt", gate.display());
    // The user's own preset: the worktree has no project presets.
    let argv = serde_json::to_string(&["sh", "-c", &script]).unwrap();
    let preset = format!("---\nname: helper\ndescription: a helper\nagent: command\ncommand: {argv}\n---\n");
    std::fs::create_dir_all(env.home.join("presets")).unwrap();
    std::fs::write(env.home.join("presets/helper.md"), preset).unwrap();
    let helper = env.ok(&["launch", "helper", "write", "--cwd", &folder]).trim().to_string();
    assert!(common::eventually(LIMIT, || Path::new(&folder).join("half.txt").exists()), "the helper never wrote");
    let head = git(p, &["rev-parse", "HEAD"]);
    let out = env.corral(&["merge", &ids[0]]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "merged while a run writes there");
    assert!(err.contains(&format!("run {helper} works in the worktree of run {}", ids[0])), "{err}");
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "nothing merged");
    std::fs::write(&gate, "").unwrap();
    env.wait_end(&helper);
    env.ok(&["merge", &ids[0]]);
    assert_eq!(std::fs::read_to_string(p.join("half.txt")).unwrap(), "whole\n");
}

/// Item 5: two runs with the same change are said by `conflicts`, and a
/// merge of both is refused before anything is merged: no commit, no
/// `post-commit` hook run.
#[test]
fn the_same_change_twice_is_said_before_anything_is_merged() {
    let env = repo();
    let p = &env.project;
    env.command_preset_with("same", &["sh", "-c", "echo same > same.txt"], "worktree: true\n");
    let ids: Vec<String> = (0..2).map(|_| env.launch("same", "the same")).collect();
    for id in &ids {
        env.wait_end(id);
    }
    let out = env.corral(&["conflicts", &ids[0], &ids[1]]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("{} × {}: the same change (same.txt)", ids[0], ids[1])), "{said}");
    let ran = p.parent().unwrap().join("post-commit.ran");
    let hook = p.join(".git/hooks/post-commit");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let head = git(p, &["rev-parse", "HEAD"]);
    let out = env.corral(&["merge", &ids[0], &ids[1]]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&format!("run {} makes only the change run {} makes", ids[1], ids[0])), "{err}");
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "nothing merged");
    assert!(!ran.exists(), "a post-commit hook ran for a merge that was taken back");
    // One of them merges alone.
    env.ok(&["merge", &ids[0]]);
    assert!(ran.exists());
}

/// Item 6: after A is merged, B (launched after, from the branch holding
/// A's change) edits A's file, and A's follow-up adds to it: judged as
/// they would merge, on the branch, they do not conflict, and merge
/// together.
#[test]
fn pairs_are_judged_on_the_branch_not_from_an_old_base() {
    let env = repo();
    let p = &env.project;
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "worktree: true\n");
    let log = p.parent().unwrap().join("turns.log");
    let vars = [("CONVERSE_LOG", log.to_str().unwrap()), ("CONVERSE_WRITE", "notes.txt")];
    let a = env.launch_env("talk", "first line", &vars);
    assert_eq!(env.wait_end(&a)["status"], "completed");
    env.ok(&["merge", &a]);
    env.command_preset_with("edit", &["sh", "-c", "sed -i 's/l1/L1 by B/' notes.txt"], "worktree: true\n");
    let b = env.launch("edit", "edit");
    env.wait_end(&b);
    let out = env.ok(&["reply", &a, "second line", "--wait"]);
    assert!(out.contains("completed"), "{out}");
    let out = env.corral(&["conflicts", &a, &b]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let merged = env.ok(&["merge", &a, &b]);
    assert!(merged.contains(&format!("{a}  merged into main")) && merged.contains(&format!("{b}  merged into main")));
    assert_eq!(
        std::fs::read_to_string(p.join("notes.txt")).unwrap(),
        "L1 by B\nl2\nl3\nl4\nl5\nfirst line\nsecond line\n"
    );
}
