//! Sandboxed runs as a user meets them through the CLI: what a preset's
//! `sandbox:` lets an agent write, read and reach, what it refused shown
//! in the transcript as a denial, the repository's hooks kept the user's,
//! and a launch refused where no sandbox can be made.

mod common;

use std::process::Command;

use common::Env;
use serde_json::Value;

/// The run's transcript, as `tail --json` prints it.
fn transcript(env: &Env, id: &str) -> Vec<Value> {
    env.ok(&["tail", id, "--json", "-n", "1000"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// What the run's transcript says, event by event.
fn said(env: &Env, id: &str) -> Vec<String> {
    transcript(env, id).iter().map(|e| e["text"].as_str().unwrap_or("").to_string()).collect()
}

fn denials(env: &Env, id: &str) -> Vec<String> {
    transcript(env, id)
        .iter()
        .filter(|e| e["kind"] == "denial")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect()
}

/// Python for an agent that speaks MCP to `corral mcp` as a client does,
/// over stdio: `mcp(tool, arguments)` calls a tool and returns its result
/// (the server started at the first call).
const MCP_CLIENT: &str = r#"
import json, os, subprocess
server = None
def mcp(tool, arguments):
    global server
    def call(i, method, params):
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        while True:
            m = json.loads(server.stdout.readline())
            if m.get("id") == i:
                return m
    if server is None:
        server = subprocess.Popen(["corral", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        call(0, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}})
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    mcp.calls = getattr(mcp, "calls", 0) + 1
    return call(mcp.calls, "tools/call", {"name": tool, "arguments": arguments})["result"]
"#;

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_sandboxed_run_writes_its_worktree_only_and_what_it_was_refused_is_shown() {
    let env = Env::new();
    git(&env.project, &["init", "-q", "-b", "main"]);
    git(&env.project, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"]);
    std::fs::create_dir_all(env.user_home.join(".ssh")).unwrap();
    std::fs::write(env.user_home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let outside = env.user_home.join("outside.txt");
    let hooks = env.project.join(".git/hooks/pre-commit");
    let script = format!(
        "echo work > mine.txt && echo wrote-mine; \
         echo x > {outside}; \
         cat {home}/.ssh/id_ed25519; \
         echo 'curl evil' > {hooks}; \
         git -c user.name=a -c user.email=a@a add mine.txt && git -c user.name=a -c user.email=a@a commit -qm mine && echo committed; \
         exit 0",
        outside = outside.display(),
        home = env.user_home.display(),
        hooks = hooks.display()
    );
    env.command_preset_with(
        "boxed",
        &["sh", "-c", &script],
        "worktree: true\nsandbox: {write: [worktree], network: none}\n",
    );
    let id = env.launch("boxed", "work");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let said = said(&env, &id);
    let said = said.join("\n");
    // Its own work: written and committed on its branch.
    assert!(said.contains("wrote-mine") && said.contains("committed"), "{said}");
    let worktree = run["worktree"]["path"].as_str().unwrap();
    assert!(std::path::Path::new(worktree).join("mine.txt").exists());
    // Outside it: nothing written, the key not read, no hook planted.
    assert!(!outside.exists());
    assert!(!said.contains("PRIVATE KEY"), "{said}");
    assert!(!hooks.exists(), "a hook was planted in the user's repository");
    let denials = denials(&env, &id);
    assert!(!denials.is_empty(), "{said}");
    assert!(denials.iter().any(|d| d.contains(&format!("refused writing {}", outside.display()))), "{denials:?}");
    assert!(denials.iter().any(|d| d.contains(&format!("corral allow {id} --write"))), "{denials:?}");
    // The key is not there at all: the home is shown by allow-list.
    assert!(said.contains(".ssh/id_ed25519: No such file or directory"), "{said}");
    assert!(denials.iter().any(|d| d.contains(&format!("refused writing {}", hooks.display()))), "{denials:?}");
    // Counted as the run's denials (the tray's attention), and `show` says
    // what its sandbox was.
    assert!(
        run["denied"].as_array().unwrap().iter().any(|d| d.as_str().unwrap().starts_with("sandbox: write")),
        "{run:#}"
    );
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains("sandbox: writes worktree"), "{shown}");
}

#[test]
fn a_run_without_the_network_reaches_no_host() {
    let env = Env::new();
    env.command_preset_with(
        "offline",
        &[
            "sh",
            "-c",
            "getent hosts localhost >/dev/null && echo resolved; cat < /dev/tcp/1.1.1.1/80 2>&1; cat /proc/net/dev",
        ],
        "sandbox: {write: [/no/such/place], network: none}\n",
    );
    let id = env.launch("offline", "look");
    let run = env.wait_end(&id);
    // A place it may write that does not exist is said where the user looks.
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains("/no/such/place does not exist, so it is not writable"), "{shown}");
    let said = said(&env, &id);
    // Only its own loopback.
    assert!(said.iter().any(|l| l.trim().starts_with("lo:")), "{said:?} {run:#}");
    assert!(!said.iter().any(|l| l.trim().starts_with("eth") || l.trim().starts_with("en")), "{said:?}");
}

#[test]
fn a_sandboxed_preset_does_not_start_where_no_sandbox_can_be_made_unless_optional() {
    let env = Env::new();
    env.command_preset_with("boxed", &["echo", "ran"], "sandbox: {write: [worktree]}\n");
    env.command_preset_with("maybe", &["echo", "ran"], "sandbox: optional\n");
    // A PATH without bubblewrap: as on a machine without it.
    let bare = env.project.join("bare-bin");
    std::fs::create_dir_all(&bare).unwrap();
    for tool in ["echo", "sh"] {
        std::os::unix::fs::symlink(format!("/bin/{tool}"), bare.join(tool)).unwrap();
    }
    let path = format!("{}:{}", env.bin.display(), bare.display());
    let out = env.command(&["launch", "boxed", "work"]).env("PATH", &path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("runs sandboxed")
            && err.contains("sudo apt install bubblewrap")
            && err.contains("sandbox: optional"),
        "{err}"
    );
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty(), "nothing was recorded");
    let out = env.command(&["launch", "maybe", "work"]).env("PATH", &path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let shown = env.ok(&["show", &id]);
    assert!(shown.contains("running unsandboxed, as `sandbox: optional` allows"), "{shown}");
}

#[test]
fn a_broken_sandbox_is_refused_with_what_to_write() {
    let env = Env::new();
    env.command_preset_with("bad", &["echo"], "sandbox: {network: some}\n");
    let out = env.command(&["launch", "bad", "work"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("network: some") && err.contains("none, all"), "{err}");
}

/// A server on this machine's loopback answering every request with `hello`.
fn hello_server() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nhello\n");
        }
    });
    port
}

