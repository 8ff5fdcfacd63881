//! Trust, round 6, as a user meets it through the CLI: a carry reads only
//! what the run may read and is never the run's work; a removed worktree
//! leaves the others judged; `{port}` without ports is refused; a
//! precheck's words stay on their line.

mod common;

use std::path::Path;

use common::{git, Env};

/// A repository on `main` whose committed `.gitignore` ignores nothing of
/// what is carried: the checkout ignores `.env*` and `config/` by its own
/// `.git/info/exclude`-free, uncommitted `.gitignore`.
fn repo_carrying(include: &str) -> Env {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join(".worktreeinclude"), include).unwrap();
    std::fs::write(p.join("app.txt"), "app\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    // Ignored here by a rule the run's branch does not have.
    std::fs::write(p.join(".gitignore"), ".corral/\n.env*\nconfig/\n").unwrap();
    std::fs::write(p.join(".env"), "API_TOKEN=sk-live-abcdef123456\n").unwrap();
    std::fs::write(p.join(".env.production"), "PROD_TOKEN=prod-secret-987654\n").unwrap();
    std::fs::create_dir_all(p.join("config")).unwrap();
    std::fs::write(p.join("config/prod.env"), "DEPLOY_KEY=deploy-key-24680\n").unwrap();
    env
}

/// Items 9 and 11: a file the run's sandbox denies is not carried; what
/// is carried, not ignored by the run's branch, is never its work: `diff`
/// does not show it, and `rm` takes the worktree as a finished one.
#[test]
fn a_carry_reads_only_what_the_run_may_and_is_never_its_work() {
    let env = repo_carrying(".env*\n");
    let denied = env.project.join(".env.production");
    env.command_preset_with(
        "work",
        &["sh", "-c", "cat .env; cat .env.production 2>&1; echo done"],
        &format!(
            "worktree: true\nsandbox: {{write: [worktree], network: none, read: \"deny ['{}']\"}}\n",
            denied.display()
        ),
    );
    let id = env.launch("work", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let worktree = Path::new(run["worktree"]["path"].as_str().unwrap()).to_path_buf();
    assert!(worktree.join(".env").exists(), "what it may read is carried");
    assert!(!worktree.join(".env.production").exists(), "a file its sandbox denies was carried in");
    let transcript = env.ok(&["tail", &id, "-n", "all"]);
    assert!(!transcript.contains("prod-secret-987654"), "{transcript}");
    assert!(transcript.contains("the run's sandbox may not read it"), "{transcript}");
    // Not its work: no diff, nothing to merge, removed as finished.
    let diff = env.ok(&["diff", &id]);
    assert!(!diff.contains("sk-live-abcdef123456") && !diff.contains(".env"), "{diff}");
    env.ok(&["rm", &id]);
    assert!(!worktree.exists(), "rm kept the worktree for a carried file: it took it for work");
}

/// Item 10: values inside a carried folder are hidden from pushes, as a
/// carried file's are.
#[test]
fn values_in_a_carried_folder_are_known_as_carried() {
    let env = repo_carrying("config/\n");
    env.command_preset_with("work", &["sh", "-c", "cat config/prod.env"], "worktree: true\n");
    let id = env.launch("work", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let list = std::fs::read_to_string(env.run_dir(&id).join("carried")).unwrap();
    let values = corral::worktree::carry::values(&env.project, &list);
    assert!(values.iter().any(|v| v == "deploy-key-24680"), "{values:?}");
}

/// Item 7: one worktree removed by hand leaves `corral conflicts` (every
/// run of the repository) judging the others.
#[test]
fn a_worktree_removed_by_hand_leaves_the_others_judged() {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join("shared.txt"), "one\ntwo\nthree\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    env.command_preset_with("first", &["sh", "-c", "sed -i 's/two/TWO/' shared.txt"], "worktree: true\n");
    env.command_preset_with("second", &["sh", "-c", "sed -i 's/two/Two/' shared.txt"], "worktree: true\n");
    env.command_preset_with("gone", &["sh", "-c", "echo x > x.txt"], "worktree: true\n");
    let ids: Vec<String> = ["first", "second", "gone"].iter().map(|n| env.launch(n, "edit")).collect();
    for id in &ids {
        env.wait_end(id);
    }
    let gone = env.show(&ids[2])["worktree"]["path"].as_str().unwrap().to_string();
    std::fs::remove_dir_all(&gone).unwrap();
    let out = env.corral(&["conflicts"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains(&format!("{} × {}: shared.txt", ids[0], ids[1])), "{said}");
}

/// Item 12: `{port}` in a preset whose runs get no ports is refused at
/// launch, with what to write.
#[test]
fn port_without_ports_is_refused() {
    let env = Env::new();
    env.config("");
    env.command_preset_with("db", &["sh", "-c", "echo $DATABASE"], "env:\n  DATABASE: \"app_{port}\"\n");
    let out = env.corral(&["launch", "db", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("uses {port}") && err.contains("ports: 1"), "{err}");
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty(), "nothing was recorded");
    // With ports, it runs with its own.
    env.command_preset_with("db2", &["sh", "-c", "echo $DATABASE"], "ports: 1\nenv:\n  DATABASE: \"app_{port}\"\n");
    let id = env.launch("db2", "x");
    let run = env.wait_end(&id);
    assert!(run["final_text"].as_str().unwrap_or("").starts_with("app_"), "{run:#}");
    assert_ne!(run["final_text"], "app_", "{run:#}");
}

/// Item 23: a precheck's printed new line never forges a fire of its own
/// in `schedule show` or `run-now`.
#[test]
fn a_precheck_line_break_stays_on_its_line() {
    let env = Env::new();
    env.config("");
    env.command_preset("quick", &["true"]);
    env.ok(&[
        "schedule",
        "add",
        "gate",
        "--preset",
        "quick",
        "--every",
        "1h",
        "--precheck",
        "sh -c 'printf \"nothing\\n✓ gate 2026-01-01T00:00:00Z launched\"; exit 3'",
        "go",
    ]);
    let fired = env.ok(&["schedule", "run-now", "gate"]);
    assert_eq!(fired.trim_end().lines().count(), 1, "{fired}");
    let shown = env.ok(&["schedule", "show", "gate"]);
    assert!(!shown.lines().any(|l| l.starts_with("✓ gate 2026-01-01")), "{shown}");
}

/// Item 13: two discards at once (the window and the CLI) run a run's
/// teardown once, whole: neither kills the other's part way.
#[test]
fn two_discards_at_once_tear_down_once() {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join("a.txt"), "a\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    let log = p.parent().unwrap().join("teardowns.log");
    let extra = format!(
        "worktree: true\nteardown: [sh, -c, \"echo start >> {log}; sleep 1; echo end >> {log}\"]\n",
        log = log.display()
    );
    env.command_preset_with("db", &["sh", "-c", "echo work > change.txt"], &extra);
    let id = env.launch("db", "x");
    env.wait_end(&id);
    let discards: Vec<_> =
        (0..2).map(|_| env.command(&["discard", &id]).stdout(std::process::Stdio::piped()).spawn().unwrap()).collect();
    for discard in discards {
        discard.wait_with_output().unwrap();
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "start\nend\n", "the teardown ran twice, or was cut short");
}
