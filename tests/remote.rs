//! Runs on a remote host over SSH, against Debian's real `sshd` on a
//! loopback port, with a host key and a user key made here and a separate
//! `CORRAL_HOME` as the remote side. What a user sees: the run launched
//! there, followed here, stopped there, surviving the connection, caught up
//! after an outage and announced once.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{corral_bin, eventually, Env};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(30);

/// An `sshd` of its own, and the remote side's Corral home.
struct Remote {
    dir: tempfile::TempDir,
    port: u16,
    sshd: Option<Child>,
    /// The remote CORRAL_HOME.
    home: PathBuf,
}

impl Remote {
    /// Starts sshd, or says why it cannot run here.
    fn start() -> Option<Remote> {
        Remote::start_with("")
    }

    /// Starts sshd with `extra` lines of its configuration.
    fn start_with(extra: &str) -> Option<Remote> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            println!("SKIPPED (cannot run here): no /usr/sbin/sshd (Debian: apt install openssh-server)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for key in ["host_key", "user_key"] {
            let made = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "corral-test", "-f"])
                .arg(d.join(key))
                .status()
                .unwrap();
            assert!(made.success());
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
        let port = free_port();
        let host_key = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        std::fs::write(d.join("known_hosts"), format!("[127.0.0.1]:{port} {host_key}")).unwrap();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nPidFile {dir}/sshd.pid\n\
                 AuthorizedKeysFile {dir}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nLogLevel ERROR\n{extra}",
                dir = d.display()
            ),
        )
        .unwrap();
        // sshd's privilege separation folder (made by its package's service).
        let _ = std::fs::create_dir_all("/run/sshd");
        let home = d.join("remote-home");
        std::fs::create_dir_all(home.join("presets")).unwrap();
        let mut remote = Remote { dir, port, sshd: None, home };
        remote.start_sshd();
        Some(remote)
    }

    fn start_sshd(&mut self) {
        let d = self.dir.path();
        let log = std::fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stderr(log)
            .spawn()
            .unwrap();
        self.sshd = Some(child);
        let port = self.port;
        assert!(
            eventually(LIMIT, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()),
            "sshd did not start: {}",
            std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default()
        );
    }

    /// Stops sshd and every connection it serves.
    fn stop_sshd(&mut self) {
        self.kill_connections();
        if let Some(mut child) = self.sshd.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the processes serving this sshd's connections (the network
    /// dropping): its children, one per connection.
    fn kill_connections(&self) {
        if let Some(sshd) = &self.sshd {
            let _ = Command::new("pkill").args(["-KILL", "-P", &sshd.id().to_string()]).status();
        }
    }

    /// True while this sshd serves a connection.
    fn has_connections(&self) -> bool {
        let parent = self.sshd.as_ref().map_or(0, |c| c.id()).to_string();
        Command::new("pgrep").args(["-P", &parent]).stdout(Stdio::null()).status().unwrap().success()
    }

    /// `[hosts.box]` for an installation here.
    fn host_config(&self) -> String {
        let d = self.dir.path();
        format!(
            "[hosts.box]\nssh = \"{user}@127.0.0.1\"\nport = {port}\nidentity_file = \"{d}/user_key\"\n\
             ssh_options = [\"-o\", \"UserKnownHostsFile={d}/known_hosts\", \"-o\", \"StrictHostKeyChecking=yes\", \
             \"-o\", \"ControlPersist=no\"]\ncorral = \"{corral}\"\nhome = \"{home}\"\n",
            user = whoami(),
            port = self.port,
            d = d.display(),
            corral = corral_bin().display(),
            home = self.home.display(),
        )
    }

    /// A global preset on the remote side running `argv`.
    fn preset(&self, name: &str, argv: &[&str]) {
        let command = serde_json::to_string(argv).unwrap();
        std::fs::write(
            self.home.join("presets").join(format!("{name}.md")),
            format!("---\nname: {name}\ndescription: remote test\nagent: command\ncommand: {command}\n---\n"),
        )
        .unwrap();
    }

    /// A remote preset `gated` that waits for a file, then prints
    /// `through`; returns the file to create.
    fn gated_preset(&self) -> PathBuf {
        let gate = self.dir.path().join("gate");
        let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done; echo through", gate.display());
        self.preset("gated", &["sh", "-c", &script]);
        gate
    }

    /// An installation here whose host `box` runs the fake spending `pi`
    /// (preset `spend` there), its `corral` started with `vars` (`K=V …`).
    fn spending_there(&self, vars: &str) -> Env {
        let d = self.dir.path();
        let bin = d.join("remote-bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(common::fake_agent("spender"), bin.join("pi")).unwrap();
        let wrapper = d.join("corral-there");
        let script =
            format!("#!/bin/sh\nPATH='{}':\"$PATH\" {vars} exec '{}' \"$@\"\n", bin.display(), corral_bin().display());
        std::fs::write(&wrapper, script).unwrap();
        std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::write(self.home.join("presets/spend.md"), "---\nname: spend\ndescription: d\nagent: pi\n---\n")
            .unwrap();
        let env = Env::new();
        env.config(&self.host_config().replace(&corral_bin().display().to_string(), &wrapper.display().to_string()));
        env
    }

    /// `corral ARGS --json` run on the remote side directly (not over SSH);
    /// exit 1 (a run that did not complete) is an answer too.
    fn json(&self, args: &[&str]) -> Value {
        let out = Command::new(corral_bin()).args(args).arg("--json").env("CORRAL_HOME", &self.home).output().unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "remote corral {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.stop_sshd();
        // Launches there started the host's launch template.
        common::end_template(&self.home);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn whoami() -> String {
    String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap().trim().to_string()
}

/// A local installation with the remote as `box`.
fn local(remote: &Remote) -> Env {
    let env = Env::new();
    env.config(&remote.host_config());
    env
}

fn alive_with(marker: &str) -> bool {
    Command::new("pgrep").args(["-f", marker]).stdout(Stdio::null()).status().unwrap().success()
}

#[test]
fn a_task_full_of_shell_metacharacters_arrives_there_as_written_and_the_run_is_followed_here() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("echo-task", &["sh", "-c", "cat \"$CORRAL_TASK_FILE\""]);
    let task = "it's $(touch /tmp/pwned) `id`; rm -rf ~ && echo $HOME | cat\nsecond line \"quoted\" \\ *";
    let launched = env.json(&["launch", "--host", "box", "echo-task", task]);
    let id = launched["id"].as_str().unwrap().to_string();
    assert_eq!(launched["host"], "box", "{launched:#}");
    let done = env.ok(&["wait", &id]);
    assert!(done.contains("completed"), "{done}");
    let there = remote.json(&["show", &id]);
    assert_eq!(there["final_text"].as_str().unwrap().trim_end(), task);
    assert_eq!(there["task"], task);
    // Shown here with its host, as it ended there.
    let listed = env.json(&["ls"]);
    let run = listed.as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).expect("listed here");
    assert_eq!(run["host"], "box");
    assert_eq!(run["status"], "completed");
    let text = env.ok(&["ls"]);
    assert!(text.contains("box:"), "{text}");
    let shown = env.json(&["show", &id]);
    assert_eq!(shown["status"], "completed");
    // Filtered by machine.
    env.command_preset("here", &["true"]);
    let local_id = env.launch("here", "a local run");
    env.wait_end(&local_id);
    let ids = |args: &[&str]| -> Vec<String> {
        env.json(args).as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&["ls", "--host", "box"]), std::slice::from_ref(&id));
    assert_eq!(ids(&["ls", "--host", "local"]), std::slice::from_ref(&local_id));
    let everything = ids(&["ls"]);
    assert!(everything.contains(&id) && everything.contains(&local_id));
    // Search looks there too.
    let hits = env.json(&["search", "second line"]);
    assert!(hits.as_array().unwrap().iter().any(|h| h["id"] == id.as_str() && h["host"] == "box"), "{hits:#}");
    let here = env.json(&["search", "--local", "second line"]);
    assert_eq!(here, serde_json::json!([]));
}

#[test]
fn abort_here_stops_the_run_there_and_leaves_no_process() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let marker = format!("30{}7", std::process::id() % 100_000);
    remote.preset("long", &["sh", "-c", &format!("sleep {marker} & sleep {marker}1")]);
    let id = env.ok(&["launch", "--host", "box", "long", "x"]).trim().to_string();
    assert!(eventually(LIMIT, || alive_with(&format!("sleep {marker}1"))));
    env.ok(&["abort", &id]);
    let there = remote.json(&["wait", &id]);
    assert_eq!(there[0]["status"], "aborted", "{there:#}");
    assert!(eventually(LIMIT, || !alive_with(&format!("sleep {marker}"))), "a process of the run outlived it");
}