#[test]
fn a_run_reaches_the_hosts_its_sandbox_lists_and_no_other() {
    let env = Env::new();
    let port = hello_server();
    let script = format!(
        "curl -sS http://127.0.0.1:{port}/ok; curl -sS -o /dev/null https://example.com/ 2>&1; \
         curl -sS http://127.0.0.1:{port}/again; exit 0"
    );
    env.command_preset_with("listed", &["sh", "-c", &script], &format!("sandbox: {{network: ['127.0.0.1:{port}']}}\n"));
    let id = env.launch("listed", "reach");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let said = said(&env, &id);
    // The listed host answers, through the proxy, twice.
    assert_eq!(said.iter().filter(|l| l.trim() == "hello").count(), 2, "{said:?}");
    assert!(said.iter().any(|l| l.contains(&format!("sandbox: reaches only 127.0.0.1:{port}"))), "{said:?}");
    // Another is refused, and said once.
    let denials = denials(&env, &id);
    assert_eq!(denials.len(), 1, "{denials:?}\n{said:?}");
    assert!(denials[0].contains("refused connecting to example.com"), "{denials:?}");
    assert_eq!(run["denied"], serde_json::json!(["sandbox: connect example.com"]), "{run:#}");
    // Nothing of Corral's stays in the sandbox after its agent.
    assert!(!env.run_dir(&id).join("net.sock").exists());
}

