//! The sandbox against the agent inside it: each test is a way out a
//! hostile agent (an `agent: command` preset, or a prompt-injected agent's
//! shell) tried, through the CLI, and what a user would notice of it — the
//! attack's mark outside, a secret in a transcript, a moved branch — is
//! asserted absent. One test per class of escape.

mod common;

use std::path::Path;
use std::process::Command;

use common::Env;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The project as a repository with one commit (a Makefile) on `main`.
fn repository(env: &Env) {
    git(&env.project, &["init", "-q", "-b", "main"]);
    git(&env.project, &["config", "user.email", "u@example.com"]);
    git(&env.project, &["config", "user.name", "U"]);
    std::fs::write(env.project.join("Makefile"), "all:\n\techo user's\n").unwrap();
    git(&env.project, &["add", "."]);
    git(&env.project, &["commit", "-qm", "first"]);
}

fn has(said: &[String], line: &str) -> bool {
    said.iter().any(|l| l == line)
}

/// Class 1: a worktree run points its `.git` (or its worktree folder's
/// `commondir`) at a git folder of its own whose config names a program:
/// the shepherd's measuring and `corral diff` would run it as the user.
#[test]
fn a_worktree_run_cannot_point_corrals_git_at_a_repository_of_its_own() {
    let env = Env::new();
    repository(&env);
    let mark = env.user_home.join("fsmonitor-ran");
    let script = format!(
        r##"
evil = os.path.abspath("evil-git")
subprocess.run(["git", "init", "-q", "--bare", evil])
hook = os.path.join(evil, "monitor.sh")
open(hook, "w").write("#!/bin/sh\ntouch {mark}\n")
os.chmod(hook, 0o755)
subprocess.run(["git", "config", "-f", os.path.join(evil, "config"), "core.fsmonitor", hook])
for target, text in [(".git", "gitdir: " + evil + "\n")]:
    try:
        open(target, "w").write(text)
        print("rewrote", target, flush=True)
    except OSError as e:
        print("refused", target, e.strerror, flush=True)
own = open(".git").read().split(":", 1)[1].strip()
try:
    open(os.path.join(own, "commondir"), "w").write(evil + "\n")
    print("rewrote commondir", flush=True)
except OSError as e:
    print("refused commondir", e.strerror, flush=True)
open("work.txt", "w").write("mine\n")
"##,
        mark = mark.display()
    );
    let (id, run, said) =
        env.run_python_sandboxed("sly", "{write: [worktree], network: none}", "worktree: true\n", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "refused .git Read-only file system"), "{said:?}");
    assert!(has(&said, "refused commondir Read-only file system"), "{said:?}");
    let diff = env.ok(&["diff", &id]);
    assert!(diff.contains("work.txt"), "{diff}");
    assert!(!mark.exists(), "Corral's git ran the agent's fsmonitor as the user");
}

/// Class 1, where no sandbox stood in the way: a worktree whose `.git`
/// file names another repository is refused by Corral's git, not run.
#[test]
fn corrals_git_refuses_a_worktree_pointing_elsewhere() {
    let env = Env::new();
    repository(&env);
    let mark = env.user_home.join("fsmonitor-ran");
    let script = format!(
        r##"
evil = os.path.abspath("evil-git")
subprocess.run(["git", "init", "-q", evil])
hook = os.path.join(evil, ".git", "monitor.sh")
open(hook, "w").write("#!/bin/sh\ntouch {mark}\n")
os.chmod(hook, 0o755)
subprocess.run(["git", "-C", evil, "config", "core.fsmonitor", hook])
open(".git", "w").write("gitdir: " + os.path.join(evil, ".git") + "\n")
print("rewrote", flush=True)
"##,
        mark = mark.display()
    );
    env.command_preset_with(
        "loose",
        &["python3", "-c", &format!("import os, subprocess\n{script}")],
        "worktree: true\n",
    );
    let id = env.launch("loose", "go");
    env.wait_end(&id);
    let out = env.corral(&["diff", &id]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("does not point at its repository"), "{err}");
    assert!(!mark.exists(), "Corral's git ran the fsmonitor a run planted");
}

