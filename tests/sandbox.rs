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

fn denials(env: &Env, id: &str) -> Vec<String> {
    transcript(env, id)
        .iter()
        .filter(|e| e["kind"] == "denial")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect()
}

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
    let said: Vec<String> =
        transcript(&env, &id).iter().map(|e| e["text"].as_str().unwrap_or("").to_string()).collect();
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
    assert!(denials.iter().any(|d| d.contains("refused reading") && d.contains(".ssh/id_ed25519")), "{denials:?}");
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
        "sandbox: {network: none}\n",
    );
    let id = env.launch("offline", "look");
    let run = env.wait_end(&id);
    let said: Vec<String> =
        transcript(&env, &id).iter().map(|e| e["text"].as_str().unwrap_or("").to_string()).collect();
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
    env.command_preset_with("listed", &["sh", "-c", &script], "sandbox: {network: [127.0.0.1]}\n");
    let id = env.launch("listed", "reach");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let events = transcript(&env, &id);
    let said: Vec<&str> = events.iter().map(|e| e["text"].as_str().unwrap_or("")).collect();
    // The listed host answers, through the proxy, twice.
    assert_eq!(said.iter().filter(|l| l.trim() == "hello").count(), 2, "{said:?}");
    assert!(said.iter().any(|l| l.contains("sandbox: reaches only 127.0.0.1")), "{said:?}");
    // Another is refused, and said once.
    let denials = denials(&env, &id);
    assert_eq!(denials.len(), 1, "{denials:?}\n{said:?}");
    assert!(denials[0].contains("refused connecting to example.com"), "{denials:?}");
    assert_eq!(run["denied"], serde_json::json!(["sandbox: connect example.com"]), "{run:#}");
    // Nothing of Corral's stays in the sandbox after its agent.
    assert!(!env.run_dir(&id).join("net.sock").exists());
}
