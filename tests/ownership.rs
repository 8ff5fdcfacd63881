//! Nothing of another user's is run or read as the user's: presets,
//! settings and Corral's own folder that another local user owns, or can
//! write, are refused and said; Corral never changes the mode of a folder it
//! did not make. One test runs Corral as an unprivileged second user.
//!
//! Root can give files to other users (`chown`); these tests say so and
//! return where they cannot.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::{corral_bin, Env};

/// A uid that is nobody on this machine: "another local user".
const STRANGER: u32 = 4242;

fn can_chown() -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        println!("SKIPPED (cannot run here): these tests give files to another user, which needs root");
    }
    root
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn presets_another_user_dropped_in_a_shared_folder_are_not_loaded() {
    if !can_chown() {
        return;
    }
    let env = Env::new();
    env.config("");
    // The victim's own global `lint`.
    let global = env.home.join("presets");
    std::fs::create_dir_all(&global).unwrap();
    std::fs::write(
        global.join("lint.md"),
        "---\nname: lint\ndescription: mine\nagent: command\ncommand: [true]\n---\n",
    )
    .unwrap();
    // A sticky world-writable folder, as /tmp/work, where a stranger made
    // `shared/.claude/agents/lint.md`.
    let work = env.project.join("work");
    let agents = work.join("shared/.claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("lint.md"),
        "---\nname: lint\ndescription: theirs\nagent: command\ncommand: [touch, /tmp/pwned]\n---\n",
    )
    .unwrap();
    for dir in [&work.join("shared"), &work.join("shared/.claude"), &agents] {
        chown(dir, STRANGER);
    }
    chown(&agents.join("lint.md"), STRANGER);
    chmod(&work, 0o1777);
    let inner = work.join("shared/project");
    std::fs::create_dir_all(&inner).unwrap();
    let presets = env.json(&["presets", "--cwd", inner.to_str().unwrap()]);
    let lint = named(&presets, "lint").expect("the user's own lint");
    assert_eq!(lint["description"], "mine", "another user's preset overrode the user's own: {presets:#}");
    let said = problems(&presets);
    assert!(said.contains("not loaded") && said.contains("uid 4242"), "{said}");

    // A folder of the user's that others can write is refused the same way.
    chown(&agents, 0);
    chown(&agents.join("lint.md"), 0);
    for dir in [&work.join("shared"), &work.join("shared/.claude")] {
        chown(dir, 0);
    }
    chmod(&agents, 0o777);
    let presets = env.json(&["presets", "--cwd", inner.to_str().unwrap()]);
    assert!(problems(&presets).contains("can be written by every user"), "{presets:#}");
}

#[test]
fn a_settings_file_others_can_write_is_refused_with_what_to_do() {
    let env = Env::new();
    env.config("max_parallel = 2\n");
    chmod(&env.home.join("config.toml"), 0o666);
    let out = env.corral(&["ls"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.toml can be written by every user") && err.contains("chmod go-w"), "{err}");
}

#[test]
fn corral_home_is_never_chmodded_and_another_users_is_refused() {
    let env = Env::new();
    // An existing shared folder (1777) as CORRAL_HOME: refused, unchanged.
    let shared = env.project.join("shared-home");
    std::fs::create_dir_all(&shared).unwrap();
    chmod(&shared, 0o1777);
    let out = Command::new(corral_bin()).arg("ls").env("CORRAL_HOME", &shared).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("can be written by every user"), "{err}");
    assert_eq!(std::fs::metadata(&shared).unwrap().mode() & 0o7777, 0o1777, "Corral changed a folder it did not make");
    if !can_chown() {
        return;
    }
    let theirs = env.project.join("their-home");
    std::fs::create_dir_all(&theirs).unwrap();
    chown(&theirs, STRANGER);
    let out = Command::new(corral_bin()).arg("ls").env("CORRAL_HOME", &theirs).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("uid 4242"));
}

#[test]
fn corral_runs_as_an_unprivileged_user_and_skips_what_others_own() {
    if !can_chown() {
        return;
    }
    let Ok(setpriv) = which("setpriv") else {
        println!("SKIPPED (cannot run here): setpriv (util-linux) is not installed");
        return;
    };
    // The user is uid 4343, with a home of its own; the project holds a
    // preset of theirs and one a stranger dropped there.
    const USER: u32 = 4343;
    let root = tempfile::tempdir().unwrap();
    chmod(root.path(), 0o755);
    let home = root.path().join("corral-home");
    let project = root.path().join("project");
    let mine = project.join(".corral/presets");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(
        mine.join("hello.md"),
        "---\nname: hello\ndescription: mine\nagent: command\ncommand: [echo, hi]\n---\n",
    )
    .unwrap();
    let theirs = project.join("sub/.claude/agents");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(
        theirs.join("evil.md"),
        "---\nname: evil\ndescription: theirs\nagent: command\ncommand: [true]\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(&home).unwrap();
    for dir in [&home, &project, &project.join(".corral"), &mine, &mine.join("hello.md"), &project.join("sub")] {
        chown(dir, USER);
    }
    chown(&project.join("sub/.claude"), STRANGER);
    chown(&theirs, STRANGER);
    let out = Command::new(setpriv)
        .args([&format!("--reuid={USER}"), &format!("--regid={USER}"), "--clear-groups", "--"])
        .arg(corral_bin())
        .args(["presets", "--json", "--cwd"])
        .arg(project.join("sub"))
        .env("CORRAL_HOME", &home)
        .env("HOME", root.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let presets: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(named(&presets, "hello").is_some(), "{presets:#}");
    assert!(
        named(&presets, "evil").is_none(),
        "another user's preset was loaded for an unprivileged user: {presets:#}"
    );
    assert!(problems(&presets).contains("uid 4242"), "{presets:#}");
}

/// The usable preset `name` of `presets --json`.
fn named<'a>(presets: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    presets.as_array().unwrap().iter().find(|p| p["name"] == name)
}

/// Every problem `presets --json` lists, as one text.
fn problems(presets: &serde_json::Value) -> String {
    presets.as_array().unwrap().iter().map(|p| p["problems"].to_string()).collect::<Vec<_>>().join("\n")
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(name)).find(|p| p.is_file()))
        .ok_or(())
}