#[test]
fn a_run_there_goes_on_when_the_connection_is_killed_and_a_wait_here_sees_its_end() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let id = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();
    // A wait over SSH is in progress when the connection dies.
    let waiting = env.command(&["wait", &id]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    assert!(eventually(LIMIT, || remote.has_connections()));
    remote.kill_connections();
    std::fs::write(&gate, "").unwrap();
    let there = remote.json(&["wait", &id]);
    assert_eq!(there[0]["status"], "completed", "the run died with the connection: {there:#}");
    assert_eq!(there[0]["final_text"].as_str().unwrap().trim(), "through");
    let waited = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&waited.stderr);
    assert!(waited.status.success(), "the wait here ends as the run did: {said}");
    assert!(String::from_utf8_lossy(&waited.stdout).contains("completed"));
}

#[test]
fn a_host_down_during_a_run_is_said_so_then_caught_up_and_the_end_announced_once() {
    let Some(mut remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let id = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();

    let home = corral::Home::at(&env.home);
    let config = corral::home::config::Config::load(&home).unwrap();
    let host = config.host("box").unwrap().clone();
    let following = corral::remote::Following::default();
    let lock = corral::remote::FollowLock::try_take(&home, "box").expect("no one follows yet");
    let follower = {
        let (home, host, following) = (home.clone(), host.clone(), following.clone());
        std::thread::spawn(move || corral::remote::follow(&home, &host, &following, lock))
    };
    let store = corral::Store::open(&home).unwrap();
    let running = |s: &corral::Store| {
        s.remote_runs(Some("box")).unwrap().iter().any(|r| r.id == id && r.status == corral::RunStatus::Running)
    };
    assert!(eventually(LIMIT, || running(&store)), "the run is followed here");
    assert!(store.host_state("box").unwrap().unwrap().reachable);

    remote.stop_sshd();
    assert!(
        eventually(LIMIT, || store.host_state("box").unwrap().is_some_and(|s| !s.reachable)),
        "the host is said unreachable"
    );
    let text = env.ok(&["ls"]);
    assert!(text.contains("unreachable since"), "its run says so, not lost nor failed:\n{text}");
    let listed = env.json(&["ls"]);
    let run = listed.as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).unwrap().clone();
    assert!(run["unreachable_since"].is_string(), "{run:#}");
    assert_eq!(run["status"], "running", "as last seen");
    assert!(running(&store), "neither lost nor failed while unreachable");
    assert_eq!(store.counts().unwrap().running, 0, "nor counted as running in the tray");

    std::fs::write(&gate, "").unwrap();
    remote.json(&["wait", &id]);
    remote.start_sshd();
    let ended = |s: &corral::Store| {
        s.remote_runs(Some("box")).unwrap().iter().any(|r| r.id == id && r.status == corral::RunStatus::Completed)
    };
    assert!(eventually(Duration::from_secs(60), || ended(&store)), "caught up after the outage");
    assert!(store.host_state("box").unwrap().unwrap().reachable);
    let mut store = store;
    let announced = store.claim_remote_endings(10).unwrap();
    assert_eq!(announced.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    assert!(store.claim_remote_endings(10).unwrap().is_empty(), "announced once");
    following.stop();
    follower.join().unwrap();
}

#[test]
fn a_parent_there_waits_for_the_children_it_launched_there() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let corral = corral_bin();
    remote.preset("child", &["sh", "-c", "sleep 0.5; echo child-done"]);
    remote.preset(
        "parent",
        &["sh", "-c", &format!("'{}' launch child c >/dev/null && echo parent-turn-done", corral.display())],
    );
    let id = env.ok(&["launch", "--host", "box", "parent", "x"]).trim().to_string();
    let there = remote.json(&["wait", &id]);
    let parent = &there[0];
    let child_id = parent["children"][0].as_str().expect("a child run there").to_string();
    let child = remote.json(&["show", &child_id]);
    assert_eq!(child["status"], "completed");
    assert!(
        parent["completed_at"].as_str().unwrap() >= child["completed_at"].as_str().unwrap(),
        "the parent ended before its child: {parent:#} {child:#}"
    );
}

#[test]
fn fifty_runs_there_at_once_are_all_followed_to_their_end() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("quick", &["sh", "-c", "echo done"]);
    let launches: Vec<_> = (0..50)
        .map(|i| {
            let mut launch = env.command(&["launch", "--host", "box", "quick", &format!("run {i}")]);
            launch.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let ids: Vec<String> = launches
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 50);
    let all_done = || {
        let listed = env.json(&["ls", "--all"]);
        let done =
            listed.as_array().unwrap().iter().filter(|r| r["host"] == "box" && r["status"] == "completed").count();
        done == 50
    };
    assert!(eventually(Duration::from_secs(90), all_done), "every remote run is shown completed here");
}

#[test]
fn a_wrong_name_a_refused_key_an_unknown_host_key_or_no_corral_there_are_said_clearly() {
    let Some(remote) = Remote::start() else { return };
    let env = Env::new();
    let base = remote.host_config();
    let d = remote.dir.path().display().to_string();
    let other_key = remote.dir.path().join("other_key");
    Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&other_key).status().unwrap();
    let cases = [
        (base.replace("[hosts.box]", "[hosts.other]"), "no host 'box' in config.toml"),
        (base.replace(&format!("{d}/user_key"), &other_key.display().to_string()), "refused the key"),
        (base.replace(&format!("{d}/known_hosts"), "/dev/null"), "host key is not known"),
        (base.replace(&corral_bin().display().to_string(), "/nonexistent/corral"), "has no `/nonexistent/corral`"),
    ];
    for (config, said) in cases {
        env.config(&config);
        let out = env.corral(&["launch", "--host", "box", "anything", "x"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{said}: {stderr}");
        assert!(stderr.contains(said), "wanted '{said}', got: {stderr}");
    }
    // Bad input is refused before anything crosses.
    env.config(&base);
    let mut big = env.command(&["launch", "--host", "box", "anything", "-"]);
    let mut child = big.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &vec![b'x'; 2 << 20]).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a 2 MiB task: {}", String::from_utf8_lossy(&out.stderr));
    let mut non_utf8 = env.command(&["launch", "--host", "box", "anything", "x", "--cwd"]);
    non_utf8.arg(std::ffi::OsStr::from_bytes(b"/tmp/\xff"));
    let out = non_utf8.output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be UTF-8"), "{}", String::from_utf8_lossy(&out.stderr));
    // Nothing was recorded for a launch that did not happen.
    assert_eq!(env.json(&["ls", "--all"]), serde_json::json!([]));
}