#[test]
fn a_host_allowed_while_the_agent_runs_is_reachable_at_once() {
    let env = Env::new();
    let port = hello_server();
    // The agent tries `localhost` (not listed) until it answers.
    let script = format!("until curl -fsS http://localhost:{port}/late; do sleep 0.1; done");
    env.command_preset_with(
        "patient",
        &["sh", "-c", &script],
        &format!("sandbox: {{network: ['127.0.0.1:{port}']}}\n"),
    );
    let id = env.launch("patient", "reach");
    env.wait_run(&id, std::time::Duration::from_secs(20), |_| {
        denials(&env, &id).iter().any(|d| d.contains("localhost"))
    });
    let denials_before = denials(&env, &id);
    // Its own port: the refusal names it, and allowing it opens that port alone.
    assert!(denials_before[0].contains(&format!("corral allow {id} --host localhost:{port}")), "{denials_before:?}");
    let out = env.ok(&["allow", &id, "--host", &format!("localhost:{port}"), "--quiet"]);
    assert!(out.contains(&format!("its sandbox now allows host localhost:{port}")), "{out}");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let said = said(&env, &id);
    assert!(said.iter().any(|l| l.trim() == "hello"), "{said:?}");
    assert!(said.iter().any(|l| l.contains("sandbox widened: host localhost")), "{said:?}");
}

/// An agent that opens hundreds of connections to its proxy and says
/// nothing on them spends none of its shepherd's threads beyond the
/// proxy's bound: the rest are answered "busy" at once, and once it lets
/// them go its requests go through again.
#[test]
fn a_flood_of_silent_connections_costs_the_shepherd_a_bounded_few_threads() {
    let env = Env::new();
    let port = hello_server();
    let go = env.project.join("go");
    let script = format!(
        r#"
import os, select, socket, sys, time, urllib.request
proxy = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
held = [socket.create_connection(("127.0.0.1", proxy)) for _ in range(300)]
got, deadline = {{s: b"" for s in held}}, time.time() + 20
busy = lambda: [s for s in held if b" 503 " in got[s]]
while len(busy()) < 300 - 64 and time.time() < deadline:
    ready, _, _ = select.select([s for s in held if s not in busy()], [], [], 0.5)
    for s in ready:
        got[s] += s.recv(4096)
print("busy", len(busy()), flush=True)
while not os.path.exists("{go}"):
    time.sleep(0.05)
for s in held:
    s.close()
print(urllib.request.urlopen("http://127.0.0.1:{port}/after").read().decode().strip(), flush=True)
"#,
        go = go.display()
    );
    env.command_preset_with(
        "flood",
        &["python3", "-c", &script],
        &format!("sandbox: {{network: ['127.0.0.1:{port}']}}\n"),
    );
    let id = env.launch("flood", "flood");
    env.wait_run(&id, std::time::Duration::from_secs(30), |_| said(&env, &id).iter().any(|l| l.starts_with("busy")));
    let held = said(&env, &id);
    assert!(held.iter().any(|l| l.trim() == "busy 236"), "{held:?}");
    let run = env.show(&id);
    let shepherd = run["shepherd_pid"].as_i64().unwrap();
    let threads = std::fs::read_dir(format!("/proc/{shepherd}/task")).unwrap().count();
    assert!(threads < 64 + 16, "the shepherd holds {threads} threads for 300 connections");
    std::fs::write(&go, "").unwrap();
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{:?}", said(&env, &id));
    assert!(said(&env, &id).iter().any(|l| l.trim() == "hello"), "{:?}", said(&env, &id));
}

