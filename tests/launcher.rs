//! The launcher, driven in-process as the app and the MCP server drive it:
//! launching leaves no zombie child behind in a long-lived launcher.

mod common;

use common::{corral_bin, fake_agent, Env};
use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::launch::{launch, LaunchRequest};

/// Zombie children of this process.
fn my_zombies() -> Vec<i32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
            fields[0] == "Z" && fields[1] == me
        })
        .collect()
}

#[test]
fn launching_leaves_no_zombie_and_the_shepherd_is_not_our_child() {
    let env = Env::new();
    env.command_preset("ok", &[&fake_agent("exit-with"), "0"]);
    let mut store = corral::Store::open(&corral::Home::at(&env.home)).unwrap();
    let shepherd = ShepherdCommand::program(corral_bin());
    let request = LaunchRequest {
        preset: "ok".into(),
        task: "zombie check".into(),
        cwd: env.project.clone(),
        model: None,
        parent: None,
        env: None,
        worktree: None,
        base: None,
        budget: None,
        fire: None,
        request: None,
        scope_own: false,
    };
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(launch(&mut store, &request, &shepherd).unwrap().id);
    }
    for id in &ids {
        let run = env.wait_end(id);
        assert_eq!(run["status"], "completed");
        let shepherd_pid = run["shepherd_pid"].as_i64().unwrap() as i32;
        assert_ne!(shepherd_pid, 0);
    }
    assert_eq!(my_zombies(), Vec::<i32>::new());
}

/// The `corral` programs working in this installation: its shepherds, and
/// any copy of a launcher waiting for a run.
fn corral_processes(env: &Env) -> Vec<i32> {
    let mark = format!("CORRAL_HOME={}", env.home.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "corral"))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.split(|&b| b == 0).any(|var| var == mark.as_bytes()))
        })
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")))
        .collect()
}

/// The id of the run `parent`'s agent launched, once it did.
fn child_of(env: &Env, parent: &str) -> String {
    let mut inner = None;
    assert!(
        common::eventually(std::time::Duration::from_secs(10), || {
            let runs = env.json(&["ls"]);
            inner = runs.as_array().unwrap().iter().find(|r| r["parent_id"] == parent).cloned();
            inner.is_some()
        }),
        "the parent's agent should have launched a run"
    );
    inner.unwrap()["id"].as_str().unwrap().to_string()
}

/// What a process was started as, its words joined by spaces.
fn command_line(pid: i64) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap()).replace('\0', " ")
}

/// `corral launch` at a terminal costs one program start: the run is
/// shepherded by the copy of the launcher it forked as it began, not by a
/// second program. A launch that was queued or refused leaves no copy
/// waiting. Inside a run, where a copy would still carry the run's marks in
/// `/proc/PID/environ`, the shepherd is a program started as one.
#[test]
fn a_launch_at_a_terminal_is_shepherded_by_its_own_copy_and_leaves_none_waiting() {
    let env = Env::new();
    // Launched cold: no template to ask (none unless turned on).
    env.config("max_parallel = 2\n");
    env.command_preset("sleeper", &["sleep", "30"]);
    env.command_preset("parent", &["sh", "-c", "corral launch sleeper inner >/dev/null; exec sleep 30"]);
    let parent = env.launch("parent", "outer");
    let running = |r: &serde_json::Value| r["status"] == "running";
    let outer = env.wait_run(&parent, std::time::Duration::from_secs(10), running);
    let outer_shepherd = outer["shepherd_pid"].as_i64().unwrap();
    let words = command_line(outer_shepherd);
    assert!(
        words.contains(" launch parent outer") && !words.contains(" shepherd "),
        "the run's shepherd should be its launcher's copy, not a second program start; it is `{words}`"
    );

    let inner_id = child_of(&env, &parent);
    let inner = env.wait_run(&inner_id, std::time::Duration::from_secs(10), running);
    let inner_shepherd = inner["shepherd_pid"].as_i64().unwrap();
    let words = command_line(inner_shepherd);
    assert!(
        words.ends_with(&format!(" shepherd {inner_id} ")),
        "inside a run the shepherd should be a program started as one; it is `{words}`"
    );

    let queued = env.json(&["launch", "sleeper", "waits for a slot"]);
    assert_eq!(queued["status"], "queued");
    assert!(!env.corral(&["launch", "no-such-preset", "refused"]).status.success());
    let mut left = Vec::new();
    let expected = vec![outer_shepherd as i32, inner_shepherd as i32];
    let settled = common::eventually(std::time::Duration::from_secs(5), || {
        left = corral_processes(&env);
        left.sort();
        let mut want = expected.clone();
        want.sort();
        left == want
    });
    assert!(
        settled,
        "only the two shepherds should be left, none waiting for a run; found {left:?} (shepherds {expected:?})"
    );
    env.ok(&["abort", &parent, &inner_id, queued["id"].as_str().unwrap()]);
}