#[test]
fn watch_streams_every_change_after_a_number_and_says_when_caught_up() {
    let env = Env::new();
    env.command_preset("quick", &["true"]);
    let first = env.ok(&["launch", "quick", "one"]).trim().to_string();
    env.ok(&["wait", &first]);
    let out = env.ok(&["watch", "--json", "--since", "0", "--until-caught-up"]);
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = lines.last().unwrap();
    let caught_up = last["caught_up"].as_i64().expect("ends caught up");
    let runs: Vec<&Value> = lines.iter().filter(|l| l.get("run").is_some()).collect();
    assert_eq!(runs.len(), 1, "each changed run once, at its latest state: {out}");
    assert_eq!(runs[0]["run"]["status"], "completed");
    assert_eq!(runs[0]["seq"].as_i64(), Some(caught_up));

    // Following from there: a new run's changes, then its removal, in order.
    let mut watch =
        env.command(&["watch", "--json", "--since", &caught_up.to_string()]).stdout(Stdio::piped()).spawn().unwrap();
    let second = env.ok(&["launch", "quick", "two"]).trim().to_string();
    env.ok(&["wait", &second]);
    env.ok(&["rm", &second]);
    let reader = std::io::BufReader::new(watch.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in std::io::BufRead::lines(reader) {
        let line: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let removed = line.get("removed").is_some();
        seen.push(line);
        if removed {
            break;
        }
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    let numbers: Vec<i64> = seen.iter().filter_map(|l| l["seq"].as_i64()).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "numbers only grow: {numbers:?}");
    assert!(seen.iter().any(|l| l["run"]["id"] == second.as_str() && l["run"]["status"] == "completed"), "{seen:#?}");
    assert_eq!(seen.last().unwrap()["removed"], second.as_str());
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_launches_on_a_host_and_waits_for_it_through_mcp() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("echo-task", &["sh", "-c", "cat \"$CORRAL_TASK_FILE\""]);
    env.command_preset("me", &["true"]);
    // The calling agent's own run, at work (a run that ended launches nothing).
    env.command_preset("lead", &["sleep", "120"]);
    let caller = env.launch("lead", "the orchestrator's own run");
    env.wait_run(&caller, LIMIT, |r| r["status"] == "running");
    let client = common::mcp::connect(&env, Some(&caller)).await;
    let (error, launched) = common::mcp::call(
        &client,
        "launch_agent",
        serde_json::json!({"preset": "echo-task", "task": "from the agent; $(not run)", "host": "box"}),
    )
    .await;
    assert!(!error, "{launched}");
    assert_eq!(launched["host"], "box");
    let id = launched["run_id"].as_str().unwrap().to_string();
    let (error, waited) =
        common::mcp::call(&client, "wait_agents", serde_json::json!({"run_ids": [id], "timeout_s": 30})).await;
    assert!(!error, "{waited}");
    assert_eq!(waited["all_completed"], true, "{waited}");
    assert_eq!(waited["runs"][0]["final_text"].as_str().unwrap().trim(), "from the agent; $(not run)");

    // Its runs here and there, listed and waited for together.
    let (error, here) =
        common::mcp::call(&client, "launch_agent", serde_json::json!({"preset": "me", "task": "t"})).await;
    assert!(!error, "{here}");
    let local_id = here["run_id"].as_str().unwrap().to_string();
    let (error, waited) =
        common::mcp::call(&client, "wait_agents", serde_json::json!({"run_ids": [local_id, id], "timeout_s": 30}))
            .await;
    assert!(!error, "a wait on a run here and one on a host: {waited}");
    assert_eq!(waited["all_completed"], true, "{waited}");
    assert_eq!(waited["runs"][0]["run_id"], local_id.as_str());
    assert_eq!(waited["runs"][1]["run_id"], id.as_str());
    assert_eq!(waited["runs"][1]["host"], "box");
    let (error, listed) = common::mcp::call(&client, "agent_status", serde_json::json!({})).await;
    assert!(!error, "{listed}");
    let listed = listed.as_array().unwrap();
    assert!(listed.iter().any(|r| r["run_id"] == id.as_str() && r["host"] == "box"), "{listed:#?}");
    assert!(listed.iter().any(|r| r["run_id"] == local_id.as_str()), "{listed:#?}");

    // Another agent's run on the host is not this one's to see.
    env.command_preset("other", &["true"]);
    let stranger = env.launch("other", "someone else");
    env.wait_end(&stranger);
    let other = common::mcp::connect(&env, Some(&stranger)).await;
    let (error, said) = common::mcp::call(&other, "agent_status", serde_json::json!({"run_id": id})).await;
    assert!(error, "{said}");
    let (error, said) =
        common::mcp::call(&client, "launch_agent", serde_json::json!({"preset": "x", "task": "y", "host": "nowhere"}))
            .await;
    assert!(error && said.as_str().unwrap().contains("no host 'nowhere'"), "{said}");
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

#[test]
fn hosts_add_checks_the_host_then_lists_it_and_follow_keeps_its_runs_here() {
    let Some(remote) = Remote::start() else { return };
    let env = Env::new();
    env.config("");
    let d = remote.dir.path().display().to_string();
    let add = |corral: &str| {
        env.corral(&[
            "hosts",
            "add",
            "box",
            &format!("{}@127.0.0.1", whoami()),
            "--port",
            &remote.port.to_string(),
            "--identity-file",
            &format!("{d}/user_key"),
            &format!("--ssh-option=-oUserKnownHostsFile={d}/known_hosts"),
            "--corral",
            corral,
            "--home",
            &remote.home.display().to_string(),
        ])
    };
    let missing = add("/nonexistent/corral");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{said}");
    assert!(said.contains("--install"), "says how to install it: {said}");
    assert!(!std::fs::read_to_string(env.home.join("config.toml")).unwrap().contains("hosts"), "nothing written");

    let added = add(&corral_bin().display().to_string());
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let listed = env.json(&["hosts"]);
    assert_eq!(listed[0]["name"], "box");
    assert_eq!(listed[0]["reachable"], true, "{listed:#}");
    assert_eq!(listed[0]["about"]["version"], env!("CARGO_PKG_VERSION"));

    // `hosts follow` keeps the mirror current, as the tray does.
    let mut follow = env.command(&["hosts", "follow"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    remote.preset("quick", &["sh", "-c", "echo done"]);
    let there = Command::new(corral_bin())
        .args(["launch", "quick", "started there", "--json"])
        .env("CORRAL_HOME", &remote.home)
        .output()
        .unwrap();
    let id = serde_json::from_slice::<Value>(&there.stdout).unwrap()["id"].as_str().unwrap().to_string();
    let store = env.store();
    let followed = || {
        store.remote_runs(Some("box")).unwrap().iter().any(|r| r.id == id && r.status == corral::RunStatus::Completed)
    };
    assert!(eventually(LIMIT, followed), "a run started there is followed here");
    follow.kill().unwrap();
    follow.wait().unwrap();
}

#[test]
fn a_reply_here_continues_the_agents_session_there() {
    let Some(remote) = Remote::start() else { return };
    let d = remote.dir.path();
    // The remote user's PATH has a `claude` (the conversing fake).
    let bin = d.join("remote-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(common::fake_agent("conversing"), bin.join("claude")).unwrap();
    let log = d.join("turns.log");
    let wrapper = d.join("corral-there");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nPATH='{}':\"$PATH\" CONVERSE_LOG='{}' exec '{}' \"$@\"\n",
            bin.display(),
            log.display(),
            corral_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(remote.home.join("presets/talk.md"), "---\nname: talk\ndescription: d\nagent: claude\n---\n")
        .unwrap();
    let env = Env::new();
    env.config(&remote.host_config().replace(&corral_bin().display().to_string(), &wrapper.display().to_string()));

    let id = env.ok(&["launch", "--host", "box", "talk", "write the parser"]).trim().to_string();
    assert!(env.ok(&["wait", &id]).contains("completed"));
    let out = env.corral(&["reply", &id, "now", "add", "tests", "--wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let there = remote.json(&["show", &id]);
    assert_eq!(there["final_text"], "Echo: now add tests");
    let turns = std::fs::read_to_string(&log).unwrap();
    assert!(turns.lines().nth(1).is_some_and(|t| t.starts_with("resume=conv-session")), "{turns}");

    // A reply longer than one argument may be (128 KB) crosses whole.
    let words: Vec<String> = (0..2_000).map(|i| format!("{i:05}{}", "x".repeat(95))).collect();
    let mut args = vec!["reply", &id];
    args.extend(words.iter().map(String::as_str));
    args.push("--wait");
    let out = env.corral(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let there = remote.json(&["show", &id]);
    assert_eq!(there["final_text"].as_str().unwrap(), format!("Echo: {}", words.join(" ")));
}

#[test]
fn a_run_here_waits_for_the_run_its_agent_launched_on_a_host() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    // The agent launches on the host and its turn ends at once.
    env.command_preset("orchestrate", &["sh", "-c", "corral launch --host box gated 'from the agent' >/dev/null"]);
    let parent = env.launch("orchestrate", "x");
    let waiting = env.wait_run(&parent, LIMIT, |r| r["status"] == "waiting");
    assert_eq!(waiting["status"], "waiting", "the parent waits for its run on the host: {waiting:#}");
    let store = env.store();
    let child = store.remote_children(&parent).unwrap();
    assert_eq!(child.len(), 1, "recorded as launched by the parent");
    std::fs::write(&gate, "").unwrap();
    let ended = env.wait_end(&parent);
    assert_eq!(ended["status"], "completed", "{ended:#}");
    let there = remote.json(&["show", &child[0].id]);
    assert_eq!(there["status"], "completed");
    assert!(
        ended["completed_at"].as_str().unwrap() >= there["completed_at"].as_str().unwrap(),
        "the parent ended before its run on the host: {ended:#} {there:#}"
    );
}

/// A user of this machine whose login shell is `shell`, with a Corral home
/// and a preset `p` there; removed when dropped.
struct ShellUser {
    name: String,
    home: PathBuf,
}

impl ShellUser {
    fn new(shell: &str, tag: &str) -> Option<ShellUser> {
        if !Path::new(shell).exists() || !nix::unistd::geteuid().is_root() {
            println!("SKIPPED (cannot run here): no {shell} (scripts/setup.sh installs it), or not root");
            return None;
        }
        let name = format!("crl{}{tag}", std::process::id() % 100_000);
        let home = PathBuf::from(format!("/tmp/{name}-home"));
        let made = Command::new("useradd").args(["-m", "-d"]).arg(&home).args(["-s", shell, &name]).status().unwrap();
        assert!(made.success(), "useradd {name}");
        // Not locked (sshd refuses a locked account's key): no password.
        assert!(Command::new("usermod").args(["-p", "*", &name]).status().unwrap().success());
        let presets = home.join("corral/presets");
        std::fs::create_dir_all(&presets).unwrap();
        std::fs::write(presets.join("p.md"), "---\nname: p\ndescription: d\nagent: command\ncommand: [true]\n---\n")
            .unwrap();
        let owned = Command::new("chown").args(["-R", &format!("{name}:"), home.to_str().unwrap()]).status().unwrap();
        assert!(owned.success());
        Some(ShellUser { name, home })
    }
}

impl Drop for ShellUser {
    fn drop(&mut self) {
        let _ = Command::new("pkill").args(["-KILL", "-u", &self.name]).status();
        let _ = Command::new("userdel").args(["-r", &self.name]).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

#[test]
fn no_login_shell_reads_a_word_of_a_command_and_a_words_tilde_stays() {
    let Some(remote) = Remote::start() else { return };
    for (tag, shell) in
        [("s", "/bin/sh"), ("b", "/bin/bash"), ("z", "/usr/bin/zsh"), ("f", "/usr/bin/fish"), ("t", "/usr/bin/tcsh")]
    {
        let Some(user) = ShellUser::new(shell, tag) else { continue };
        let env = Env::new();
        env.config(&as_user(&remote, &user));
        let marker = format!("/tmp/corral-pwned-{}-{tag}", std::process::id());
        // fish reads `\'` inside single quotes as a quote: the old quoting
        // ended there and ran `(touch …)`; `~/` in a word is the word's.
        let model = format!("it\\'s (touch {marker}) $(touch {marker}) `touch {marker}` ~/model");
        let out = env.corral(&["launch", "--host", "box", "p", "x", "--model", &model, "--json"]);
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string();
        let shown = env.json(&["show", &id]);
        assert!(!Path::new(&marker).exists(), "{shell} ran a command from a word");
        assert_eq!(shown["model"], model.as_str(), "{shell}: the word changed on its way");
    }
}

/// The local installation's `[hosts.box]` reaching `user` with its own
/// Corral home.
fn as_user(remote: &Remote, user: &ShellUser) -> String {
    remote.host_config().replace(&format!("\"{}@", whoami()), &format!("\"{}@", user.name)).replace(
        &format!("home = \"{}\"", remote.home.display()),
        &format!("home = \"{}\"", user.home.join("corral").display()),
    )
}

#[test]
fn a_login_shell_that_prints_a_banner_garbles_no_answer() {
    let Some(remote) = Remote::start() else { return };
    let Some(user) = ShellUser::new("/usr/bin/zsh", "g") else { return };
    // zsh reads ~/.zshenv for every command ssh runs, as a motd script would.
    std::fs::write(
        user.home.join(".zshenv"),
        "echo 'Welcome to box'\necho 'Last login: never' >&2\nprintf '{\"not\": \"ours\"'\nprintf 'oops' >&2\n",
    )
    .unwrap();
    let env = Env::new();
    env.config(&as_user(&remote, &user));
    let launched = env.corral(&["launch", "--host", "box", "p", "x", "--json"]);
    assert!(launched.status.success(), "{}", String::from_utf8_lossy(&launched.stderr));
    let id = serde_json::from_slice::<Value>(&launched.stdout).expect("launch --json is the run alone")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let waited = env.corral(&["wait", &id]);
    assert!(waited.status.success(), "{}", String::from_utf8_lossy(&waited.stderr));
    assert!(!String::from_utf8_lossy(&waited.stdout).contains("Welcome"));
    assert_eq!(env.json(&["show", &id])["status"], "completed");
    let listed = env.json(&["ls", "--host", "box"]);
    assert_eq!(listed[0]["id"], id.as_str(), "followed through the banner: {listed:#}");
    assert_eq!(listed[0]["status"], "completed");
    let refused = env.corral(&["launch", "--host", "box", "nosuch", "x"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        said.starts_with("corral: on host 'box': ") && !said.contains("Last login") && !said.contains("oops"),
        "{said}"
    );
}

#[test]
fn two_host_entries_for_one_name_behind_two_jump_hosts_are_two_machines() {
    if Command::new("nc").arg("-h").stderr(Stdio::null()).status().is_err() {
        println!("SKIPPED (cannot run here): no nc (Debian's netcat-openbsd; scripts/setup.sh installs it)");
        return;
    }
    let (Some(work), Some(client)) =
        (Remote::start_with("SetEnv MACHINE=work\n"), Remote::start_with("SetEnv MACHINE=client\n"))
    else {
        return;
    };
    // Both entries say `root@twin`; each reaches its own machine through
    // its own proxy, and knows that machine's key.
    let mut config = String::new();
    for (name, remote) in [("work", &work), ("client", &client)] {
        let d = remote.dir.path();
        let key = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        std::fs::write(d.join("twin_known_hosts"), format!("twin {key}")).unwrap();
        remote.preset("where", &["sh", "-c", "echo \"$MACHINE\""]);
        config.push_str(&format!(
            "[hosts.{name}]\nssh = \"{user}@twin\"\nidentity_file = \"{d}/user_key\"\n\
             ssh_options = [\"-o\", \"UserKnownHostsFile={d}/twin_known_hosts\", \"-o\", \"StrictHostKeyChecking=yes\", \
             \"-o\", \"ProxyCommand=nc 127.0.0.1 {port}\"]\ncorral = \"{corral}\"\nhome = \"{home}\"\n",
            user = whoami(),
            d = d.display(),
            port = remote.port,
            corral = corral_bin().display(),
            home = remote.home.display(),
        ));
    }
    let env = Env::new();
    env.config(&config);
    for name in ["work", "client"] {
        let launched = env.json(&["launch", "--host", name, "where", "x"]);
        let id = launched["id"].as_str().unwrap().to_string();
        env.ok(&["wait", &id]);
        let run = env.json(&["show", &id]);
        assert_eq!(
            run["final_text"].as_str().unwrap_or_default().trim(),
            name,
            "launch --host {name} ran elsewhere: {run:#}"
        );
    }
}

#[test]
fn a_verb_forwarded_to_a_host_leaves_the_callers_input_alone() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("quick", &["true"]);
    let id = env.ok(&["launch", "--host", "box", "quick", "x"]).trim().to_string();
    env.ok(&["wait", &id]);
    // A script reads its lines and asks about the run at each one.
    let mut script = env.command(&["show", &id]);
    let corral = format!("{:?}", script.get_program());
    let loop_ = format!("while read line; do {corral} show {id} >/dev/null; echo \"got $line\"; done");
    script = Command::new("sh");
    script.arg("-c").arg(&loop_).current_dir(&env.project).env("CORRAL_HOME", &env.home).stdin(Stdio::piped());
    script.stdout(Stdio::piped());
    let mut child = script.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"one\ntwo\nthree\n").unwrap();
    let said = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
    assert_eq!(said, "got one\ngot two\ngot three\n", "ssh consumed the script's input");
}

#[test]
fn launch_wait_on_a_host_waits_through_an_outage_as_wait_does() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let mut waiting = env.command(&["launch", "--host", "box", "gated", "x", "--wait"]);
    waiting.stdout(Stdio::piped()).stderr(Stdio::piped());
    let waiting = waiting.spawn().unwrap();
    assert!(eventually(LIMIT, || remote
        .json(&["ls"])
        .as_array()
        .is_some_and(|runs| runs.iter().any(|r| r["status"] == "running"))));
    assert!(eventually(LIMIT, || remote.has_connections()));
    remote.kill_connections();
    std::fs::write(&gate, "").unwrap();
    let waited = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&waited.stderr);
    assert!(waited.status.success(), "launch --wait gave up on a short outage: {said}");
    assert!(String::from_utf8_lossy(&waited.stdout).contains("completed"), "{said}");
}

/// The connection drops after the host made the run and before its
/// answer came back: the launch is asked again under the same key, and
/// the host answers with the run it made, never a second one.
#[test]
fn a_launch_whose_answer_was_lost_on_the_way_makes_one_run_there() {
    let Some(remote) = Remote::start() else { return };
    let gate = remote.gated_preset();
    let d = remote.dir.path();
    // The host's corral, once armed, answers and then holds the
    // connection open a while (as a network that drops after the answer).
    let wrapper = d.join("corral-slow-answer");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\nif rm '{d}/arm' 2>/dev/null; then '{corral}' \"$@\"; code=$?; touch '{d}/answered'; \
             sleep 10; exit $code; fi\nexec '{corral}' \"$@\"\n",
            d = d.display(),
            corral = corral_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = Env::new();
    env.config(&remote.host_config().replace(&corral_bin().display().to_string(), &wrapper.display().to_string()));
    std::fs::write(d.join("arm"), "").unwrap();
    let mut launching = env.command(&["launch", "--host", "box", "gated", "x", "--wait", "--json"]);
    launching.stdout(Stdio::piped()).stderr(Stdio::piped());
    let launching = launching.spawn().unwrap();
    assert!(eventually(LIMIT, || d.join("answered").exists()), "the host never made the run");
    remote.kill_connections();
    assert!(eventually(LIMIT, || remote.json(&["ls"]).as_array().is_some_and(|r| !r.is_empty())));
    std::fs::write(&gate, "").unwrap();
    let out = launching.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the launch gave up though the run was made there: {said}");
    let runs = remote.json(&["ls", "--all"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "launched twice there: {runs:#}");
    let waited: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &waited[0];
    assert_eq!(run["id"], runs[0]["id"], "{run:#}");
    assert_eq!(run["status"], "completed", "{run:#}");
}

#[test]
fn a_remote_runs_object_says_its_host_while_the_host_answers() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("quick", &["true"]);
    let id = env.ok(&["launch", "--host", "box", "quick", "x"]).trim().to_string();
    let waited = env.json(&["wait", &id]);
    assert_eq!(waited[0]["host"], "box", "{waited:#}");
    let shown = env.json(&["show", &id]);
    assert_eq!(shown["host"], "box", "{shown:#}");
    assert_eq!(shown["id"], id.as_str());
    let listed = env.json(&["ls"]);
    assert_eq!(listed[0]["host"], "box", "{listed:#}");
    // The same shape from the host and from the mirror.
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(keys(&listed[0]), keys(&shown));
}

#[test]
fn a_parents_abort_ends_the_runs_it_launched_on_a_host() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let child_file = env.project.join("child.id");
    // A local parent launches a child on the host, then works on.
    let script = format!("corral launch --host box gated x > '{}' && sleep 300", child_file.display());
    env.command_preset("lead", &["sh", "-c", &script]);
    let parent = env.launch("lead", "x");
    assert!(eventually(LIMIT, || std::fs::read_to_string(&child_file).is_ok_and(|t| !t.trim().is_empty())));
    let child = std::fs::read_to_string(&child_file).unwrap().trim().to_string();
    env.ok(&["abort", &parent]);
    assert_eq!(env.wait_end(&parent)["status"], "aborted");
    let ended = eventually(LIMIT, || remote.json(&["show", &child])["status"] != "running");
    let status = remote.json(&["show", &child])["status"].clone();
    std::fs::write(&gate, "").unwrap();
    assert!(ended, "the child on the host worked on after its parent's abort");
    assert_eq!(status, "aborted");
}

#[test]
fn every_end_there_is_seen_here_however_often_ls_catches_up_meanwhile() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("brief", &["sh", "-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.0$(( $$ % 7 )); done"]);
    // `ls` here catches up again and again while the runs start and end there.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looking: Vec<_> = (0..2)
        .map(|_| {
            let (stop, mut ls) = (stop.clone(), env.command(&["ls", "--host", "box", "--json"]));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = ls.output();
                }
            })
        })
        .collect();
    let launching: Vec<_> = (0..24)
        .map(|_| {
            let mut launch = Command::new(corral_bin());
            launch.args(["launch", "brief", "x"]).env("CORRAL_HOME", &remote.home).stdout(Stdio::piped());
            launch.spawn().unwrap()
        })
        .collect();
    let ids: Vec<String> = launching
        .into_iter()
        .map(|child| String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string())
        .collect();
    assert!(eventually(LIMIT, || ids.iter().all(|id| remote.json(&["show", id])["status"] == "completed")));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    looking.into_iter().for_each(|t| t.join().unwrap());
    // On a loaded machine a catch-up may miss `ls`'s 3 s and the host be
    // skipped for a minute: what counts is that no end is missed for ever.
    let mut listed = Value::Null;
    let all_ended = eventually(Duration::from_secs(90), || {
        listed = env.json(&["ls", "--host", "box", "--all"]);
        listed.as_array().is_some_and(|runs| runs.len() == 24 && runs.iter().all(|r| r["status"] == "completed"))
    });
    assert!(all_ended, "ended there, not here: {listed:#}");
}

#[test]
fn caught_up_never_names_a_change_it_did_not_send() {
    let env = Env::new();
    env.command_preset("quick", &["true"]);
    // More than a pipe holds: `watch` is still writing them out when the
    // next change commits.
    let task = "t".repeat(3_000);
    let ids: Vec<String> = (0..40).map(|_| env.ok(&["launch", "quick", &task]).trim().to_string()).collect();
    env.ok(&[&["wait"], ids.iter().map(String::as_str).collect::<Vec<_>>().as_slice()].concat());
    let mut watch = env.command(&["watch", "--json", "--since", "0", "--until-caught-up"]);
    let mut watch = watch.stdout(Stdio::piped()).spawn().unwrap();
    let mut reader = std::io::BufReader::new(watch.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    // A change commits while the snapshot is on its way.
    let late = env.ok(&["launch", "quick", "late"]).trim().to_string();
    env.ok(&["wait", &late]);
    let rest: Vec<Value> = std::io::BufRead::lines(reader)
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .chain(std::iter::once(serde_json::from_str(&first).unwrap()))
        .collect();
    watch.wait().unwrap();
    let sent = rest.iter().filter_map(|l| l["seq"].as_i64()).max().unwrap();
    let caught_up = rest.iter().find_map(|l| l["caught_up"].as_i64()).expect("ends caught up");
    assert!(caught_up <= sent, "said caught up at {caught_up}, past changes it never sent (the last sent: {sent})");
}

/// A copy of the remote side's `corral` that says it is version `version`.
fn corral_saying_version(remote: &Remote, version: &str) -> PathBuf {
    let wrapper = remote.dir.path().join("corral-other-version");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\nset -o pipefail\n'{}' \"$@\" | sed -u 's/\"version\": \"[^\"]*\"/\"version\": \"{version}\"/'\n",
            corral_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    wrapper
}

#[test]
fn a_host_with_another_corral_says_so_beside_its_runs() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    env.ok(&["launch", "--host", "box", "gated", "x"]);
    assert_eq!(env.json(&["ls", "--host", "box"])[0]["status"], "running");
    let other = corral_saying_version(&remote, "0.0.1");
    env.config(&remote.host_config().replace(&corral_bin().display().to_string(), &other.display().to_string()));
    let listed = env.json(&["ls", "--host", "box"]);
    let trouble = listed[0]["host_trouble"].as_str().unwrap_or_default().to_string();
    assert!(trouble.contains("runs corral 0.0.1") && trouble.contains("install this version"), "{listed:#}");
    let text = env.ok(&["ls"]);
    assert!(text.contains("other corral there since"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("box: ") && l.contains("0.0.1")), "{text}");
    std::fs::write(&gate, "").unwrap();
}

#[test]
fn a_hosts_runs_follow_its_store_when_renamed_and_are_said_gone_when_it_is_replaced() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let first = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();
    assert_eq!(env.json(&["ls", "--host", "box"])[0]["status"], "running");

    // Renamed in config.toml: its runs are the renamed host's, by full id.
    env.config(&remote.host_config().replace("[hosts.box]", "[hosts.devbox]"));
    let shown = env.corral(&["show", &first, "--json"]);
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&shown.stdout).unwrap()["host"], "devbox");
    let listed = env.json(&["ls", "--all"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "one run, not one per name: {listed:#}");
    assert_eq!(listed[0]["host"], "devbox");
    env.ok(&["abort", &first]);
    assert_eq!(remote.json(&["show", &first])["status"], "aborted");

    // The host's store replaced (another CORRAL_HOME), and used past the
    // number this machine read up to: the run it no longer has is gone.
    let second = env.ok(&["launch", "--host", "devbox", "gated", "y"]).trim().to_string();
    assert_eq!(env.json(&["show", &second])["status"], "running");
    env.ok(&["ls"]);
    let fresh = remote.dir.path().join("fresh-home");
    std::fs::create_dir_all(fresh.join("presets")).unwrap();
    std::fs::copy(remote.home.join("presets/gated.md"), fresh.join("presets/quick.md")).unwrap();
    std::fs::write(
        fresh.join("presets/quick.md"),
        "---\nname: quick\ndescription: d\nagent: command\ncommand: [\"true\"]\n---\n",
    )
    .unwrap();
    for _ in 0..4 {
        let out =
            Command::new(corral_bin()).args(["launch", "quick", "z", "--wait"]).env("CORRAL_HOME", &fresh).output();
        assert!(out.unwrap().status.success());
    }
    env.config(
        &remote
            .host_config()
            .replace("[hosts.box]", "[hosts.devbox]")
            .replace(&format!("home = \"{}\"", remote.home.display()), &format!("home = \"{}\"", fresh.display())),
    );
    let listed = env.json(&["ls", "--all"]);
    let gone = listed.as_array().unwrap().iter().find(|r| r["id"] == second.as_str()).unwrap().clone();
    assert_eq!(gone["status"], "lost", "{gone:#}");
    assert!(gone["error"].as_str().unwrap().contains("gone from host 'devbox'"), "{gone:#}");
    assert_eq!(listed.as_array().unwrap().iter().filter(|r| r["preset"] == "quick").count(), 4, "{listed:#}");
    std::fs::write(&gate, "").unwrap();
}