/// Class 2: a run that writes its project folder writes no git metadata:
/// not `commondir`, config or hooks, so the user's next `git` runs nothing
/// of the agent's.
#[test]
fn a_run_writing_its_project_writes_none_of_its_git_metadata() {
    let env = Env::new();
    repository(&env);
    let script = r##"
for name in ["commondir", "config.worktree", "hooks/pre-commit", "HEAD"]:
    try:
        open(os.path.join(".git", name), "w").write("x\n")
        print("wrote", name, flush=True)
    except OSError as e:
        print("refused", name, e.strerror, flush=True)
open("code.txt", "w").write("mine\n")
"##;
    let (_, run, said) = env.run_python_sandboxed("direct", "{write: [worktree], network: none}", "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    for name in ["commondir", "config.worktree", "hooks/pre-commit", "HEAD"] {
        assert!(has(&said, &format!("refused {name} Read-only file system")), "{name}: {said:?}");
    }
    assert!(!env.project.join(".git/commondir").exists());
    assert_eq!(std::fs::read_to_string(env.project.join("code.txt")).unwrap(), "mine\n");
    git(&env.project, &["status", "--short"]);
}

/// Class 3: a worktree run moves no other branch and rewrites no existing
/// object; what it commits on its own branch is merged, each object
/// checked, and an object whose content is not its name is refused.
#[test]
fn a_worktree_run_writes_its_own_branch_and_new_objects_only() {
    let env = Env::new();
    repository(&env);
    git(&env.project, &["branch", "other"]);
    let main_before = git(&env.project, &["rev-parse", "main"]);
    let makefile_blob = git(&env.project, &["rev-parse", "main:Makefile"]);
    let script = format!(
        r##"
common = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True, text=True).stdout.strip()
def attempt(what, f):
    try:
        f()
        print("did", what, flush=True)
    except OSError as e:
        print("refused", what, e.strerror, flush=True)
attempt("move main", lambda: open(os.path.join(common, "refs/heads/main"), "w").write("0" * 40 + "\n"))
attempt("new branch", lambda: open(os.path.join(common, "refs/heads/evil"), "w").write("0" * 40 + "\n"))
blob = os.path.join(common, "objects", "{fan}", "{rest}")
attempt("overwrite object", lambda: open(blob, "wb").write(b"x"))
r = subprocess.run(["git", "update-ref", "refs/heads/other", "HEAD~0"], capture_output=True, text=True)
print("update-ref other", r.returncode, flush=True)
open("feature.txt", "w").write("feature\n")
subprocess.run(["git", "add", "feature.txt"])
r = subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=A", "commit", "-qm", "agent's"], capture_output=True, text=True)
print("commit", r.returncode, r.stderr.strip(), flush=True)
"##,
        fan = &makefile_blob[..2],
        rest = &makefile_blob[2..]
    );
    let (id, run, said) =
        env.run_python_sandboxed("brancher", "{write: [worktree], network: none}", "worktree: true\n", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "refused move main Read-only file system"), "{said:?}");
    assert!(has(&said, "refused new branch Read-only file system"), "{said:?}");
    assert!(has(&said, "refused overwrite object Read-only file system"), "{said:?}");
    assert!(said.iter().any(|l| l.starts_with("update-ref other ") && l != "update-ref other 0"), "{said:?}");
    assert!(said.iter().any(|l| l.starts_with("commit 0")), "the agent commits on its own branch: {said:?}");
    assert_eq!(git(&env.project, &["rev-parse", "main"]), main_before);
    assert_eq!(git(&env.project, &["show", "main:Makefile"]), "all:\n\techo user's");
    // Its commit is merged: its objects copied into the repository.
    env.ok(&["merge", &id, "--no-squash"]);
    assert_eq!(git(&env.project, &["show", "main:feature.txt"]), "feature");
}