/// The launch template: after a launch at a terminal started it, the next
/// launches are recorded and supervised by its warm spares (a shepherd
/// that shows as `corral template`), say what a cold launch says (its
/// warnings, its refusals), and a template killed takes no run with it.
/// A launch from inside a run is never a spare's: it is judged cold.
#[test]
fn a_launch_template_makes_the_next_launches_and_a_killed_one_takes_no_run_along() {
    let env = Env::new();
    env.config("max_parallel = 12\nlaunch_template = true\n");
    env.command_preset("sleeper", &["sleep", "30"]);
    env.command_preset("parent", &["sh", "-c", "corral launch sleeper inner >/dev/null; exec sleep 30"]);
    let running = |r: &serde_json::Value| r["status"] == "running";
    let limit = std::time::Duration::from_secs(10);
    let cold = env.launch("sleeper", "first");
    assert!(common::eventually(limit, || env.template_pid().is_some()), "the first launch started a template");
    assert!(common::eventually(limit, || env.home.join("corral.template").exists()), "the template listens");

    // A spare is forked and waiting before it is needed; on a swamped
    // machine it may not be yet within a second, and that launch goes cold
    // (as documented): one of the next is a spare's.
    let mut shepherds = Vec::new();
    let (warm, run) = (0..5)
        .find_map(|_| {
            let id = env.launch("sleeper", "second");
            let run = env.wait_run(&id, limit, running);
            let words = command_line(run["shepherd_pid"].as_i64().unwrap());
            let warm = words.ends_with(" template ");
            shepherds.push(words);
            warm.then_some((id, run))
        })
        .unwrap_or_else(|| panic!("a spare of the template shepherds one; their shepherds: {shepherds:?}"));
    assert_eq!(run["task"], "second");
    assert_eq!(run["cwd"], env.project.to_str().unwrap(), "it runs where it was launched");

    // What a cold launch says, said the same.
    let refused = env.corral(&["launch", "no-such-preset", "x"]);
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.starts_with("corral: ") && said.contains("no-such-preset"), "{said}");
    let spaced = env.corral(&["launch", "sleeper", "   "]);
    assert!(String::from_utf8_lossy(&spaced.stderr).contains("the task is empty"));
    // The launcher's environment is the run's, and its umask.
    env.command_preset("env", &["sh", "-c", "echo \"marker=$LAUNCH_MARK umask=$(umask)\""]);
    let mut launch = env.command(&["launch", "env", "x"]);
    launch.env("LAUNCH_MARK", "from-the-terminal");
    // SAFETY: umask(2) only, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut launch, || {
            nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
            Ok(())
        });
    }
    let out = launch.output().unwrap();
    let marked = String::from_utf8_lossy(&out.stdout).trim().to_string();
    env.wait_end(&marked);
    let said = env.ok(&["tail", &marked, "-n", "all"]);
    assert!(said.contains("marker=from-the-terminal umask=0077"), "{said}");

    // From inside a run: never a spare's.
    let parent = env.launch("parent", "outer");
    let inner_id = child_of(&env, &parent);
    let inner = env.wait_run(&inner_id, limit, running);
    let words = command_line(inner["shepherd_pid"].as_i64().unwrap());
    assert!(words.ends_with(&format!(" shepherd {inner_id} ")), "inside a run: a shepherd of its own; `{words}`");

    // The template killed: its runs go on; the next launch is cold, and
    // starts another.
    let template = env.template_pid().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(template), nix::sys::signal::SIGKILL).unwrap();
    assert!(common::eventually(limit, || env.template_pid().is_none()));
    let again = env.launch("sleeper", "third");
    env.wait_run(&again, limit, running);
    assert_eq!(env.show(&warm)["status"], "running", "a killed template takes no run along");
    assert!(common::eventually(limit, || env.template_pid().is_some_and(|pid| pid != template)));
    env.ok(&["abort", &cold, &warm, &parent, &inner_id, &again]);
    assert_eq!(env.wait_end(&warm)["status"], "aborted");
}