#[test]
fn allow_refuses_what_it_cannot_do_and_says_what_to_write() {
    let env = Env::new();
    env.command_preset_with("boxed", &["true"], "sandbox: {write: [worktree]}\n");
    env.command_preset("open", &["true"]);
    let boxed = env.launch("boxed", "x");
    let open = env.launch("open", "x");
    env.wait_end(&boxed);
    env.wait_end(&open);
    let refused = |args: &[&str], said: &str| {
        let out = env.command(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(said), "{args:?}: {err}");
    };
    refused(&["allow", "nosuchrun", "--host", "github.com"], "nosuchrun");
    refused(&["allow", &open, "--host", "github.com"], "is not sandboxed");
    refused(&["allow", &boxed], "say what to allow");
    refused(&["allow", &boxed, "--write", "relative/dir"], "write a full path");
    refused(&["allow", &boxed, "--write", "/no/such/folder"], "does not exist");
    refused(&["allow", &boxed, "--host", "https://github.com"], "is not a host name");
    // A command cannot go on in a session: the widening is kept, and said.
    refused(&["allow", &boxed, "--host", "github.com"], "allowed, but the agent cannot go on in its session");
}

#[test]
fn where_user_namespaces_are_refused_a_sandboxed_launch_fails_with_doctors_fix() {
    let env = Env::new();
    env.command_preset_with("boxed", &["echo", "ran"], "sandbox: {write: [worktree]}\n");
    // Another user's process on a machine that refuses them new user
    // namespaces: bubblewrap's own `--disable-userns` (the kernel answers
    // ENOSPC, as with `user.max_user_namespaces = 0`).
    let refusing = |args: &[&str]| {
        let inner = env.command(args);
        let mut outer = Command::new("bwrap");
        outer.args(["--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534"]);
        outer.args(["--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc", "--"]);
        outer.arg(inner.get_program()).args(inner.get_args());
        outer.envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))));
        outer.current_dir(&env.project);
        outer.output().unwrap()
    };
    let out = refusing(&["launch", "boxed", "work"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("preset boxed runs sandboxed, and no sandbox can be made here"), "{err}");
    assert!(err.contains("max_*_namespaces exceeded") || err.contains("refused"), "{err}");
    assert!(err.contains("sudo sysctl -w") && err.contains("corral doctor"), "{err}");
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty(), "nothing was recorded");
    // `doctor` says the same there, with the same fix.
    let out = refusing(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["area"] == "sandbox" && f["check"] == "user namespaces")
        .cloned()
        .unwrap_or_default();
    assert_eq!(finding["level"], "warn", "{report:#}");
    assert!(finding["fix"].as_str().unwrap_or("").contains("sudo sysctl -w"), "{finding:#}");
    // Where they are not refused, the same launch runs sandboxed.
    let id = env.launch("boxed", "work");
    assert_eq!(env.wait_end(&id)["status"], "completed");
}

#[test]
fn a_sandboxed_run_is_held_in_its_cgroup_and_abort_leaves_nothing_of_it() {
    let env = Env::new();
    let port = hello_server();
    // A sandbox with the proxy, a child in the background, and a wait.
    let script = format!("curl -sS http://127.0.0.1:{port}/; sleep 300 & sleep 300");
    env.command_preset_with("held", &["sh", "-c", &script], &format!("sandbox: {{network: ['127.0.0.1:{port}']}}\n"));
    let id = env.launch("held", "hold");
    env.wait_run(&id, std::time::Duration::from_secs(20), |r| r["status"] == "running");
    let found = common::eventually(std::time::Duration::from_secs(20), || common::processes_of_run(&id).len() >= 3);
    let processes = common::processes_of_run(&id);
    assert!(found, "{processes:?}");
    let shown = env.show(&id);
    let cgroup = shown["containment"]["cgroup"].as_str().map(str::to_string);
    if let Some(cgroup) = &cgroup {
        let members = std::fs::read_to_string(format!("{cgroup}/cgroup.procs")).unwrap();
        // One that ended after it was listed (curl) is in no group.
        for pid in processes.iter().filter(|pid| common::alive(**pid)) {
            assert!(members.lines().any(|l| l == pid.to_string()), "pid {pid} is not in the run's cgroup {cgroup}");
        }
    }
    env.ok(&["abort", &id]);
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "aborted", "{run:#}");
    let left: Vec<i32> = processes.iter().copied().filter(|pid| common::alive(*pid)).collect();
    if !left.is_empty() {
        // Seen once under load and not since: say all there is to know.
        let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
        let dir = env.run_dir(&id);
        let (shepherd, signals) =
            (read(format!("{}/shepherd.log", dir.display())), read(format!("{}/signals.log", dir.display())));
        let seen: Vec<String> = left
            .iter()
            .map(|p| format!("{}{}", read(format!("/proc/{p}/stat")), read(format!("/proc/{p}/cgroup"))))
            .collect();
        panic!("left alive: {left:?} of {processes:?}\n{run:#}\nshepherd.log:\n{shepherd}\nsignals.log:\n{signals}\n{seen:#?}");
    }
}

