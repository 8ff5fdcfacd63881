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

/// A hostile hour's finding: the user switches branch while a merge's hook
/// runs: the merge is refused, and neither branch takes it.
#[test]
fn a_branch_switched_during_a_merge_takes_nothing_of_it() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a"]);
    let (waiting, release) = waiting_hook(&env, 1, 0);
    let head = git(p, &["rev-parse", "HEAD"]);
    let merging = spawn_merge(&env, &[&ids[0]]);
    assert!(common::eventually(LIMIT, || waiting.exists()), "the merge never reached its hook");
    git(p, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(&release, "").unwrap();
    let (ok, said) = finished(merging);
    assert!(!ok && said.contains("switched away from main"), "{said}");
    assert_eq!(git(p, &["rev-parse", "feature"]), head, "the merge landed on the branch switched to");
    assert_eq!(git(p, &["rev-parse", "main"]), head);
    assert!(env.show(&ids[0])["worktree"]["merged"].is_null());
}

/// A hostile hour's finding: a link to the checkout put where a run's
/// worktree was: its teardown runs in a folder of the run's own, never
/// through the link in the user's checkout.
#[test]
fn a_teardown_never_follows_a_link_put_where_the_worktree_was() {
    let env = repo();
    let p = &env.project;
    let marker = p.parent().unwrap().join("teardown.pwd");
    let teardown = format!("teardown: [\"sh\", \"-c\", \"pwd > {}; rm -f notes.txt\"]\n", marker.display());
    env.command_preset_with("td", &["sh", "-c", "echo x > x.txt"], &format!("worktree: true\n{teardown}"));
    let id = env.launch("td", "x");
    env.wait_end(&id);
    let folder = std::path::PathBuf::from(env.show(&id)["worktree"]["path"].as_str().unwrap());
    std::fs::rename(&folder, folder.with_extension("moved")).unwrap();
    std::os::unix::fs::symlink(p, &folder).unwrap();
    let _ = env.corral(&["discard", &id]);
    assert!(p.join("notes.txt").exists(), "the teardown deleted a file of the user's checkout");
    let ran_in = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(!ran_in.trim().starts_with(&p.display().to_string()), "ran in the checkout: {ran_in}");
}

/// A hostile hour's finding: a run that ended while a process of it still
/// writes in its worktree is not merged until that process is gone.
#[test]
fn a_run_whose_processes_are_still_stopping_is_not_merged() {
    let env = repo();
    let p = &env.project;
    let gate = p.parent().unwrap().join("late.gate");
    let script = format!(
        "echo first >> notes.txt; (setsid sh -c 'trap \"\" TERM; while [ ! -e {g} ]; do sleep 0.05; done; echo late >> notes.txt' \
         </dev/null >/dev/null 2>&1 &); exit 0",
        g = gate.display()
    );
    env.command_preset_with("lingers", &["sh", "-c", &script], "worktree: true\n");
    let id = env.launch("lingers", "x");
    env.wait_run(&id, LIMIT, |r| r["status"] == "completed");
    // A merge typed now waits for the run's processes to be gone (its stop
    // sequence ends them); if they outlast that, it is refused, and merged
    // once they are gone. Never while they may still write.
    let out = env.corral(&["merge", &id]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("still being stopped"), "{err}");
        std::fs::write(&gate, "").unwrap();
        env.wait_run(&id, LIMIT, |r| !r["exited_at"].is_null());
        env.ok(&["merge", &id]);
    }
    assert!(!env.show(&id)["exited_at"].is_null(), "merged before the run's processes were gone");
    std::fs::write(&gate, "").unwrap();
    let merged = git(p, &["show", "HEAD:notes.txt"]);
    let there = std::fs::read_to_string(
        std::path::Path::new(env.show(&id)["worktree"]["path"].as_str().unwrap()).join("notes.txt"),
    )
    .unwrap();
    assert_eq!(merged, there, "merged what was still being written");
}