#[test]
fn no_other_user_reads_a_task_or_system_prompt_from_proc() {
    let Ok(setpriv) = which("setpriv") else {
        println!("SKIPPED (cannot run here): setpriv (util-linux) is not installed");
        return;
    };
    if !can_chown() {
        return;
    }
    let env = Env::new();
    env.config("");
    let hold = env.project.join("hold");
    let mut ids = Vec::new();
    for agent in ["claude", "codex", "gemini", "pi", "opencode"] {
        env.use_fake(agent, "holder");
        env.agent_preset(agent, agent, "");
        std::fs::write(
            env.project.join(format!(".corral/presets/{agent}.md")),
            format!("---\nname: {agent}\ndescription: d\nagent: {agent}\n---\nsecret-system-prompt-{agent}\n"),
        )
        .unwrap();
        ids.push((agent, env.launch_env(agent, &format!("secret-task-{agent}"), &[("HOLD", hold.to_str().unwrap())])));
    }
    env.command_preset("cmd", &[&common::fake_agent("holder")]);
    ids.push(("command", env.launch_env("cmd", "secret-task-command", &[("HOLD", hold.to_str().unwrap())])));
    for (agent, id) in &ids {
        let run = env.wait_run(id, std::time::Duration::from_secs(20), |r| r["status"] == "running");
        let pid = run["agent_pid"].as_i64().unwrap();
        // What any local user can read of the agent's process.
        let read = |file: &str| {
            Command::new(&setpriv)
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "cat"])
                .arg(format!("/proc/{pid}/{file}"))
                .output()
                .unwrap()
        };
        let cmdline = read("cmdline");
        assert!(cmdline.status.success(), "{agent}: cmdline should be readable to all, as on any Linux");
        let text = String::from_utf8_lossy(&cmdline.stdout).replace('\0', " ");
        assert!(!text.contains("secret-task"), "{agent}: the task is in argv for every user to read: {text}");
        assert!(!text.contains("secret-system-prompt"), "{agent}: the system prompt is in argv: {text}");
        assert!(!read("environ").status.success(), "{agent}: another user read the agent's environment");
    }
    std::fs::write(&hold, "").unwrap();
    for (_, id) in &ids {
        env.wait_end(id);
    }
}

/// Runs a system command that must succeed.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_preset_another_user_can_write_through_an_acl_is_not_run() {
    if !can_chown() {
        return;
    }
    if Command::new("setfacl").arg("--version").output().is_err() {
        println!("SKIPPED (cannot run here): no setfacl (Debian's acl package; scripts/setup.sh installs it)");
        return;
    }
    let env = Env::new();
    env.config("");
    env.command_preset("lint", &["touch", "ran"]);
    let file = env.project.join(".corral/presets/lint.md");
    // Mode 0644 says no one else writes it; the ACL says a stranger does.
    run("setfacl", &["-m", &format!("u:{STRANGER}:rw"), file.to_str().unwrap()]);
    let out = env.corral(&["launch", "lint", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a preset a stranger can write through an ACL was launched");
    assert!(err.contains("through an ACL"), "{err}");
    // The same through the folder.
    run("setfacl", &["-b", file.to_str().unwrap()]);
    env.ok(&["presets"]);
    let folder = env.project.join(".corral/presets");
    run("setfacl", &["-m", &format!("u:{STRANGER}:rwx"), folder.to_str().unwrap()]);
    let listed = env.corral(&["presets"]);
    let said = format!("{}{}", String::from_utf8_lossy(&listed.stdout), String::from_utf8_lossy(&listed.stderr));
    assert!(said.contains("through an ACL"), "{said}");
}

#[test]
fn a_preset_writable_by_the_users_group_is_not_run_when_others_are_in_it() {
    if !can_chown() {
        return;
    }
    if Command::new("groupadd").arg("--help").output().is_err() {
        println!("SKIPPED (cannot run here): no groupadd (Debian's passwd package; scripts/setup.sh installs it)");
        return;
    }
    // The user's own group (root's, here), with another user in it.
    let mine = nix::unistd::getegid().as_raw().to_string();
    let name = format!("crl{}", std::process::id());
    run("useradd", &["-M", "-N", "-g", &mine, &name]);
    let env = Env::new();
    env.config("");
    env.command_preset("lint", &["touch", "ran"]);
    let file = env.project.join(".corral/presets/lint.md");
    std::os::unix::fs::chown(&file, None, Some(mine.parse().unwrap())).unwrap();
    chmod(&file, 0o664);
    let out = env.corral(&["launch", "lint", "x"]);
    run("userdel", &[&name]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a preset another member of its group can write was launched");
    assert!(err.contains("its group") && err.contains("others are in it"), "{err}");
}