#[test]
fn read_only_shows_the_run_only_what_it_lists() {
    let env = Env::new();
    std::fs::write(env.project.join("notes.txt"), "the project's notes").unwrap();
    std::fs::write(env.user_home.join("diary.txt"), "the user's diary").unwrap();
    let only = format!("sandbox: {{read: {{only: [{}]}}, write: [worktree]}}\n", env.project.display());
    env.command_preset_with("narrow", &["sh", "-c", "cat notes.txt; cat ~/diary.txt || echo no-diary"], &only);
    let id = env.launch("narrow", "read");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let said = said(&env, &id);
    assert!(said.iter().any(|l| l.contains("the project's notes")), "{said:?}");
    assert!(said.iter().any(|l| l.contains("no-diary")), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("the user's diary")), "{said:?}");
}

#[test]
fn a_secret_or_a_writable_folder_behind_a_link_is_as_the_sandbox_says() {
    let env = Env::new();
    // ~/.ssh and ~/.netrc kept elsewhere (a dotfiles repository), linked.
    let dotfiles = env.project.join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("ssh")).unwrap();
    std::fs::write(dotfiles.join("ssh/id_ed25519"), "KEY").unwrap();
    std::fs::write(dotfiles.join("netrc"), "machine x password PASS").unwrap();
    std::os::unix::fs::symlink(dotfiles.join("ssh"), env.user_home.join(".ssh")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("netrc"), env.user_home.join(".netrc")).unwrap();
    // And a folder it may write, linked too.
    let real_out = env.project.join("real-out");
    std::fs::create_dir_all(&real_out).unwrap();
    std::os::unix::fs::symlink(&real_out, env.user_home.join("out")).unwrap();
    env.command_preset_with(
        "boxed",
        &["sh", "-c", "cat ~/.ssh/id_ed25519; cat ~/.netrc; echo x > ~/out/made; echo done"],
        "sandbox: {write: [~/out], network: none}\n",
    );
    let id = env.launch("boxed", "look");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let said = said(&env, &id);
    assert!(said.iter().any(|l| l.trim() == "done"), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("KEY") || l.contains("PASS")), "{said:?}");
    assert!(real_out.join("made").exists(), "{said:?}");
}

