//! A sandbox that only narrows, tried as a hostile agent inside would: a
//! run it launches never sees or writes more than it may, Corral never
//! runs what it wrote, and what a click widens is only what was refused.
//! Each test goes through the CLI (from inside a sandboxed run, where the
//! attack starts) and asserts what the user would notice: a mark outside,
//! a secret in a transcript, a schedule paused.

mod common;

use std::path::Path;

use common::{git, Env};

fn repository(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), "hi\n").unwrap();
    git(dir, &["-c", "user.email=u@e", "-c", "user.name=U", "add", "."]);
    git(dir, &["-c", "user.email=u@e", "-c", "user.name=U", "commit", "-qm", "first"]);
}

fn global_preset(env: &Env, file: &str, text: &str) {
    std::fs::create_dir_all(env.home.join("presets")).unwrap();
    std::fs::write(env.home.join("presets").join(file), text).unwrap();
}

/// Root 1: a child's folder is never a system folder the sandbox replaces
/// (`/tmp`, `/proc`) nor inside a `.git`: it would see the host's sockets
/// and processes, or write what the user's next `git` runs.
#[test]
fn a_child_never_works_in_a_system_folder_or_a_git_folder() {
    let env = Env::new();
    repository(&env.project);
    global_preset(
        &env,
        "lister.md",
        "---\nname: lister\ndescription: l\nagent: command\ncommand: [sh, -c, 'ls; echo planted > pre-commit']\n---\n",
    );
    let hooks = env.project.join(".git/hooks");
    let script = format!(
        r##"
for cwd in ["/tmp", "/proc", "/run", "{hooks}"]:
    r = subprocess.run(["corral", "launch", "lister", "x", "--cwd", cwd, "--wait"], capture_output=True, text=True)
    print("child", cwd, r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
"##,
        hooks = hooks.display()
    );
    let (_, run, said) = env.run_python_sandboxed("lead", "{write: [worktree], network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    let refused = said.iter().filter(|l| l.starts_with("child ") && l.contains(" 2 ") && l.contains("system folder"));
    assert_eq!(refused.count(), 4, "{said:?}");
    assert!(!hooks.join("pre-commit").exists(), "a child wrote the user's git hooks");
}

/// Root 1: a place a run writes is fixed at launch as it is on disk; one
/// replaced by a link before the run's turn starts (as a launcher replaces
/// its child's folder between turns) is refused, never followed.
#[test]
fn a_written_place_made_a_link_after_launch_is_not_followed() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let sub = env.project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    env.command_preset("blocker", &["sleep", "60"]);
    let project = env.project.display().to_string();
    let script = format!(
        r##"import os
try:
    open("{project}/sub/.bashrc", "a").write("evil\\n")
    print("wrote", flush=True)
except OSError as e:
    print("refused", e.strerror, flush=True)
"##
    );
    env.command_preset_with(
        "swapped",
        &["python3", "-c", &script],
        &format!("sandbox: {{write: ['{project}', '{project}/sub'], network: none}}\n"),
    );
    let blocker = env.launch("blocker", "hold the slot");
    env.wait_run(&blocker, std::time::Duration::from_secs(20), |r| r["status"] == "running");
    let id = env.launch("swapped", "write");
    assert_eq!(env.show(&id)["status"], "queued");
    // Between launch and its turn, its folder becomes a link to the home.
    std::fs::remove_dir(&sub).unwrap();
    std::os::unix::fs::symlink(&env.user_home, &sub).unwrap();
    env.ok(&["abort", &blocker]);
    let run = env.wait_end(&id);
    let said = env.said(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(!env.user_home.join(".bashrc").exists(), "the run wrote the user's home through a link: {said:?}");
    assert!(said.iter().any(|l| l.starts_with("refused")), "{said:?}");
}

/// Root 1: a child whose own preset reads `only [~]`, launched from a
/// sandbox that hides the secrets, still has them hidden.
#[test]
fn a_childs_read_only_list_keeps_its_launchers_masks() {
    let env = Env::new();
    std::fs::create_dir_all(env.user_home.join(".ssh")).unwrap();
    std::fs::write(env.user_home.join(".ssh/id_ed25519"), "PRIVATE-KEY\n").unwrap();
    global_preset(
        &env,
        "planted.md",
        &format!("---\nname: planted\ndescription: p\nagent: command\ncommand: [sh, -c, 'cat ~/.ssh/id_ed25519; echo read-done']\nsandbox: {{read: 'only [{home}]', network: none}}\n---\n",
            home = env.user_home.display()
        ),
    );
    let script = r##"
r = subprocess.run(["corral", "launch", "planted", "x", "--wait"], capture_output=True, text=True)
print("child", r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
r = subprocess.run(["corral", "ls", "--json"], capture_output=True, text=True)
for run in json.loads(r.stdout):
    if run["preset"] == "planted":
        t = subprocess.run(["corral", "tail", run["id"], "-n", "50"], capture_output=True, text=True)
        print("tail", t.stdout.replace("\n", " | "), flush=True)
"##;
    let (_, run, said) = env.run_python_sandboxed("lead", "{write: [worktree], network: none}", "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l.starts_with("tail") && l.contains("read-done")), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("PRIVATE-KEY")), "the child read a key its launcher hides: {said:?}");
}

/// Root 1: a project preset whose sandbox is wider than the user's
/// default needs the user's trust, as `sandbox: none` does.
#[test]
fn a_project_preset_wider_than_the_default_sandbox_needs_trust() {
    let env = Env::new();
    env.config("[sandbox]\nprofile = \"builder\"\n");
    env.untrusted_preset_file(
        ".corral/presets",
        "reviewer.md",
        "---\nname: reviewer\ndescription: r\nagent: pi\nsandbox: {write: [/], network: all}\n---\n",
    );
    let out = env.corral(&["launch", "reviewer", "look"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("wider than your own default") && err.contains("corral presets trust"), "{err}");
    // One that narrows the default runs without trust.
    env.untrusted_preset_file(
        ".corral/presets",
        "quiet.md",
        "---\nname: quiet\ndescription: q\nagent: pi\nsandbox: {profile: reviewer, network: none}\n---\n",
    );
    let presets = env.ok(&["presets"]);
    assert!(!presets.lines().any(|l| l.contains("quiet") && l.contains("trust")), "{presets}");
}

/// Root 2: a worktree's own settings (`config.worktree`, read once
/// `extensions.worktreeConfig` is on) are Corral's, read-only inside, so
/// no filter the agent names there runs when Corral measures its work.
#[test]
fn a_worktree_run_cannot_write_its_worktree_settings() {
    let env = Env::new();
    repository(&env.project);
    git(&env.project, &["config", "extensions.worktreeConfig", "true"]);
    let mark = env.user_home.join("filter-ran");
    let script = format!(
        r##"
own = subprocess.run(["git", "rev-parse", "--git-dir"], capture_output=True, text=True).stdout.strip()
try:
    open(os.path.join(own, "config.worktree"), "w").write("[filter \"x\"]\n\tclean = touch {mark}\n")
    print("wrote settings", flush=True)
except OSError as e:
    print("refused settings", e.strerror, flush=True)
open(".gitattributes", "w").write("* filter=x\n")
open("work.txt", "w").write("mine\n")
"##,
        mark = mark.display()
    );
    let (id, run, said) =
        env.run_python_sandboxed("filt", "{write: [worktree], network: none}", "worktree: true\n", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l == "refused settings Read-only file system"), "{said:?}");
    env.ok(&["diff", &id]);
    assert!(!mark.exists(), "Corral's git ran a filter the agent wrote");
}

/// Root 2: a repository the agent made (its hooks its own) gets no
/// worktree from Corral's git, which runs outside every sandbox.
#[test]
fn no_worktree_is_made_of_a_repository_the_sandbox_made() {
    let env = Env::new();
    repository(&env.project);
    let mark = env.user_home.join("hook-ran");
    global_preset(
        &env,
        "tests.md",
        "---\nname: tests\ndescription: t\nagent: command\ncommand: [sh, -c, 'echo hi']\n---\n",
    );
    let script = format!(
        r##"
subprocess.run(["git", "init", "-q", "-b", "main", "sub"])
hook = "sub/.git/hooks/post-checkout"
open(hook, "w").write("#!/bin/sh\ntouch {mark}\n")
os.chmod(hook, 0o755)
open("sub/f", "w").write("x\n")
subprocess.run(["git", "-C", "sub", "add", "f"])
subprocess.run(["git", "-C", "sub", "-c", "user.email=a@b", "-c", "user.name=A", "commit", "-qm", "x"])
r = subprocess.run(["corral", "launch", "tests", "x", "--worktree", "--cwd", "sub", "--wait"], capture_output=True, text=True)
print("child", r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
"##,
        mark = mark.display()
    );
    let (_, run, said) = env.run_python_sandboxed("builder", "{write: [worktree], network: none}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l.starts_with("child 2 ") && l.contains("can write its git folder")), "{said:?}");
    assert!(!mark.exists(), "Corral's git worktree add ran the agent's hook");
}

/// Root 2: a merged object is a copy in the repository, never a link to
/// the file the run's sandbox still writes.
#[test]
fn merged_objects_are_copies_not_links() {
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    repository(&env.project);
    git(&env.project, &["config", "user.email", "u@e"]);
    git(&env.project, &["config", "user.name", "U"]);
    let script = r##"
open("feature.txt", "w").write("feature\n")
subprocess.run(["git", "add", "feature.txt"])
subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=A", "commit", "-qm", "agent's"])
"##;
    let (id, run, said) =
        env.run_python_sandboxed("committer", "{write: [worktree], network: none}", "worktree: true\n", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    env.ok(&["merge", &id, "--no-squash"]);
    let blob = git(&env.project, &["rev-parse", "main:feature.txt"]).trim().to_string();
    let object = env.project.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
    let meta = std::fs::metadata(&object).unwrap();
    assert_eq!(meta.nlink(), 1, "the merged object is linked to the run's own copy");
}

/// Root 3: "allow and continue" asked from inside a run is refused before
/// anything is made for the refusal it would allow.
#[test]
fn allow_denied_from_inside_a_run_makes_nothing() {
    let env = Env::new();
    let made = env.user_home.join("made-by-agent");
    global_preset(
        &env,
        "writer.md",
        &format!(
            "---\nname: writer\ndescription: w\nagent: command\ncommand: [sh, -c, 'echo x > {}']\nsandbox: {{write: [worktree], network: none}}\n---\n",
            made.display()
        ),
    );
    let script = r##"
r = subprocess.run(["corral", "launch", "writer", "x", "--json", "--wait"], capture_output=True, text=True)
child = json.loads(r.stdout)["id"] if r.stdout.strip().startswith("{") else None
if child is None:
    r2 = subprocess.run(["corral", "ls", "--json"], capture_output=True, text=True)
    child = [x["id"] for x in json.loads(r2.stdout) if x["preset"] == "writer"][0]
r = subprocess.run(["corral", "reply", child, "--allow-denied", "go on"], capture_output=True, text=True)
print("allow", r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
"##;
    let (_, run, said) = env.run_python_sandboxed("lead", "{write: [worktree], network: none}", "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l.starts_with("allow ") && l.contains("not from inside run")), "{said:?}");
    assert!(!made.exists(), "Corral made the refused path for an allowance it then refused");
}

/// Root 3: a schedule is the user's: no door pauses, fires or removes one
/// from inside a sandboxed run — not the CLI, not the MCP server the
/// agent reaches through it.
#[test]
fn a_sandboxed_agent_cannot_pause_or_fire_the_users_schedule() {
    let env = Env::new();
    env.command_preset("nap", &["sh", "-c", "echo nap"]);
    env.ok(&["schedule", "add", "nightly", "work", "--preset", "nap", "--at", "daily 03:00"]);
    let script = r##"
for verb in ["pause", "run-now"]:
    r = subprocess.run(["corral", "schedule", verb, "nightly"], capture_output=True, text=True)
    print("cli", verb, r.returncode, (r.stdout + r.stderr).strip().replace("\n", " "), flush=True)
mcp = subprocess.Popen(["corral", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(message):
    mcp.stdin.write(json.dumps(message) + "\n")
    mcp.stdin.flush()
def answer(id):
    while True:
        line = mcp.stdout.readline()
        if not line:
            return None
        value = json.loads(line)
        if value.get("id") == id:
            return value
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for n, tool in enumerate(["pause_schedule", "run_schedule_now", "list_schedules"], start=2):
    arguments = {} if tool == "list_schedules" else {"name": "nightly"}
    send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    got = answer(n)
    text = " ".join(c.get("text", "") for c in got["result"]["content"]) if got and "result" in got else json.dumps(got)
    error = got and got.get("result", {}).get("isError")
    print("mcp", tool, "error" if error else "ok", text.replace("\n", " "), flush=True)
mcp.stdin.close()
mcp.wait()
"##;
    let (_, run, said) = env.run_python_sandboxed("sly", "{write: [worktree], network: none}", "", script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    for verb in ["pause", "run-now"] {
        assert!(said.iter().any(|l| l.starts_with(&format!("cli {verb} 2 "))), "{verb}: {said:?}");
    }
    assert!(
        !said.iter().any(|l| l.contains("\"work\"") || l.contains("nap")),
        "a schedule's task was listed: {said:?}"
    );
    for tool in ["pause_schedule", "run_schedule_now", "list_schedules"] {
        assert!(
            said.iter().any(|l| l.starts_with(&format!("mcp {tool} error")) && l.contains("own terminal")),
            "{tool}: {said:?}"
        );
    }
    let shown = env.json(&["schedule", "ls"]);
    let nightly = &shown.as_array().unwrap()[0];
    assert!(nightly["paused"].is_null() || nightly["paused"] == false, "{nightly:#}");
    assert!(!shown.to_string().contains("by request"), "{shown:#}");
    let fires = env.ok(&["schedule", "show", "nightly"]);
    assert!(!fires.contains("run now") && !fires.contains("run-now"), "{fires}");
}

/// Root 3: the home is shown by allow-list: a socket no list names (a key
/// agent's), a token file no deny-list knows, are not there; the
/// toolchains and what `home:` names are read.
#[test]
fn the_home_is_shown_by_allow_list() {
    let env = Env::new();
    let home = &env.user_home;
    std::fs::create_dir_all(home.join(".newvault")).unwrap();
    let socket = home.join(".newvault/agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::create_dir_all(home.join(".config/someapp")).unwrap();
    std::fs::write(home.join(".config/someapp/token"), "TOKEN-123\n").unwrap();
    std::fs::create_dir_all(home.join(".cargo")).unwrap();
    std::fs::write(home.join(".cargo/env"), "cargo-env\n").unwrap();
    std::fs::create_dir_all(home.join("notes")).unwrap();
    std::fs::write(home.join("notes/n.txt"), "my notes\n").unwrap();
    let script = format!(
        r##"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("{sock}")
    print("connected", flush=True)
except OSError as e:
    print("no socket", e.strerror, flush=True)
for path in ["{home}/.config/someapp/token", "{home}/.cargo/env", "{home}/notes/n.txt"]:
    try:
        print("read", open(path).read().strip(), flush=True)
    except OSError as e:
        print("unread", path, e.strerror, flush=True)
"##,
        sock = socket.display(),
        home = home.display()
    );
    let (_, run, said) = env.run_python_sandboxed("curious", "{network: none, home: ['~/notes']}", "", &script);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(said.iter().any(|l| l.starts_with("no socket")), "a key agent's socket in the home answered: {said:?}");
    assert!(!said.iter().any(|l| l.contains("TOKEN-123")), "{said:?}");
    assert!(said.iter().any(|l| l == "read cargo-env"), "the toolchains are read: {said:?}");
    assert!(said.iter().any(|l| l == "read my notes"), "what home: names is read: {said:?}");
}

/// Root 1: a sandboxed run's folder is fixed at launch as on disk: made a
/// link before its turn, the run is not started there, and says why.
#[test]
fn a_folder_made_a_link_after_launch_is_not_worked_in() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let sub = env.project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    env.command_preset("blocker", &["sleep", "60"]);
    env.command_preset_with("looker", &["sh", "-c", "pwd; ls"], "sandbox: {write: [worktree], network: none}\n");
    let blocker = env.launch("blocker", "hold the slot");
    env.wait_run(&blocker, std::time::Duration::from_secs(20), |r| r["status"] == "running");
    let id = env.ok(&["launch", "looker", "look", "--cwd", sub.to_str().unwrap()]).trim().to_string();
    assert_eq!(env.show(&id)["status"], "queued");
    std::fs::remove_dir(&sub).unwrap();
    std::os::unix::fs::symlink(&env.user_home, &sub).unwrap();
    env.ok(&["abort", &blocker]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "failed", "{run:#}");
    assert!(run["error"].as_str().unwrap_or("").contains("is a link now"), "{run:#}");
}

/// Root 2: a session file Corral follows outside the sandbox (Codex's
/// rollout, for live spend) that the agent made a FIFO is never waited on:
/// the run ends when its agent does.
#[test]
fn a_session_file_made_a_fifo_never_stops_the_shepherd() {
    let env = Env::new();
    env.config("");
    env.use_fake("codex", "session-spender");
    env.agent_preset("spender", "codex", "sandbox: {write: [worktree], network: none}\n");
    std::fs::create_dir_all(env.user_home.join(".codex")).unwrap();
    let mut launch = env.command(&["launch", "--budget", "1M tokens", "spender", "work"]);
    let out = launch.envs([("SPEND_MESSAGES", "60"), ("SESSION_AS_FIFO", "1")]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
}