/// Class 3, the object store: an object the agent wrote whose content is
/// not what its name says is refused at the merge, never copied in.
#[test]
fn a_forged_object_is_refused_at_the_merge() {
    let env = Env::new();
    repository(&env);
    let script = r##"
def out(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
store = os.environ["GIT_OBJECT_DIRECTORY"]
fake = subprocess.run(["git", "hash-object", "-w", "--stdin"], input="what the agent wrote\n", capture_output=True, text=True).stdout.strip()
named = subprocess.run(["git", "hash-object", "--stdin"], input="what the user will write\n", capture_output=True, text=True).stdout.strip()
os.makedirs(os.path.join(store, named[:2]), exist_ok=True)
os.replace(os.path.join(store, fake[:2], fake[2:]), os.path.join(store, named[:2], named[2:]))
tree = subprocess.run(["git", "mktree"], input=f"100644 blob {named}\tlater.txt\n", capture_output=True, text=True).stdout.strip()
head = out("rev-parse", "HEAD")
commit = subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=A", "commit-tree", tree, "-p", head, "-m", "f"], capture_output=True, text=True).stdout.strip()
r = subprocess.run(["git", "update-ref", "HEAD", commit], capture_output=True, text=True)
print("forged", r.returncode, flush=True)
subprocess.run(["git", "reset", "-q", "--hard"])
"##;
    let (id, run, said) =
        env.run_python_sandboxed("forger", "{write: [worktree], network: none}", "worktree: true\n", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "forged 0"), "{said:?}");
    let out = env.corral(&["merge", &id, "--no-squash"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("is not what its name says"), "{err}");
    let named = Command::new("git")
        .args(["hash-object", "--stdin"])
        .current_dir(&env.project)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"what the user will write\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let named = String::from_utf8_lossy(&named.stdout).trim().to_string();
    assert!(!env.project.join(".git/objects").join(&named[..2]).join(&named[2..]).exists());
}

/// Classes 4-6: the broker's `corral` acts only within the caller's tree:
/// no `--parent` of another's, no file read outside for `--task-file`, no
/// reply, abort, pause or resume of a run that is not its own.
#[test]
fn a_sandboxed_agents_corral_reaches_only_its_own_runs_and_reads_as_the_agent() {
    let env = Env::new();
    std::fs::create_dir_all(env.user_home.join(".ssh")).unwrap();
    std::fs::write(env.user_home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    env.command_preset("idle", &["sh", "-c", "sleep 30"]);
    env.command_preset("echo", &["sh", "-c", "cat \"$CORRAL_TASK_FILE\""]);
    let other = env.launch("idle", "the user's own run");
    let script = format!(
        r##"
def corral(*args):
    r = subprocess.run(["corral", *args], capture_output=True, text=True)
    print(args[0], r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
corral("launch", "echo", "x", "--parent", "{other}")
corral("launch", "echo", "--task-file", os.path.expanduser("~/.ssh/id_ed25519"), "--json")
for verb in ["reply", "pause", "resume", "abort"]:
    corral(verb, "{other}", *(["hello"] if verb == "reply" else []))
corral("show", "{other}")
open("brief.md", "w").write("a brief of mine")
corral("launch", "echo", "--task-file", "brief.md", "--wait")
"##
    );
    let (_, run, said) = env.run_python_sandboxed("boxed", "{write: [worktree], network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    let line = |verb: &str| said.iter().filter(|l| l.starts_with(&format!("{verb} "))).cloned().collect::<Vec<_>>();
    let launches = line("launch");
    assert!(launches[0].starts_with("launch 2 ") && launches[0].contains("not one of yours"), "{launches:?}");
    assert!(!said.iter().any(|l| l.contains("PRIVATE KEY")), "a denied key came back as a task: {said:?}");
    assert!(launches[1].starts_with("launch 2 ") && launches[1].contains("cannot read the task file"), "{launches:?}");
    assert!(launches[2].starts_with("launch 0 ") && launches[2].contains("completed"), "{launches:?}");
    for verb in ["reply", "pause", "resume", "abort", "show"] {
        let got = line(verb);
        assert!(got.len() == 1 && got[0].contains("not one of yours"), "{verb}: {said:?}");
    }
    assert_eq!(env.show(&other)["status"], "running", "another run was acted on");
    env.ok(&["abort", &other]);
}

/// Class 7: another run's broker socket is not in a sandbox, and a
/// process outside the run is refused by the run's own.
#[test]
fn a_broker_serves_its_own_runs_processes_only() {
    let env = Env::new();
    let script = r##"
import time
print("runs seen", len(os.listdir(os.path.join(os.environ["CORRAL_HOME"], "runs"))), flush=True)
time.sleep(20)
"##;
    env.command_preset_with(
        "beside",
        &["python3", "-c", &format!("import os\n{script}")],
        "sandbox: {network: none}\n",
    );
    let first = env.launch("beside", "one");
    let second = env.launch("beside", "two");
    env.wait_run(&second, std::time::Duration::from_secs(20), |_| {
        env.said(&second).iter().any(|l| l.starts_with("runs seen"))
    });
    assert!(env.said(&second).iter().any(|l| l == "runs seen 1"), "{:?}", env.said(&second));
    // The test is no process of the run: connecting to its socket is refused.
    let socket = env.run_dir(&first).join("corral.sock");
    if corral::process::cgroup::run_of(std::process::id() as i32).is_none()
        && Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        let mut conn = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let mut answer = String::new();
        use std::io::Read;
        let _ = conn.read_to_string(&mut answer);
        assert!(answer.starts_with("refused ") && answer.contains("not one of its processes"), "{answer}");
    }
    env.ok(&["abort", &first, &second]);
}

/// Class 8: a `--worktree` child of a repository its sandbox may not read
/// is refused, and no other run's worktree is seen.
#[test]
fn a_worktree_child_reads_nothing_its_sandbox_hides() {
    let env = Env::new();
    repository(&env);
    let outside = env.user_home.join("secret-repo");
    std::fs::create_dir_all(&outside).unwrap();
    git(&outside, &["init", "-q", "-b", "main"]);
    std::fs::write(outside.join("secret.txt"), "hidden\n").unwrap();
    git(&outside, &["-c", "user.email=u@e", "-c", "user.name=U", "add", "."]);
    git(&outside, &["-c", "user.email=u@e", "-c", "user.name=U", "commit", "-qm", "s"]);
    // A global preset: the child runs in the other repository.
    env.preset_file(
        env.home.join("presets"),
        "reader.md",
        "---\nname: reader\ndescription: reads\nagent: command\ncommand: [sh, -c, cat secret.txt]\n---\n",
    );
    let script = format!(
        r##"
r = subprocess.run(["corral", "launch", "reader", "x", "--worktree", "--cwd", "{outside}", "--wait"], capture_output=True, text=True)
print("child", r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
"##,
        outside = outside.display()
    );
    // The folder is read, a file of it is not: a worktree would hold it.
    // (Shown by `home:`, as the home is by allow-list.)
    let sandbox = format!(
        "\n  read: deny ['{}']\n  home: ['{}']\n  network: none",
        outside.join("secret.txt").display(),
        outside.display()
    );
    let (_, run, said) = env.run_python_sandboxed("narrow", &sandbox, "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l.starts_with("child 2 ") && l.contains("may not read all of")), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("hidden")), "{said:?}");
}

/// Class 9: a written place holding Corral's data (`write: [~]` where the
/// data is in the home) does not make the store writable.
#[test]
fn a_written_place_holding_corrals_data_leaves_the_store_unseen() {
    let env = Env::new();
    let root = env.home.parent().unwrap().to_path_buf();
    let script = r##"
home = os.environ["CORRAL_HOME"]
print("store", os.path.exists(os.path.join(home, "corral.db")), flush=True)
try:
    open(os.path.join(home, "config.toml"), "a").write("\n[sandbox]\n")
    print("config written", flush=True)
except OSError as e:
    print("config refused", e.strerror, flush=True)
"##;
    let (_, run, said) =
        env.run_python_sandboxed("wide", &format!("{{write: ['{}'], network: none}}", root.display()), "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "store False"), "{said:?}");
    assert!(has(&said, "config refused Read-only file system"), "{said:?}");
}

/// Class 10: allow and continue on a refused `mkdir /made-up` allows that
/// folder, made, never `/`; `show` names what it would allow.
#[test]
fn allow_and_continue_widens_exactly_what_was_refused() {
    let env = Env::new();
    let made_up = format!("/corral-made-up-{}", std::process::id());
    let script = format!(
        r##"
subprocess.run(["mkdir", "{made_up}"])
r = subprocess.run(["touch", "/corral-root-{pid}"], capture_output=True, text=True)
print("root", r.returncode, flush=True)
"##,
        pid = std::process::id()
    );
    let (id, run, first) = env.run_python_sandboxed("maker", "{network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{first:?}");
    let shown = first.iter().find(|l| l.starts_with(&format!("sandbox refused writing {made_up}"))).cloned();
    let shown = shown.unwrap_or_else(|| panic!("{first:?}"));
    assert!(shown.ends_with(&format!("--write {made_up}")), "{shown}");
    // A command run has no session to go on in: the sandbox is widened,
    // the reply refused, and what was widened is the refused path alone.
    let replied = env.corral(&["reply", &id, "--allow-denied"]);
    let made = Path::new(&made_up).is_dir();
    let _ = std::fs::remove_dir(&made_up);
    let _ = std::fs::remove_file(format!("/corral-root-{}", std::process::id()));
    assert!(String::from_utf8_lossy(&replied.stderr).contains("allowed, but"), "{replied:?}");
    assert!(made, "the refused folder was made when allowed");
    let widened = env.store().sandbox_allows(&id).unwrap();
    assert_eq!(widened.write, vec![made_up.clone()], "only the refused folder is allowed, never /");
}

/// Class 10, a file: allow and continue on a refused new file directly
/// under the user's home (whose folder is too wide to allow) makes that
/// path an empty file, never a folder (the agent's retry would fail with
/// "Is a directory" and a stray folder stay), and allows it alone; a
/// sandbox that may write one file lets the agent write it. The refusal
/// is read in what the command printed to its stdout (gathered into events
/// of a size, which went unread for refusals).
#[test]
fn allow_and_continue_on_a_new_file_under_the_home_makes_a_file() {
    let env = Env::new();
    std::fs::create_dir_all(&env.user_home).unwrap();
    let notes = env.user_home.join("notes.txt");
    let script = format!(
        r##"
try:
    open("{notes}", "a").write("noted\n")
    print("wrote", flush=True)
except OSError as e:
    print(e, flush=True)
"##,
        notes = notes.display()
    );
    let (id, run, first) = env.run_python_sandboxed("noter", "{network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{first:?}");
    let shown = first.iter().find(|l| l.contains("refused writing")).cloned().unwrap_or_default();
    assert!(shown.contains(&format!("touch {}", notes.display())), "{shown:?} {first:?}");
    let replied = env.corral(&["reply", &id, "--allow-denied"]);
    assert!(String::from_utf8_lossy(&replied.stderr).contains("allowed, but"), "{replied:?}");
    assert!(notes.is_file(), "the refused file was made as a file: {:?}", std::fs::metadata(&notes));
    assert_eq!(std::fs::read(&notes).unwrap(), b"", "made empty");
    let widened = env.store().sandbox_allows(&id).unwrap();
    assert_eq!(widened.write, vec![notes.to_string_lossy().into_owned()]);
    // A home reached through a link is still the home: never allowed whole.
    let linked = env.user_home.with_file_name("linked-home");
    std::os::unix::fs::symlink(&env.user_home, &linked).unwrap();
    let whole = env.command(&["allow", &id, "--write", "~", "--quiet"]).env("HOME", &linked).output().unwrap();
    assert!(!whole.status.success(), "{whole:?}");
    assert!(String::from_utf8_lossy(&whole.stderr).contains("holding your home"), "{whole:?}");
    // The file allowed: written through, the home beside it still not.
    let script = format!(
        r##"
open("{notes}", "a").write("noted\n")
print("wrote", flush=True)
try:
    open("{beside}", "w")
except OSError as e:
    print("beside refused", e.strerror, flush=True)
"##,
        notes = notes.display(),
        beside = env.user_home.join("beside.txt").display()
    );
    let sandbox = format!("{{write: ['{}'], network: none}}", notes.display());
    let (_, run, said) = env.run_python_sandboxed("noted", &sandbox, "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "wrote") && has(&said, "beside refused Read-only file system"), "{said:?}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "noted\n");
}

/// Class 11: the push key (which signs "allow and continue") is not
/// readable inside.
#[test]
fn the_push_key_is_not_readable_inside() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("push.key"), "k".repeat(64)).unwrap();
    let script = r##"
try:
    print("key", open(os.path.join(os.environ["CORRAL_HOME"], "push.key")).read(), flush=True)
except OSError as e:
    print("key refused", e.strerror, flush=True)
"##;
    let (_, run, said) = env.run_python_sandboxed("signer", "{write: [worktree], network: none}", "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "key refused No such file or directory"), "{said:?}");
}

/// Class 14: the agent sees and signals no process of the user's.
#[test]
fn a_sandboxed_agent_sees_and_signals_no_process_outside() {
    let env = Env::new();
    let mut editor = Command::new("sleep").arg("60").spawn().unwrap();
    let script = format!(
        r##"
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("processes", "few" if len(pids) < 10 else len(pids), flush=True)
try:
    os.kill({pid}, 9)
    print("killed", flush=True)
except OSError as e:
    print("kill refused", e.strerror, flush=True)
"##,
        pid = editor.id()
    );
    let (_, run, said) = env.run_python_sandboxed("peeker", "{network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "processes few"), "{said:?}");
    assert!(has(&said, "kill refused No such process"), "{said:?}");
    assert!(editor.try_wait().unwrap().is_none(), "the user's process was killed");
    let _ = editor.kill();
    let _ = editor.wait();
}

/// Classes 15-17: no host socket (an ssh agent's), no variable naming one,
/// no run's kept environment, no descriptor of the launcher's.
#[test]
fn no_host_socket_environment_file_or_descriptor_reaches_inside() {
    let env = Env::new();
    let sock_dir = tempfile::tempdir().unwrap();
    let agent_sock = sock_dir.path().join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&agent_sock).unwrap();
    let script = format!(
        r##"
import socket
print("SSH_AUTH_SOCK", os.environ.get("SSH_AUTH_SOCK"), flush=True)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("{sock}")
    print("connected", flush=True)
except OSError as e:
    print("socket refused", flush=True)
s.close()
try:
    text = open(os.path.join(os.environ["CORRAL_HOME"], "runs", os.environ["CORRAL_RUN_ID"], "env"), "rb").read()
    print("env", b"LAUNCHER_SECRET" in text, flush=True)
except OSError as e:
    print("env refused", flush=True)
fds = [int(f) for f in os.listdir("/proc/self/fd")]
print("fds", sorted(os.readlink("/proc/self/fd/%d" % f) for f in fds if f > 2 and os.path.exists("/proc/self/fd/%d" % f) and os.readlink("/proc/self/fd/%d" % f) != "/proc/%d/fd" % os.getpid()), flush=True)
"##,
        sock = agent_sock.display()
    );
    let script = format!("import json, os, subprocess, sys\n{script}");
    env.command_preset_with(
        "sniffer",
        &["python3", "-c", &script],
        "sandbox:\n  write: [worktree]\n  network: none\n  env: keep [PATH]\n",
    );
    // The launcher holds a folder open, not close-on-exec, as a shell may.
    let held = std::fs::File::open(&env.project).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&held);
    let mut launch = env.command(&["launch", "sniffer", "go"]);
    launch.env("SSH_AUTH_SOCK", &agent_sock).env("LAUNCHER_SECRET", "s3cret");
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut launch, move || {
            libc::fcntl(fd, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let out = launch.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let run = env.wait_end(&id);
    let said = env.said(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "SSH_AUTH_SOCK None"), "{said:?}");
    assert!(has(&said, "socket refused"), "{said:?}");
    assert!(said.iter().any(|l| l == "env refused" || l == "env False"), "{said:?}");
    assert!(has(&said, "fds []"), "a descriptor of the launcher's reached the agent: {said:?}");
}

/// Class 18: a host is allowed on its own port: a local gateway's port
/// opens no other local service.
#[test]
fn a_listed_host_opens_its_own_port_only() {
    let env = Env::new();
    let allowed = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let other = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let (a, o) = (allowed.local_addr().unwrap().port(), other.local_addr().unwrap().port());
    let script = format!(
        r##"
import urllib.request
for port in [{a}, {o}]:
    try:
        req = urllib.request.Request("http://127.0.0.1:%d/" % port, method="GET")
        urllib.request.urlopen(req, timeout=2)
        print(port, "reached", flush=True)
    except urllib.error.HTTPError as e:
        print(port, e.code, flush=True)
    except Exception as e:
        print(port, "other", type(e).__name__, flush=True)
"##
    );
    let (_, _run, said) = env.run_python_sandboxed("gateway", &format!("{{network: ['127.0.0.1:{a}']}}"), "", &script);
    assert!(has(&said, &format!("{o} 403")), "another local port was reached: {said:?}");
    assert!(!has(&said, &format!("{a} 403")), "{said:?}");
}

/// Class 19: an agent's credentials of another agent, and a denied file
/// made while the run goes on, are not readable.
#[test]
fn secrets_made_during_the_run_and_other_agents_tokens_stay_masked() {
    let env = Env::new();
    std::fs::create_dir_all(env.user_home.join(".codex")).unwrap();
    std::fs::write(env.user_home.join(".codex/auth.json"), "{\"token\": \"CODEX-TOKEN\"}").unwrap();
    let ready = env.project.join("ready");
    let script = format!(
        r##"
import time
home = os.path.expanduser("~")
def read(path):
    try:
        return open(os.path.join(home, path)).read().strip()
    except OSError as e:
        return "refused"
print("codex", read(".codex/auth.json"), flush=True)
print("waiting", flush=True)
for _ in range(200):
    if os.path.exists("{ready}"):
        break
    time.sleep(0.05)
print("aws", read(".aws/credentials"), flush=True)
print("pgpass", read(".pgpass"), flush=True)
"##,
        ready = ready.display()
    );
    let script = format!("import json, os, subprocess, sys\n{script}");
    env.command_preset_with("thief", &["python3", "-c", &script], "sandbox: {network: none}\n");
    let id = env.launch("thief", "go");
    env.wait_run(&id, std::time::Duration::from_secs(20), |_| env.said(&id).iter().any(|l| l == "waiting"));
    // `aws configure` and a database password, made while it runs.
    std::fs::create_dir_all(env.user_home.join(".aws")).unwrap();
    std::fs::write(env.user_home.join(".aws/credentials"), "AWS-SECRET\n").unwrap();
    std::fs::write(env.user_home.join(".pgpass"), "PG-SECRET\n").unwrap();
    std::fs::write(&ready, "").unwrap();
    let run = env.wait_end(&id);
    let said = env.said(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(has(&said, "codex refused"), "{said:?}");
    assert!(has(&said, "aws refused") && has(&said, "pgpass refused"), "{said:?}");
}

/// A link the agent leaves where its copies of its own folders are (to a
/// folder of yours) is never followed: no copy made there, none bound.
#[test]
fn a_link_left_among_the_agents_copies_is_not_followed() {
    let env = Env::new();
    env.use_fake("claude", "conversing");
    env.agent_preset("talker", "claude", "sandbox: {write: [worktree], network: none}\n");
    let log = env.project.join("converse.log");
    let id = env.launch_env("talker", "first", &[("CONVERSE_LOG", log.to_str().unwrap())]);
    assert_eq!(env.wait_end(&id)["status"], "completed");
    let copies = env.run_dir(&id).join("agent/own");
    assert!(copies.join(".claude").is_dir(), "the run has its own copy of ~/.claude");
    // What the agent could do from inside: its copies made a link out.
    let elsewhere = env.user_home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::remove_dir_all(&copies).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &copies).unwrap();
    env.ok(&["reply", &id, "again", "--wait"]);
    assert!(!elsewhere.join(".claude").exists(), "Corral copied the user's ~/.claude through the agent's link");
}

/// A run launched from inside a sandbox works only in a folder that
/// sandbox reads, as the folder is on disk: not `proj/..` (your home
/// written), not a link out of the project, not a folder `read: only`
/// hides, not another run's worktree.
#[test]
fn a_child_is_launched_only_where_its_launchers_sandbox_reads() {
    let env = Env::new();
    let secret = env.user_home.join("secretproj");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("s.txt"), "TOPSECRET\n").unwrap();
    std::os::unix::fs::symlink(&env.user_home, env.project.join("link")).unwrap();
    env.preset_file(
        env.home.join("presets"),
        "writer.md",
        "---\nname: writer\ndescription: w\nagent: command\ncommand: [sh, -c, 'echo RAN > planted.txt; cat s.txt 2>/dev/null']\nsandbox: {write: [worktree], network: none}\n---\n",
    );
    let project = env.project.display().to_string();
    let script = format!(
        r##"
for cwd in ["{project}/..", "{project}/link", "{secret}"]:
    r = subprocess.run(["{corral}", "launch", "writer", "x", "--cwd", cwd, "--wait"], capture_output=True, text=True)
    print("child", cwd.rsplit("/", 1)[-1], r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
"##,
        secret = secret.display(),
        // Under `read: only`, Corral's own program is there, not the
        // test's folder of links on PATH.
        corral = common::corral_bin().display()
    );
    let sandbox = format!("\n  write: [worktree]\n  read: only ['{project}']\n  network: none");
    let (_, run, said) = env.run_python_sandboxed("launcher", &sandbox, "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(!env.user_home.join("planted.txt").exists(), "a child wrote the user's home: {said:?}");
    assert!(!said.iter().any(|l| l.contains("TOPSECRET")), "{said:?}");
    let refused: Vec<&String> = said
        .iter()
        .filter(|l| l.starts_with("child ") && l.contains(" 2 ") && l.contains("no run is launched"))
        .collect();
    assert_eq!(refused.len(), 3, "{said:?}");
}

/// What an agent writes reaches your terminal as text: `corral diff` at a
/// terminal shows an escape sequence in a changed file (a clipboard write,
/// OSC 52) as `\x1b`, never sends it; piped, the patch is git's own.
#[test]
fn a_diff_at_a_terminal_sends_no_escape_sequence_of_the_agents() {
    let env = Env::new();
    repository(&env);
    let script = r##"
open("notes.txt", "w").write("\x1b]52;c;cm0gLXJmIH4K\x07 looks harmless\n")
"##;
    let (id, run, said) =
        env.run_python_sandboxed("inkjet", "{write: [worktree], network: none}", "worktree: true\n", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    let at_terminal = format!("{} diff {id}", common::corral_bin().display());
    // The environment a `corral` of this installation runs with.
    let corral = env.command(&[]);
    let out = Command::new("script")
        .args(["-qec", &at_terminal, "/dev/null"])
        .envs(corral.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env("NO_COLOR", "1")
        .current_dir(&env.project)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("looks harmless"), "{shown}");
    assert!(!shown.contains("\x1b]52"), "the agent's escape sequence reached the terminal");
    assert!(shown.contains("\\x1b]52"), "{shown}");
    let piped = env.ok(&["diff", &id]);
    assert!(piped.contains("\x1b]52"), "piped, the patch is as git wrote it");
}

/// The sandbox's `/tmp` is its own even where its agent's program lies in
/// a folder of the host's `/tmp`: that folder is shown, never `/tmp`.
#[test]
fn a_program_in_the_hosts_tmp_shows_its_folder_not_tmp() {
    let env = Env::new();
    let marker = std::env::temp_dir().join(format!("corral-host-tmp-{}", std::process::id()));
    std::fs::write(&marker, "the host's").unwrap();
    let tool = tempfile::tempdir().unwrap();
    let program = tool.path().join("agent.sh");
    std::fs::write(&program, format!("#!/bin/sh\ncat {} 2>/dev/null || echo unseen\n", marker.display())).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.command_preset_with("tmpish", &[program.to_str().unwrap()], "sandbox: {network: none}\n");
    let id = env.launch("tmpish", "x");
    let run = env.wait_end(&id);
    let _ = std::fs::remove_file(&marker);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["final_text"], "unseen", "the host's /tmp was shown: {run:#}");
}