/// What the template's spare asks of a launcher holds against a run's
/// agent that talks to its socket itself: connections made by a process of
/// the run, handed to its child, sent after it exited and was reaped (so
/// its pid says nothing any more), are never launched.
#[test]
fn a_process_of_a_run_cannot_launch_through_the_template_by_leaving_before_it_is_judged() {
    let env = Env::new();
    env.config("launch_template = true\n");
    env.command_preset("sleeper", &["sleep", "30"]);
    let first = env.launch("sleeper", "starts the template");
    let limit = std::time::Duration::from_secs(10);
    assert!(common::eventually(limit, || env.home.join("corral.template").exists()));
    let corral = std::fs::canonicalize(corral_bin()).unwrap();
    let script = env.project.join("escape.py");
    std::fs::write(
        &script,
        format!(
            r#"
import json, os, socket, time
env = [[{{"Unix": list(k)}}, {{"Unix": list(v)}}] for k, v in os.environb.items() if not k.startswith(b"CORRAL_RUN")]
def request(tag):
    return json.dumps({{"preset": "sleeper", "task": "escaped " + tag, "cwd": os.getcwd(), "model": None,
        "worktree": None, "base": None, "budget": None, "request": "esc-%d-%s" % (os.getpid(), tag),
        "env": env, "program": {program:?}}}).encode()
a = os.fork()
if a == 0:
    socks = []
    for i in range(3):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.path.join(os.environ["CORRAL_HOME"], "corral.template"))
        socks.append(s)
    if os.fork() == 0:
        time.sleep(0.3)
        for i, s in enumerate(socks):
            try:
                s.sendall(request(str(i)))
                s.shutdown(socket.SHUT_WR)
                s.settimeout(10)
                while s.recv(65536):
                    pass
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
os.waitpid(a, 0)
time.sleep(3)
"#,
            program = corral.to_str().unwrap()
        ),
    )
    .unwrap();
    env.command_preset("escaper", &["python3", script.to_str().unwrap()]);
    let escaper = env.launch("escaper", "x");
    env.wait_run(&escaper, std::time::Duration::from_secs(30), |r| !r["exited_at"].is_null());
    let runs = env.json(&["ls", "--all"]);
    let escaped: Vec<_> =
        runs.as_array().unwrap().iter().filter(|r| r["task"].as_str().unwrap().starts_with("escaped")).collect();
    assert!(escaped.is_empty(), "a run's process launched outside its run: {escaped:#?}");
    env.ok(&["abort", &first]);
}

/// A launch through the template is never looser than cold: a launcher
/// under `no_new_privs` (or another CPU affinity) gets a run under it too —
/// the spare cannot take it on, so the launch goes cold.
#[test]
fn the_template_keeps_a_launchers_no_new_privs() {
    let env = Env::new();
    env.config("launch_template = true\n");
    env.command_preset("sleeper", &["sleep", "30"]);
    env.command_preset("privs", &["sh", "-c", "grep NoNewPrivs /proc/self/status"]);
    let first = env.launch("sleeper", "starts the template");
    let limit = std::time::Duration::from_secs(10);
    assert!(common::eventually(limit, || env.home.join("corral.template").exists()));
    // (Not --wait: a waiting launch is always cold.)
    let cmd = env.command(&["launch", "privs", "x"]);
    let program = cmd.get_program().to_owned();
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = std::process::Command::new("setpriv");
    wrapped.arg("--no-new-privs").arg(program).args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped.current_dir(&env.project);
    let out = wrapped.output().unwrap();
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(out.status.success(), "{id}{}", String::from_utf8_lossy(&out.stderr));
    let run = env.wait_end(&id);
    let said = run["final_text"].as_str().unwrap_or("");
    assert!(said.contains("NoNewPrivs:") && said.ends_with('1'), "the run lost its launcher's no_new_privs: {run:#}");
    env.ok(&["abort", &first]);
}

/// A launch asked twice at once under one key (a launcher gone cold while
/// the template's spare took its request too) makes one run, and both
/// launchers answer with it.
#[test]
fn one_request_launched_twice_at_once_makes_one_run() {
    let env = Env::new();
    env.config("max_parallel = 16\n");
    env.command_preset("sleeper", &["sleep", "30"]);
    let launchers: Vec<_> = (0..8)
        .map(|_| {
            env.command(&["launch", "sleeper", "once", "--request", "k-123"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = launchers.into_iter().map(|l| l.wait_with_output().unwrap()).collect();
    for out in &outs {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let ids: std::collections::BTreeSet<String> =
        outs.iter().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let runs = env.json(&["ls", "--all"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    env.ok(&["abort", ids.iter().next().unwrap()]);
}