/// A sandboxed agent cannot let itself out with Corral's own verbs: it
/// cannot widen its own sandbox (`corral allow`), add or resume a schedule
/// (whose runs would start outside it) from the CLI or over MCP, and a run
/// it launches stays inside its sandbox.
#[test]
fn a_sandboxed_agent_cannot_widen_its_sandbox_or_schedule_work_outside_it() {
    let env = Env::new();
    let outside = env.user_home.join("escaped.txt");
    env.command_preset_with("open", &["sh", "-c", &format!("echo out > {}; echo child-ran", outside.display())], "");
    let agent = [
        MCP_CLIENT,
        r#"
def corral(*args):
    done = subprocess.run(["corral", *args], capture_output=True, text=True)
    print(args[0], done.returncode, (done.stdout + done.stderr).strip().replace("\n", " "), flush=True)
corral("allow", os.environ["CORRAL_RUN_ID"], "--host", "evil.example.com", "--quiet")
corral("schedule", "add", "later", "--preset", "open", "--every", "1h", "--", "x")
corral("launch", "--wait", "open", "--", "x")
added = mcp("add_schedule", {"name": "later", "preset": "open", "task": "x", "every": "1h"})
print("mcp", json.dumps(added), flush=True)
"#,
    ]
    .concat();
    env.command_preset_with("boxed", &["python3", "-c", &agent], "sandbox: {write: [worktree], network: none}\n");
    let id = env.launch("boxed", "x");
    let run = env.wait_end(&id);
    let said = said(&env, &id);
    let line = |verb: &str| said.iter().find(|l| l.starts_with(verb)).cloned().unwrap_or_default();
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    let allow = line("allow ");
    assert!(allow.starts_with("allow 2 ") && allow.contains(&format!("inside the sandbox of run {id}")), "{said:?}");
    assert!(!said.iter().any(|l| l.contains("sandbox widened")), "{said:?}");
    let schedule = line("schedule ");
    assert!(schedule.starts_with("schedule 2 ") && schedule.contains(&format!("sandbox of run {id}")), "{said:?}");
    let mcp = line("mcp ");
    assert!(mcp.contains(r#""isError": true"#) && mcp.contains("start outside the sandbox"), "{said:?}");
    assert!(env.json(&["schedule", "ls"]).as_array().unwrap().is_empty());
    // The child ran, inside its parent's sandbox.
    assert!(line("launch ").starts_with("launch 0 ") && line("launch ").contains("child-ran"), "{said:?}");
    assert!(!outside.exists(), "a child of a sandboxed run wrote outside it");
    // The user, in their own terminal, may.
    let out = env.ok(&["allow", &id, "--host", "example.com", "--quiet"]);
    assert!(out.contains("its sandbox now allows host example.com"), "{out}");
}

/// A sandboxed preset's `setup` (an `npm ci` runs the project's own
/// scripts) runs in the run's sandbox, as its agent does, and reaches the
/// hosts it lists through the same proxy.
#[test]
fn a_sandboxed_runs_setup_runs_in_its_sandbox() {
    let env = Env::new();
    let port = hello_server();
    let outside = env.user_home.join("escaped-by-setup.txt");
    let setup = format!(
        "[sh, -c, 'echo out > {}; echo in > made-by-setup; curl -sS http://127.0.0.1:{port}/setup']",
        outside.display()
    );
    env.command_preset_with(
        "prepared",
        &["sh", "-c", "cat made-by-setup"],
        &format!("setup: {setup}\nsandbox: {{write: [worktree], network: ['127.0.0.1:{port}']}}\n"),
    );
    let id = env.launch("prepared", "x");
    let run = env.wait_end(&id);
    let said = said(&env, &id);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    assert!(!outside.exists(), "setup wrote outside the sandbox");
    assert!(said.iter().any(|l| l.contains("Read-only file system")), "{said:?}");
    assert!(said.iter().any(|l| l.trim() == "hello"), "setup reached a listed host: {said:?}");
    assert!(said.iter().any(|l| l.trim() == "in"), "the agent read what setup made: {said:?}");
}

/// A run launched from inside a sandbox stays in that sandbox, whoever
/// starts it: at once (its own preset's sandbox cannot widen it), or later
/// from the queue by a process outside it.
#[test]
fn a_run_launched_inside_a_sandbox_stays_in_it_wherever_it_starts() {
    let env = Env::new();
    env.config("max_parallel = 1\n");
    let outside = env.user_home.join("escaped.txt");
    let write_outside = format!("echo out > {}; echo child-ran", outside.display());
    env.command_preset_with("open", &["sh", "-c", &write_outside], "");
    env.command_preset_with("wide", &["sh", "-c", &write_outside], "sandbox: {write: [worktree, \"~\"]}\n");
    // The parent holds the only slot: its child waits in the queue, and
    // the parent's shepherd, outside the sandbox, starts it as it ends.
    env.command_preset_with(
        "boxed",
        &["sh", "-c", "corral launch open -- queued"],
        "sandbox: {write: [worktree], network: none}\n",
    );
    let id = env.launch("boxed", "x");
    assert_eq!(env.wait_end(&id)["status"], "completed");
    let children = env.json(&["ls", "--all"]);
    let child = children.as_array().unwrap().iter().find(|r| r["task"] == "queued").cloned().unwrap();
    let child = env.wait_end(child["id"].as_str().unwrap());
    assert_eq!(child["status"], "completed", "{child:#}");
    assert!(!outside.exists(), "a run launched inside a sandbox wrote outside it, started from the queue");
    let notes = env.ok(&["show", child["id"].as_str().unwrap()]);
    assert!(notes.contains(&format!("run {id}'s sandbox, where it was launched")), "{notes}");
    // Started at once, a preset whose own sandbox writes the home is held
    // by its launcher's.
    env.config("max_parallel = 4\n");
    env.command_preset_with(
        "boxed2",
        &["sh", "-c", "corral launch --wait wide -- inner"],
        "sandbox: {write: [worktree], network: none}\n",
    );
    let id = env.launch("boxed2", "x");
    assert_eq!(env.wait_end(&id)["status"], "completed", "{:?}", said(&env, &id));
    let children = env.json(&["ls", "--all"]);
    let inner = children.as_array().unwrap().iter().find(|r| r["task"] == "inner").cloned().unwrap();
    let inner_id = inner["id"].as_str().unwrap().to_string();
    let inner = env.wait_end(&inner_id);
    assert_eq!(inner["status"], "completed", "{inner:#}\n{:?}", said(&env, &inner_id));
    assert!(!outside.exists(), "a run launched inside a sandbox wrote outside it");
    let notes = env.ok(&["show", &inner_id]);
    assert!(notes.contains(&format!("run {id}'s sandbox, where it was launched")), "{notes}");
}

/// Corral's store and other runs' folders are not seen inside a sandbox:
/// an agent that would write them directly (to widen its sandbox, or to
/// queue a run for a process outside to start) finds nothing to write, while
/// its `corral` — the CLI and an MCP server — is carried out by its
/// shepherd, outside, as its own, and lists only its own runs.
#[test]
fn a_sandboxed_agent_sees_nothing_of_corrals_store_and_acts_only_through_corral() {
    let env = Env::new();
    env.command_preset("quick", &["sh", "-c", "echo child says hi"]);
    let agent = [MCP_CLIENT, r#"
import sqlite3
home = os.environ["CORRAL_HOME"]
print("store seen" if os.path.exists(os.path.join(home, "corral.db")) else "store unseen", flush=True)
print("others seen" if len(os.listdir(os.path.join(home, "runs"))) > 1 else "others unseen", flush=True)
try:
    db = sqlite3.connect(os.path.join(home, "corral.db"))
    db.execute("INSERT INTO sandbox_allows (run_id, kind, value, allowed_at) VALUES (?, 'host', 'evil.example.com', 'now')", (os.environ["CORRAL_RUN_ID"],))
    db.commit()
    print("store written", flush=True)
except Exception as e:
    print("store refused:", e, flush=True)
try:
    open(os.path.join(home, "runs", "planted"), "w").write("x")
    print("folder written", flush=True)
except OSError as e:
    print("folder refused:", e.strerror, flush=True)
listed = subprocess.run(["corral", "ls", "--json"], capture_output=True, text=True)
print("ls", listed.returncode, len(json.loads(listed.stdout)), flush=True)
removed = subprocess.run(["corral", "rm", "--all"], capture_output=True, text=True)
print("rm", removed.returncode, removed.stderr.strip(), flush=True)
launched = mcp("launch_agent", {"preset": "quick", "task": "hi"})
child = json.loads(launched["content"][0]["text"])["run_id"]
waited = mcp("wait_agents", {"run_ids": [child], "timeout_s": 30})
print("mcp", json.loads(waited["content"][0]["text"])["runs"][0]["status"], flush=True)
"#]
    .concat();
    env.command_preset_with("boxed", &["python3", "-c", &agent], "sandbox: {write: [worktree], network: none}\n");
    let other = env.launch("quick", "another run's folder");
    env.wait_end(&other);
    let id = env.launch("boxed", "x");
    let run = env.wait_end(&id);
    let said = said(&env, &id);
    assert_eq!(run["status"], "completed", "{run:#}\n{said:?}");
    // Corral's data is not seen inside: not the store, not another run's folder.
    assert!(said.iter().any(|l| l == "store unseen") && said.iter().any(|l| l == "others unseen"), "{said:?}");
    assert!(said.iter().any(|l| l.starts_with("store refused")), "{said:?}");
    assert!(said.iter().any(|l| l == "folder refused: Read-only file system"), "{said:?}");
    assert!(!env.home.join("runs/planted").exists());
    assert!(said.iter().any(|l| l == "ls 0 1"), "corral ls works inside, forwarded, its own runs only: {said:?}");
    assert!(said.iter().any(|l| l.starts_with("rm 2 ") && l.contains(&format!("sandbox of run {id}"))), "{said:?}");
    assert!(said.iter().any(|l| l == "mcp completed"), "an MCP server inside works, forwarded: {said:?}");
    // Its sandbox was not widened, and nothing of its commands is left.
    assert!(!said.iter().any(|l| l.contains("sandbox widened")), "{said:?}");
    assert!(!env.run_dir(&id).join("corral.sock").exists());
}

/// A run with a worktree of its own, launched from inside a sandbox, writes
/// that worktree (a copy only the user's merge brings back) and nothing
/// its launcher could not.
#[test]
fn a_worker_launched_inside_a_sandbox_writes_its_own_worktree() {
    let env = Env::new();
    git(&env.project, &["init", "-q", "-b", "main"]);
    std::fs::write(env.project.join("README"), "hi\n").unwrap();
    git(&env.project, &["add", "."]);
    git(&env.project, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"]);
    let outside = env.user_home.join("escaped.txt");
    let work = format!("echo out > {} 2>/dev/null; echo work > done.txt && echo done", outside.display());
    env.command_preset_with("worker", &["sh", "-c", &work], "worktree: true\n");
    env.command_preset_with(
        "lead",
        &["sh", "-c", "corral launch --wait worker -- w"],
        "sandbox: {write: [worktree], network: none}\n",
    );
    let id = env.launch("lead", "x");
    assert_eq!(env.wait_end(&id)["status"], "completed", "{:?}", said(&env, &id));
    let runs = env.json(&["ls", "--all"]);
    let worker = runs.as_array().unwrap().iter().find(|r| r["task"] == "w").cloned().unwrap();
    let worker = env.wait_end(worker["id"].as_str().unwrap());
    let worktree = worker["worktree"]["path"].as_str().unwrap();
    assert_eq!(worker["final_text"], "done", "{worker:#}");
    assert!(std::path::Path::new(worktree).join("done.txt").exists(), "{worker:#}");
    assert!(!outside.exists(), "a worker launched inside a sandbox wrote outside it");
}

/// A run launched inside a sandbox whose own preset asks for a narrower
/// one gets the narrower: a reviewer launched by a run that writes the
/// project writes nothing.
#[test]
fn a_reviewer_launched_inside_a_writing_sandbox_writes_nothing() {
    let env = Env::new();
    env.command_preset_with("reviewer", &["sh", "-c", "echo x > reviewed.txt; echo reviewed"], "sandbox: reviewer\n");
    env.command_preset_with(
        "lead",
        &["sh", "-c", "echo lead > lead.txt; corral launch --wait reviewer -- r; true"],
        "sandbox: {write: [worktree], network: none}\n",
    );
    let id = env.launch("lead", "x");
    assert_eq!(env.wait_end(&id)["status"], "completed", "{:?}", said(&env, &id));
    assert!(env.project.join("lead.txt").exists(), "the lead writes its folder");
    let runs = env.json(&["ls", "--all"]);
    let reviewer = runs.as_array().unwrap().iter().find(|r| r["task"] == "r").cloned().unwrap();
    let reviewer_id = reviewer["id"].as_str().unwrap().to_string();
    env.wait_end(&reviewer_id);
    assert!(!env.project.join("reviewed.txt").exists(), "a reviewer wrote, launched inside a sandbox that writes");
    let notes = env.ok(&["show", &reviewer_id]);
    assert!(notes.contains(&format!("reviewer within run {id}'s sandbox, where it was launched")), "{notes}");
    assert!(denials(&env, &reviewer_id).iter().any(|d| d.contains("refused writing")), "{notes}");
}