#[test]
fn a_prefix_of_a_run_here_and_a_run_there_is_ambiguous() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    env.command_preset("quick", &["true"]);
    remote.preset("quick", &["true"]);
    let here: Vec<String> = (0..10).map(|_| env.ok(&["launch", "quick", "x"]).trim().to_string()).collect();
    let there = (0..60)
        .map(|_| remote.json(&["launch", "quick", "x"])["id"].as_str().unwrap().to_string())
        .find(|id| here.iter().filter(|h| h[..1] == id[..1]).count() == 1)
        .expect("a run there shares its first letter with exactly one here");
    env.ok(&["ls", "--all"]);
    let mine = here.iter().find(|h| h[..1] == there[..1]).unwrap();
    let prefix = &there[..1];
    let out = env.corral(&["rm", prefix]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "took the run here: {said}");
    assert!(said.contains("matches several runs") && said.contains(&there) && said.contains(mine.as_str()), "{said}");
    env.ok(&["show", mine]);
    // A full id is never ambiguous.
    assert_eq!(env.json(&["show", &there])["host"], "box");
}

/// `[hosts.mute]`: a local socket that accepts every connection and never
/// answers; and how many connections it accepted.
fn silent_host() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(conn);
        }
    });
    let entry = format!(
        "[hosts.mute]\nssh = \"nobody@127.0.0.1\"\nport = {port}\nssh_options = [\"-o\", \"StrictHostKeyChecking=yes\"]\n"
    );
    (entry, accepted)
}