/// A hostile hour's finding: a helper launched in a run's worktree through
/// a link to it keeps the merge off as one launched at its real path does.
#[test]
fn a_helper_in_a_worktree_through_a_link_keeps_the_merge_off() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a"]);
    let folder = env.show(&ids[0])["worktree"]["path"].as_str().unwrap().to_string();
    let link = p.parent().unwrap().join("wlink");
    std::os::unix::fs::symlink(&folder, &link).unwrap();
    let gate = p.parent().unwrap().join("helper.gate");
    let script = format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display());
    let argv = serde_json::to_string(&["sh", "-c", &script]).unwrap();
    std::fs::create_dir_all(env.home.join("presets")).unwrap();
    std::fs::write(
        env.home.join("presets/helper.md"),
        format!("---\nname: helper\ndescription: a helper\nagent: command\ncommand: {argv}\n---\n"),
    )
    .unwrap();
    let helper = env.ok(&["launch", "helper", "x", "--cwd", link.to_str().unwrap()]).trim().to_string();
    env.wait_run(&helper, LIMIT, |r| r["status"] == "running");
    let out = env.corral(&["merge", &ids[0]]);
    assert!(!out.status.success(), "merged while a helper works there through a link");
    let out = env.corral(&["discard", &ids[0]]);
    assert!(!out.status.success(), "discarded while a helper works there through a link");
    std::fs::write(&gate, "").unwrap();
    env.wait_end(&helper);
    env.ok(&["merge", &ids[0]]);
}

/// A hostile hour's finding: a git of the user's holding the index (a
/// commit in its hooks) is waited for, as the README says.
#[test]
fn a_merge_waits_while_git_holds_the_index() {
    let env = repo();
    let p = &env.project;
    let ids = adding(&env, &["a"]);
    let lock = p.join(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let merging = spawn_merge(&env, &[&ids[0]]);
    // Held a while, then let go.
    assert!(!common::eventually(Duration::from_millis(700), || p.join("a.txt").exists()), "merged through a lock");
    std::fs::remove_file(&lock).unwrap();
    let (ok, said) = finished(merging);
    assert!(ok, "{said}");
    assert_eq!(std::fs::read_to_string(p.join("a.txt")).unwrap(), "mine\n");
}

/// A hostile hour's finding: a carried file the agent committed is never
/// shown as its work: `diff` names it without its content.
#[test]
fn a_carried_file_the_agent_committed_is_never_shown_as_its_work() {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n.env\n").unwrap();
    std::fs::write(p.join(".worktreeinclude"), ".env\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    std::fs::write(p.join(".env"), "API_TOKEN=supersecret123\n").unwrap();
    env.command_preset_with(
        "sneak",
        &[
            "sh",
            "-c",
            "echo work > work.txt; git add -f .env work.txt; git -c user.name=a -c user.email=a@b commit -qm sneak",
        ],
        "worktree: true\n",
    );
    let id = env.launch("sneak", "x");
    env.wait_end(&id);
    let diff = env.ok(&["diff", &id]);
    assert!(!diff.contains("supersecret123"), "{diff}");
    assert!(diff.contains("work.txt") && diff.contains(".env: carried in from your checkout"), "{diff}");
    let json = env.json(&["diff", &id]);
    assert!(!json.to_string().contains("supersecret123"), "{json:#}");
    assert_eq!(json["files"].as_array().unwrap().len(), 1, "{json:#}");
}

/// A first afternoon, item 3: the advice a conflict gives works as
/// written: the run's uncommitted work is on its branch, so `git merge
/// --squash corral/ID` brings it (and its conflict), never "Already up to
/// date".
#[test]
fn the_advice_a_conflict_gives_works_as_written() {
    let env = repo();
    let p = &env.project;
    env.command_preset_with("edit", &["sh", "-c", "sed -i 's/l3/L3 by the run/' notes.txt"], "worktree: true\n");
    let id = env.launch("edit", "x");
    env.wait_end(&id);
    std::fs::write(p.join("notes.txt"), "l1\nl2\nl3 by you\nl4\nl5\n").unwrap();
    git(p, &["commit", "-q", "-am", "mine"]);
    let out = env.corral(&["merge", &id]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && err.contains("conflicts with main"), "{err}");
    let advised = err.split('`').nth(1).expect("a command in backticks").to_string();
    let words: Vec<&str> = advised.split_whitespace().collect();
    assert_eq!(words[0], "git", "{advised}");
    let merged = std::process::Command::new("git").args(&words[1..]).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&merged.stdout), String::from_utf8_lossy(&merged.stderr));
    assert!(!said.contains("Already up to date"), "the advice did nothing: {said}");
    assert!(said.contains("CONFLICT"), "{said}");
}