#[test]
fn a_host_that_accepts_and_never_answers_costs_one_wait_then_is_marked() {
    let Some(remote) = Remote::start() else { return };
    let (mute, accepted) = silent_host();
    let env = Env::new();
    env.config(&format!("{}{mute}", remote.host_config()));
    remote.preset("quick", &["true"]);
    let id = env.ok(&["launch", "--host", "box", "quick", "x"]).trim().to_string();
    env.ok(&["ls"]);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "asked once");
    let state = env.store().host_state("mute").unwrap().expect("recorded");
    assert!(!state.reachable && state.error.as_deref().unwrap_or("").contains("did not answer"), "{state:?}");
    let listed = env.json(&["ls"]);
    assert_eq!(listed[0]["id"], id.as_str(), "the other host's runs are listed");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "not asked again within the minute");
    assert!(env.store().host_state("box").unwrap().unwrap().reachable);
}

#[test]
fn search_names_the_host_that_did_not_answer() {
    let Some(remote) = Remote::start() else { return };
    let (mute, _) = silent_host();
    let env = Env::new();
    // The silent host first in config.toml, the answering one after it.
    env.config(&format!("{mute}{}", remote.host_config()));
    remote.preset("quick", &["sh", "-c", "echo needle"]);
    let id = env.ok(&["launch", "--host", "box", "quick", "find the needle"]).trim().to_string();
    env.ok(&["wait", &id]);
    let out = env.corral(&["search", "needle"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("host 'mute' did not answer") && !said.contains("'box'"), "{said}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("box:{id}")));
}

#[test]
fn a_changed_host_key_is_said_beside_its_runs_with_the_port() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    env.ok(&["launch", "--host", "box", "gated", "x"]);
    assert_eq!(env.json(&["ls"])[0]["status"], "running");
    let other = remote.dir.path().join("impostor_key");
    Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&other).status().unwrap();
    let key = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    std::fs::write(remote.dir.path().join("known_hosts"), format!("[127.0.0.1]:{} {key}", remote.port)).unwrap();
    // A connection already up is not asked for the key again.
    let _ = Command::new("pkill").args(["-f", &format!("ssh.*{}", remote.port)]).status();
    let text = env.ok(&["ls"]);
    assert!(text.contains("host key refused since"), "{text}");
    let port = remote.port;
    assert!(
        text.contains(&format!("ssh -p {port} ")) && text.contains(&format!("ssh-keygen -R '[127.0.0.1]:{port}'")),
        "{text}"
    );
    std::fs::write(&gate, "").unwrap();
}

#[test]
fn a_wait_on_a_host_gives_up_on_a_broken_setting_at_once() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let id = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();
    env.config(&remote.host_config().replace("ssh_options = [", "ssh_options = [\"-o\", \"NoSuchOption=1\", "));
    let mut wait = env.command(&["wait", &id, "--timeout", "600"]);
    let mut child = wait.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let ended = eventually(LIMIT, || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    std::fs::write(&gate, "").unwrap();
    assert!(ended, "wait retried a broken setting: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(said.contains("bad configuration option: nosuchoption"), "{said}");
}

#[test]
fn a_launch_that_reaches_a_host_clears_what_was_said_of_it() {
    let Some(mut remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    remote.stop_sshd();
    env.ok(&["ls"]);
    assert!(!env.store().host_state("box").unwrap().unwrap().reachable);
    remote.start_sshd();
    let id = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();
    let listed = env.json(&["ls"]);
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(listed[0].get("unreachable_since").is_none(), "{listed:#}");
    assert_eq!(listed[0]["host"], "box");
    std::fs::write(&gate, "").unwrap();
}

#[test]
fn pausing_a_run_that_launched_on_a_host_leaves_the_host_reachable() {
    let Some(remote) = Remote::start() else { return };
    let env = Env::new();
    // Corral's own connection lingers (ControlPersist), as users have it.
    env.config(&remote.host_config().replace(", \"-o\", \"ControlPersist=no\"", ""));
    let gate = remote.gated_preset();
    let child_file = env.project.join("child.id");
    let script = format!("corral launch --host box gated x > '{}' && sleep 300", child_file.display());
    env.command_preset("lead", &["sh", "-c", &script]);
    let parent = env.launch("lead", "x");
    assert!(eventually(LIMIT, || std::fs::read_to_string(&child_file).is_ok_and(|t| !t.trim().is_empty())));
    let child = std::fs::read_to_string(&child_file).unwrap().trim().to_string();
    env.ok(&["pause", &parent]);
    assert_eq!(env.json(&["show", &parent])["status"], "paused");
    // From a terminal, while the run is frozen: the host answers.
    let mut show = env.command(&["show", &child, "--json"]);
    let mut asking = show.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let answered = eventually(LIMIT, || asking.try_wait().unwrap().is_some());
    if !answered {
        let _ = asking.kill();
    }
    let out = asking.wait_with_output().unwrap();
    std::fs::write(&gate, "").unwrap();
    env.ok(&["abort", &parent]);
    assert!(answered, "a command to the host hung on the paused run's connection");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_corral_home_with_a_space_and_a_long_path_reaches_its_hosts() {
    let Some(remote) = Remote::start() else { return };
    let mut env = Env::new();
    env.home = env.home.join("a folder with spaces, and a name long enough to pass what a socket path may hold");
    env.config(&remote.host_config());
    remote.preset("quick", &["true"]);
    let id = env.ok(&["launch", "--host", "box", "quick", "x"]).trim().to_string();
    assert!(env.ok(&["wait", &id]).contains("completed"));
    assert_eq!(env.json(&["ls"])[0]["status"], "completed");
}

#[test]
fn a_schedule_fires_on_a_host_and_its_run_is_followed_here() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("echo-task", &["sh", "-c", "cat \"$CORRAL_TASK_FILE\""]);
    let added =
        env.ok(&["schedule", "add", "there", "--preset", "echo-task", "--host", "box", "--every", "10s", "hello"]);
    assert!(added.starts_with("there"), "{added}");
    let mut fire = env.command(&["schedule", "fire", "there", "--json"]);
    fire.env("CORRAL_SCHEDULE_CLOCK_OFFSET", "11");
    let out = fire.output().unwrap();
    let fired: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(fired["outcome"], "launched", "{fired}");
    let id = fired["runs"][0]["id"].as_str().unwrap().to_string();
    let ended = env.wait_run(&id, Duration::from_secs(30), |r| r["status"] == "completed");
    assert_eq!(ended["host"], "box");
    assert_eq!(ended["final_text"].as_str().unwrap().trim(), "hello");
    // The history says how it ended, as the mirror knows it once the host
    // is followed (`ls` catches up, as the tray does all along).
    env.ok(&["ls"]);
    let shown = env.json(&["schedule", "show", "there"]);
    assert_eq!(shown["host"], "box");
    assert_eq!(shown["fires"][0]["runs"][0]["status"], "completed");
}

/// A run an agent launches on a host is held to what its parent's budget
/// has left: the host's shepherd holds it there, as this machine's would.
#[test]
fn a_run_an_agent_launches_on_a_host_is_held_to_its_parents_budget() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    env.command_preset("orchestrate", &["sh", "-c", "corral launch --host box gated 'from the agent' >/dev/null"]);
    let parent = env.ok(&["launch", "--budget", "$1", "orchestrate", "x"]).trim().to_string();
    let waiting = env.wait_run(&parent, LIMIT, |r| r["status"] == "waiting" || !r["exited_at"].is_null());
    assert_eq!(waiting["status"], "waiting", "{waiting:#}");
    let child = env.store().remote_children(&parent).unwrap();
    let there = remote.json(&["show", &child[0].id]);
    assert_eq!(there["budget"]["usd"], 1.0, "launched there outside its parent's budget: {there:#}");
    std::fs::write(&gate, "").unwrap();
    assert_eq!(env.wait_end(&parent)["status"], "completed");
}

/// Item 26 of round 6: the host refuses connections (its sshd stopped, not
/// only the connection dropped) for a while during `launch --host …
/// --wait`: the wait waits it out, as `corral wait` does, and says the
/// run's end.
#[test]
fn launch_wait_on_a_host_waits_while_the_host_refuses_connections() {
    let Some(mut remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    let mut waiting = env.command(&["launch", "--host", "box", "gated", "x", "--wait"]);
    waiting.stdout(Stdio::piped()).stderr(Stdio::piped());
    let waiting = waiting.spawn().unwrap();
    assert!(eventually(LIMIT, || remote
        .json(&["ls"])
        .as_array()
        .is_some_and(|runs| runs.iter().any(|r| r["status"] == "running"))));
    assert!(eventually(LIMIT, || remote.has_connections()));
    remote.stop_sshd();
    let port = remote.port;
    // Refused for a while: a connection attempt is turned away.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    std::fs::write(&gate, "").unwrap();
    let run_ended =
        || remote.json(&["ls"]).as_array().is_some_and(|runs| runs.iter().all(|r| r["status"] == "completed"));
    assert!(eventually(LIMIT, run_ended), "the run there never ended");
    remote.start_sshd();
    let waited = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&waited.stderr);
    assert!(waited.status.success(), "launch --wait gave up while the host refused connections: {said}");
    assert!(String::from_utf8_lossy(&waited.stdout).contains("completed"), "{said}");
}

/// What needs you, round 2, item 3: a run on a host frozen at its budget
/// needs you here: `corral needs` lists it, with its host, and its "Allow
/// more" is carried out there.
#[test]
fn a_host_run_frozen_at_its_budget_needs_you_here() {
    let Some(remote) = Remote::start() else { return };
    let env = remote.spending_there("");
    let id = env.ok(&["launch", "--host", "box", "--budget", "$1", "spend", "x"]).trim().to_string();
    let listed = || env.json(&["needs"]).as_array().unwrap().iter().any(|i| i["id"] == id.as_str());
    // Followed here as it goes (`ls` catches up with the host).
    assert!(
        eventually(LIMIT, || {
            env.ok(&["ls"]);
            listed()
        }),
        "{}",
        env.ok(&["needs"])
    );
    let item = env.json(&["needs"]).as_array().unwrap().iter().find(|i| i["id"] == id.as_str()).unwrap().clone();
    assert!(item["words"].as_str().unwrap().contains("on box"), "{item:#}");
    let allow: Vec<String> =
        item["actions"][0]["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let args: Vec<&str> = allow.iter().map(String::as_str).collect();
    env.ok(&args);
    assert!(eventually(LIMIT, || remote.json(&["show", &id])["budget"]["usd"] == 2.0), "not allowed there");
    env.ok(&["abort", &id]);
}

/// A night's money, item 13: every verb reaches a run an agent launched
/// on a host as it reaches a local one: its result read, paused, resumed,
/// told one more thing and aborted there, through MCP, under the same
/// scope (another agent's run there is refused).
#[tokio::test(flavor = "current_thread")]
async fn an_agent_acts_on_its_helper_on_a_host_through_mcp() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    let gate = remote.gated_preset();
    env.command_preset("me", &["true"]);
    // The calling agent's own run, at work (a run that ended launches nothing).
    env.command_preset("lead", &["sleep", "120"]);
    let caller = env.launch("lead", "the orchestrator's own run");
    env.wait_run(&caller, LIMIT, |r| r["status"] == "running");
    let client = common::mcp::connect(&env, Some(&caller)).await;
    let (error, launched) =
        common::mcp::call(&client, "launch_agent", serde_json::json!({"preset": "gated", "task": "x", "host": "box"}))
            .await;
    assert!(!error, "{launched}");
    let id = launched["run_id"].as_str().unwrap().to_string();
    assert!(eventually(LIMIT, || remote.json(&["show", &id])["status"] == "running"));
    let (error, result) = common::mcp::call(&client, "agent_result", serde_json::json!({"run_id": id})).await;
    assert!(!error, "{result}");
    assert_eq!(result["run"]["status"], "running", "{result}");
    let (error, paused) = common::mcp::call(&client, "pause_agent", serde_json::json!({"run_id": id})).await;
    assert!(!error, "{paused}");
    assert_eq!(remote.json(&["show", &id])["status"], "paused");
    let (error, resumed) = common::mcp::call(&client, "resume_agent", serde_json::json!({"run_id": id})).await;
    assert!(!error, "{resumed}");
    assert!(eventually(LIMIT, || remote.json(&["show", &id])["status"] == "running"));
    // Another agent may not act on it.
    env.command_preset("other", &["true"]);
    let stranger = env.launch("other", "someone else");
    env.wait_end(&stranger);
    let other = common::mcp::connect(&env, Some(&stranger)).await;
    let (error, said) = common::mcp::call(&other, "abort_agent", serde_json::json!({"run_id": id})).await;
    assert!(error, "{said}");
    let (error, aborted) = common::mcp::call(&client, "abort_agent", serde_json::json!({"run_id": id})).await;
    assert!(!error, "{aborted}");
    assert_eq!(remote.json(&["show", &id])["status"], "aborted");
    std::fs::write(&gate, "").unwrap();
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
}

/// A night's money, item 12: a host whose connection is up and whose
/// `corral` never answers: `corral wait --timeout 2` and MCP's
/// `wait_agents(timeout_s=2)` end with their timeout (and a little), never
/// waiting without end.
#[tokio::test(flavor = "current_thread")]
async fn a_host_that_never_answers_does_not_hang_a_wait_with_a_timeout() {
    let Some(remote) = Remote::start() else { return };
    let d = remote.dir.path();
    let silent = d.join("silent");
    let wrapper = d.join("corral-there");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n[ -e '{}' ] && exec sleep 600\nexec '{}' \"$@\"\n",
            silent.display(),
            corral_bin().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let gate = remote.gated_preset();
    let env = Env::new();
    env.config(&remote.host_config().replace(&corral_bin().display().to_string(), &wrapper.display().to_string()));
    let id = env.ok(&["launch", "--host", "box", "gated", "x"]).trim().to_string();
    std::fs::write(&silent, "").unwrap();
    let started = std::time::Instant::now();
    let out = env.command(&["wait", &id, "--timeout", "2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(40), "waited {:?}", started.elapsed());
    env.command_preset("me", &["true"]);
    let client = common::mcp::connect(&env, None).await;
    let started = std::time::Instant::now();
    let (_, waited) =
        common::mcp::call(&client, "wait_agents", serde_json::json!({"run_ids": [id], "timeout_s": 2})).await;
    assert!(started.elapsed() < Duration::from_secs(40), "waited {:?}: {waited}", started.elapsed());
    client.cancel().await.unwrap();
    std::fs::remove_file(&silent).unwrap();
    std::fs::write(&gate, "").unwrap();
}

/// A night's money, item 8: two machines cloned from one image after
/// Corral ran there share their store's identity; both in config.toml,
/// they are two hosts, never one renamed: following one moves none of the
/// other's runs, and a verb on a run goes to the machine it works on.
#[test]
fn two_hosts_cloned_from_one_image_stay_two() {
    let (Some(one), Some(two)) = (Remote::start(), Remote::start()) else { return };
    one.preset("quick", &["sh", "-c", "echo done"]);
    let env = Env::new();
    let config = format!("{}{}", one.host_config(), two.host_config().replace("[hosts.box]", "[hosts.box2]"));
    env.config(&config);
    let first = env.ok(&["launch", "--host", "box", "quick", "x"]).trim().to_string();
    env.ok(&["wait", &first]);
    // The second machine: a clone of the first, store and all.
    for entry in std::fs::read_dir(&one.home).unwrap().flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("corral.db") {
            std::fs::copy(entry.path(), two.home.join(&name)).unwrap();
        }
    }
    std::fs::copy(one.home.join("presets/quick.md"), two.home.join("presets/quick.md")).unwrap();
    let second = env.ok(&["launch", "--host", "box", "quick", "y"]).trim().to_string();
    env.ok(&["wait", &second]);
    env.ok(&["ls", "--host", "box2"]);
    env.ok(&["ls"]);
    // Each machine's runs are its own as mirrored here: the one launched
    // after the clone is box's alone, and both hosts stand.
    let db = rusqlite::Connection::open(env.home.join("corral.db")).unwrap();
    let hosts_of = |id: &str| -> Vec<String> {
        let mut stmt = db.prepare("SELECT host FROM remote_runs WHERE id = ?1 ORDER BY host").unwrap();
        stmt.query_map([id], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(hosts_of(&second), ["box"], "a run of box was moved to its clone");
    assert_eq!(hosts_of(&first), ["box", "box2"], "the run from before the clone is each machine's");
    // Asked of the machine it works on, not of its clone.
    let shown = env.json(&["show", &second]);
    assert_eq!(shown["host"], "box", "a run of box was taken for box2's: {shown:#}");
    assert_eq!(shown["final_text"].as_str().unwrap_or_default().trim(), "done", "{shown:#}");
}

/// A night's money, item 10: an agent whose scope is its own tree launches
/// on a host the user's `mcp: all` preset: the run there acts on its own
/// tree only (a child's scope never exceeds its parent's across a host);
/// a person's launch there keeps the preset's scope.
#[tokio::test(flavor = "current_thread")]
async fn a_childs_scope_on_a_host_never_exceeds_its_launchers() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    std::fs::write(
        remote.home.join("presets/boss.md"),
        "---\nname: boss\ndescription: d\nagent: command\ncommand: [\"true\"]\nmcp: all\n---\n",
    )
    .unwrap();
    env.command_preset("me", &["true"]);
    // The calling agent's own run, at work (a run that ended launches nothing).
    env.command_preset("lead", &["sleep", "120"]);
    let caller = env.launch("lead", "the orchestrator's own run");
    env.wait_run(&caller, LIMIT, |r| r["status"] == "running");
    let client = common::mcp::connect(&env, Some(&caller)).await;
    let (error, launched) =
        common::mcp::call(&client, "launch_agent", serde_json::json!({"preset": "boss", "task": "x", "host": "box"}))
            .await;
    assert!(!error, "{launched}");
    let id = launched["run_id"].as_str().unwrap().to_string();
    let there = corral::Store::open(&corral::Home::from_root(Some(remote.home.clone().into())).unwrap()).unwrap();
    let preset = there.run_preset(&id).unwrap();
    assert_eq!(preset.mcp, None, "the run there was given the preset's `mcp: all`");
    client.cancel().await.unwrap();
    // The user's own launch there keeps it.
    let mine = env.ok(&["launch", "--host", "box", "boss", "y"]).trim().to_string();
    assert_eq!(there.run_preset(&mine).unwrap().mcp, Some(corral::preset::McpScope::All));
}

/// A night's money, item 9: a host's word is checked for sense: a helper
/// there that reports a negative cost spends nothing of its lead's tree
/// here, never gives it money back.
#[test]
fn a_negative_cost_from_a_host_gives_no_budget_back() {
    let Some(remote) = Remote::start() else { return };
    let env = remote.spending_there("SPEND_COST=-100 SPEND_MESSAGES=2");
    env.command_preset("lead", &["sh", "-c", "corral launch --host box spend helper --wait >/dev/null"]);
    let lead = env.ok(&["launch", "--budget", "$1", "lead", "x"]).trim().to_string();
    let ended = env.wait_run(&lead, LIMIT, |r| !r["exited_at"].is_null());
    assert_eq!(ended["status"], "completed", "{ended:#}");
    let helper = env.store().remote_children(&lead).unwrap();
    assert_eq!(helper.len(), 1, "{helper:?}");
    assert!(helper[0].cost_usd.unwrap_or(0.0) >= 0.0, "a negative cost shown: {:?}", helper[0].cost_usd);
    let spent = env.store().tree_spent(&lead).unwrap();
    assert!(spent.usd >= 0.0, "the lead's tree was given ${:.2} back", -spent.usd);
}

/// A night's money, item 3: a `--host box` schedule's runs spend on box,
/// and that counts against its day here: the next fire is given what is
/// left of the day, as the host last reported it.
#[test]
fn a_host_schedules_spend_counts_against_its_day() {
    let Some(remote) = Remote::start() else { return };
    let env = remote.spending_there("SPEND_MESSAGES=2");
    let add =
        ["schedule", "add", "there", "--preset", "spend", "--host", "box", "--every", "1h", "--budget-per-day", "$1"];
    env.ok(&[&add[..], &["spend"]].concat());
    let first = env.json(&["schedule", "run-now", "there"]);
    assert_eq!(first["outcome"], "launched", "{first:#}");
    let id = first["runs"][0]["id"].as_str().unwrap().to_string();
    env.ok(&["wait", &id]);
    // Its end (and spend) followed here.
    assert!(eventually(LIMIT, || {
        env.ok(&["ls"]);
        env.json(&["show", &id])["cost_usd"] == 0.5
    }));
    let second = env.json(&["schedule", "run-now", "there"]);
    assert_eq!(second["outcome"], "launched", "{second:#}");
    let next = second["runs"][0]["id"].as_str().unwrap().to_string();
    let given = remote.json(&["show", &next])["budget"]["usd"].as_f64().unwrap();
    assert!((given - 0.5).abs() < 1e-9, "the host's spend was not the day's: ${given:.2} given");
    env.ok(&["abort", &next]);
}

/// A night's money, item 11: a host's bytes reach the terminal escaped, as
/// a local run's do: an OSC 52 clipboard write in a host run's output is
/// shown as text by `tail`, never passed on raw.
#[test]
fn a_hosts_bytes_reach_the_terminal_escaped() {
    let Some(remote) = Remote::start() else { return };
    let env = local(&remote);
    remote.preset("osc", &["sh", "-c", "printf 'before \\033]52;c;SGVsbG8=\\007 after\\n'"]);
    let id = env.ok(&["launch", "--host", "box", "osc", "x"]).trim().to_string();
    env.ok(&["wait", &id]);
    let out = env.corral(&["tail", "-n", "all", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stdout.contains(&0x1b), "raw escape bytes from the host: {:?}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("before"), "{}", String::from_utf8_lossy(&out.stdout));
}
