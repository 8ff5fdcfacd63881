//! Worktrees that run, as a user meets them through the CLI with a real
//! repository: the checkout's ignored files that `.worktreeinclude` names
//! carried in (never through a link out, never into a merge), a block of
//! ports per run, and a preset's `env:` with the run's id and port.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{git, Env};

const LIMIT: Duration = Duration::from_secs(30);

/// A repository on `main` whose checkout has what git ignores: `.env`, a
/// `node_modules/` (with a link inside it and a link out of the checkout),
/// `build/` (ignored, not named), and an untracked `notes.local` that git
/// does not ignore.
fn repo() -> Env {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n.env\nnode_modules/\nbuild/\n").unwrap();
    std::fs::write(p.join(".worktreeinclude"), "# carried into each run's worktree\n.env\nnode_modules/\n*.local\n")
        .unwrap();
    std::fs::write(p.join("app.txt"), "app\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    std::fs::write(p.join(".env"), "DATABASE_URL=postgres:///secret\n").unwrap();
    std::fs::create_dir_all(p.join("node_modules/left-pad/bin")).unwrap();
    std::fs::write(p.join("node_modules/left-pad/index.js"), "module.exports = 1;\n").unwrap();
    std::fs::write(p.join("node_modules/left-pad/suid"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        p.join("node_modules/left-pad/suid"),
        std::os::unix::fs::PermissionsExt::from_mode(0o4755),
    )
    .unwrap();
    std::os::unix::fs::symlink("../index.js", p.join("node_modules/left-pad/bin/pad")).unwrap();
    std::os::unix::fs::symlink("/etc", p.join("node_modules/escape")).unwrap();
    std::fs::create_dir_all(p.join("build")).unwrap();
    std::fs::write(p.join("build/out.o"), "object\n").unwrap();
    std::fs::write(p.join("notes.local"), "mine, not ignored\n").unwrap();
    env
}

#[test]
fn the_checkouts_ignored_files_it_names_are_carried_in_and_never_merged() {
    let env = repo();
    // The agent reads what was carried in, then commits .env by force.
    let script = "cat .env; ls node_modules; git add -f .env && \
                  git -c user.name=A -c user.email=a@a commit -qm 'commit the env'";
    env.command_preset_with("work", &["sh", "-c", script], "worktree: true\n");
    let id = env.launch("work", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let worktree = Path::new(run["worktree"]["path"].as_str().unwrap()).to_path_buf();
    assert_eq!(std::fs::read_to_string(worktree.join(".env")).unwrap(), "DATABASE_URL=postgres:///secret\n");
    assert_eq!(
        std::fs::read_to_string(worktree.join("node_modules/left-pad/index.js")).unwrap(),
        "module.exports = 1;\n"
    );
    // Modes carried, never set-uid.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(worktree.join("node_modules/left-pad/suid")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o7777, 0o755, "{mode:o}");
    // A link inside the checkout is carried as a link; one out is not.
    let pad = worktree.join("node_modules/left-pad/bin/pad");
    assert_eq!(std::fs::read_link(&pad).unwrap(), Path::new("../index.js"));
    assert!(std::fs::symlink_metadata(worktree.join("node_modules/escape")).is_err(), "a link out was followed");
    // Not named, or not ignored: left.
    assert!(!worktree.join("build").exists(), "build/ is not named");
    assert!(!worktree.join("notes.local").exists(), "untracked work that git does not ignore is the user's");
    // Said in the transcript, with how.
    let transcript = env.ok(&["tail", &id, "-n", "all"]);
    let said = transcript.lines().find(|l| l.contains("carried in:")).unwrap_or_else(|| panic!("{transcript}"));
    assert!(said.contains(".env") && said.contains("node_modules/"), "{said}");
    assert!(said.contains("reflinked") || said.contains("copied"), "{said}");
    assert!(said.contains("not carried: node_modules/escape (a link out of the checkout)"), "{said}");
    assert!(transcript.contains("DATABASE_URL=postgres:///secret"), "the agent read it: {transcript}");

    // The agent committed the carried .env: the merge is refused, and
    // nothing changed in the user's repository.
    let head = git(&env.project, &["rev-parse", "HEAD"]);
    let status = git(&env.project, &["status", "--porcelain"]);
    let out = env.corral(&["merge", &id]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("committed .env that Corral carried into its worktree"), "{err}");
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&env.project, &["status", "--porcelain"]), status);
}

#[test]
fn a_folder_of_the_worktree_that_is_a_link_is_never_written_through() {
    let env = repo();
    // The branch tracks `node_modules` as a link to a folder outside.
    let outside = tempfile::tempdir().unwrap();
    std::fs::remove_dir_all(env.project.join("node_modules")).unwrap();
    std::fs::create_dir(env.project.join("node_modules")).unwrap();
    std::fs::write(env.project.join("node_modules/x.js"), "x\n").unwrap();
    git(&env.project, &["branch", "linked"]);
    let other = tempfile::tempdir().unwrap();
    git(&env.project, &["worktree", "add", "-q", other.path().to_str().unwrap(), "linked"]);
    std::fs::write(other.path().join(".gitignore"), ".corral/\n.env\nbuild/\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), other.path().join("node_modules")).unwrap();
    git(other.path(), &["add", ".gitignore", "node_modules"]);
    git(other.path(), &["commit", "-qm", "a tracked link"]);
    env.command_preset_with("work", &["true"], "worktree: true\n");
    let out = env.corral(&["launch", "--base", "linked", "work", "x"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    env.wait_end(&id);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "written through the worktree's link");
    let transcript = env.ok(&["tail", &id, "-n", "all"]);
    assert!(transcript.contains("not carried: node_modules/"), "{transcript}");
}

#[test]
fn runs_launched_at_once_never_share_a_port_and_get_their_env() {
    let env = Env::new();
    env.config("");
    // Something listens on the first port of the range: skipped.
    let listener = std::net::TcpListener::bind("127.0.0.1:20000");
    let script = "echo port=$CORRAL_PORT ports=$CORRAL_PORTS db=$DATABASE_URL; sleep 1";
    env.command_preset_with(
        "serve",
        &["sh", "-c", script],
        "ports: 3\nenv:\n  DATABASE_URL: \"postgres:///app_{run}_{port}\"\n",
    );
    let launches: Vec<_> = (0..6)
        .map(|_| {
            let mut cmd = env.command(&["launch", "serve", "x"]);
            cmd.stdout(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let ids: Vec<String> = launches
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect();
    let mut blocks = Vec::new();
    for id in &ids {
        let run = env.wait_run(id, LIMIT, common::is_terminal);
        let first = run["ports"]["first"].as_u64().unwrap();
        assert_eq!(run["ports"]["count"], 3);
        if listener.is_ok() {
            assert!(first > 20_000, "port 20000 is listened on: {run:#}");
        }
        let said = env.ok(&["tail", id, "-n", "all"]);
        assert!(said.contains(&format!("port={first} ports=3 db=postgres:///app_{id}_{first}")), "{said}");
        blocks.push(first);
    }
    blocks.sort();
    for pair in blocks.windows(2) {
        assert!(pair[1] >= pair[0] + 3, "two active runs share a port: {blocks:?}");
    }
    let shown = env.ok(&["show", &ids[0]]);
    assert!(shown.contains("CORRAL_PORT="), "{shown}");
    // Ended, their ports are free again: the next run gets the first block.
    let next = env.launch("serve", "again");
    let run = env.wait_end(&next);
    assert_eq!(run["ports"]["first"].as_u64().unwrap(), blocks[0], "{run:#}");
}

#[test]
fn a_preset_env_with_a_placeholder_corral_does_not_fill_is_refused() {
    let env = Env::new();
    env.command_preset_with("bad", &["true"], "env:\n  DATABASE_URL: \"postgres:///app_{rnu}\"\n");
    let out = env.corral(&["launch", "bad", "x"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("{rnu}") && err.contains("{run}, {port} and {worktree}"), "{err}");
}

/// A repository with `shared.txt` of five lines and three runs: `first`
/// and `second` both change its line 3, `third` adds a file of its own.
/// A repository on `main` with one committed file, `a.txt`.
fn one_file_repo() -> Env {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join("a.txt"), "a\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    env
}

fn three_runs() -> (Env, [String; 3]) {
    let env = Env::new();
    env.config("");
    let p = &env.project;
    git(p, &["init", "-q", "-b", "main"]);
    std::fs::write(p.join(".gitignore"), ".corral/\n").unwrap();
    std::fs::write(p.join("shared.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "init"]);
    let edit = |name: &str, script: &str| env.command_preset_with(name, &["sh", "-c", script], "worktree: true\n");
    edit("first", "sed -i 's/three/THREE by first/' shared.txt");
    edit("second", "sed -i 's/three/three by second/' shared.txt");
    edit("third", "echo mine > third.txt");
    let ids = ["first", "second", "third"].map(|name| env.launch(name, "edit"));
    for id in &ids {
        let run = env.wait_end(id);
        assert_eq!(run["status"], "completed", "{run:#}\n{}", env.ok(&["tail", "-n", "all", id]));
    }
    (env, ids)
}

#[test]
fn runs_that_change_the_same_lines_are_named_before_any_is_merged() {
    let (env, [first, second, third]) = three_runs();
    // Every run of the repository, judged together from its folder.
    let out = env.corral(&["conflicts"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("{first} × {second}: shared.txt")), "{said}");
    assert!(said.contains("1 conflicting pairs among 3 runs"), "{said}");
    let out = env.corral(&["conflicts", &first, &second, &third, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["conflicts"].as_array().unwrap().len(), 1, "{json:#}");
    assert_eq!(json["conflicts"][0]["files"][0], "shared.txt");

    // The combined review: grouped by file, the file both changed first.
    let diff = env.ok(&["diff", &first, &second, &third]);
    let shared = diff.find("=== shared.txt").unwrap_or_else(|| panic!("{diff}"));
    assert!(shared < diff.find("=== third.txt").unwrap(), "{diff}");
    assert!(diff.contains(&format!("--- run {first} (first)")) && diff.contains("+THREE by first"), "{diff}");
    assert!(diff.contains(&format!("--- run {second} (second)")) && diff.contains("+three by second"), "{diff}");

    // Merged together: refused with the pair named, nothing changed.
    let head = git(&env.project, &["rev-parse", "HEAD"]);
    let out = env.corral(&["merge", &third, &first, &second]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("runs {first} and {second} both change shared.txt")), "{err}");
    assert!(err.contains("nothing was merged"), "{err}");
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head, "nothing merged");
    assert!(!env.project.join("third.txt").exists());

    // Without the conflicting one: both merged, in order, one commit each.
    let merged = env.ok(&["merge", &third, &first]);
    assert!(
        merged.contains(&format!("{third}  merged into main"))
            && merged.contains(&format!("{first}  merged into main")),
        "{merged}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("shared.txt")).unwrap(),
        "one\ntwo\nTHREE by first\nfour\nfive\n"
    );
    assert_eq!(std::fs::read_to_string(env.project.join("third.txt")).unwrap(), "mine\n");
    assert_eq!(git(&env.project, &["rev-list", "--count", "HEAD"]).trim(), "3");
}

#[tokio::test]
async fn an_agent_asks_which_of_its_runs_conflict_over_mcp() {
    let (env, [first, second, third]) = three_runs();
    let client = common::mcp::connect(&env, None).await;
    let (error, value) = common::mcp::call(&client, "run_conflicts", serde_json::json!({})).await;
    assert!(!error, "{value:#}");
    assert_eq!(value["runs"].as_array().unwrap().len(), 3, "{value:#}");
    assert_eq!(value["conflicts"][0]["first"], first.as_str());
    assert_eq!(value["conflicts"][0]["second"], second.as_str());
    let (error, value) =
        common::mcp::call(&client, "run_conflicts", serde_json::json!({ "run_ids": [first, third] })).await;
    assert!(!error, "{value:#}");
    assert_eq!(value["conflicts"].as_array().unwrap().len(), 0, "{value:#}");
    client.cancel().await.unwrap();
}

#[test]
fn a_runs_teardown_drops_what_its_env_made_when_its_worktree_is_discarded() {
    let env = one_file_repo();
    // "A database per run": a folder named by the run, made by the agent
    // from its env and dropped by the teardown.
    let dbs = env.project.parent().unwrap().join("databases");
    std::fs::create_dir_all(&dbs).unwrap();
    let extra = format!(
        "worktree: true\nports: 2\nenv:\n  DATABASE: \"{}/app_{{run}}\"\nteardown: [sh, -c, \"rm -r $DATABASE && echo dropped $DATABASE from $PWD\"]\n",
        dbs.display()
    );
    env.command_preset_with("db", &["sh", "-c", "mkdir \"$DATABASE\" && echo work > change.txt"], &extra);
    let id = env.launch("db", "x");
    env.wait_end(&id);
    let database = dbs.join(format!("app_{id}"));
    assert!(database.is_dir(), "the run made its database");
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    env.ok(&["discard", &id]);
    assert!(!database.exists(), "the teardown dropped it");
    let transcript = env.ok(&["tail", &id, "-n", "all"]);
    assert!(transcript.contains(&format!("dropped {} from {worktree}", database.display())), "{transcript}");
    // rm of a run tears down too, even when it keeps the worktree (work
    // not merged): the run's record, and so its teardown, goes.
    let id = env.launch("db", "y");
    env.wait_end(&id);
    assert!(dbs.join(format!("app_{id}")).is_dir());
    let out = env.corral(&["rm", &id]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("kept"), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!dbs.join(format!("app_{id}")).exists(), "rm tore it down");
}

#[test]
fn a_cloned_repositorys_preset_sets_no_env_and_runs_no_teardown_until_trusted() {
    let env = Env::new();
    env.use_fake("pi", "spender");
    for (file, extra) in [
        ("env.md", "env: {PATH: \"{worktree}/bin:/usr/bin:/bin\"}\n"),
        ("teardown.md", "teardown: [sh, -c, \"echo pwned\"]\n"),
    ] {
        let name = file.trim_end_matches(".md");
        let text = format!("---\nname: {name}\ndescription: d\nagent: pi\n{extra}---\n");
        env.untrusted_preset_file(".corral/presets", file, &text);
        let out = env.corral(&["launch", name, "x"]);
        assert!(!out.status.success(), "{name} ran untrusted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("presets trust"), "{err}");
    }
    // Corral's own variables are not a preset's to set, trusted or not.
    env.command_preset_with("own", &["true"], "env: {CORRAL_HOME: /tmp/elsewhere}\n");
    let out = env.corral(&["launch", "own", "x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("CORRAL_HOME` is Corral's own"), "{err}");
}

#[test]
fn runs_merged_together_are_each_merged_once_and_nothing_to_merge_is_said_first() {
    let (env, [first, _second, third]) = three_runs();
    env.ok(&["merge", &third]);
    let head = git(&env.project, &["rev-parse", "HEAD"]);
    // One already merged, named before anything is merged, in any order.
    let out = env.corral(&["merge", &first, &third]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("run {third} has nothing to merge")), "{err}");
    assert_eq!(git(&env.project, &["rev-parse", "HEAD"]), head, "nothing merged");
    // The same run twice is one run.
    let merged = env.ok(&["merge", &first, &first]);
    assert_eq!(merged.lines().count(), 1, "{merged}");
}

#[test]
fn a_run_brought_back_by_a_reply_never_shares_the_ports_another_took_meanwhile() {
    let env = Env::new();
    env.config("");
    env.use_fake("claude", "conversing");
    env.agent_preset("talk", "claude", "ports: 3\n");
    env.command_preset_with("hold", &["sleep", "30"], "ports: 3\n");
    let first = env.launch("talk", "hello");
    env.wait_end(&first);
    let first_port = env.show(&first)["ports"]["first"].as_u64().unwrap();
    let second = env.launch("hold", "y");
    env.wait_run(&second, LIMIT, |r| r["status"] == "running");
    assert_eq!(env.show(&second)["ports"]["first"].as_u64().unwrap(), first_port, "the ended run's block was free");
    env.ok(&["reply", &first, "again", "--wait"]);
    let again = env.show(&first)["ports"]["first"].as_u64().unwrap();
    assert!(again >= first_port + 3, "two active runs on port {again}");
    env.ok(&["abort", &second]);
}

#[test]
fn a_500_mb_ignored_folder_is_carried_in_and_said_how() {
    let env = repo();
    // 50 files of 10 MB under node_modules/ (ignored, named). A copy takes
    // as much again, and a shared disk can be short of it: then fewer
    // files, said, rather than a test that fails for the machine's sake.
    // (A copy leaves 1 GiB of the disk free, or refuses.)
    let free_mb = nix::sys::statvfs::statvfs(&env.project)
        .map(|s| (s.blocks_available() * s.fragment_size()) >> 20)
        .unwrap_or(u64::MAX)
        .saturating_sub(1_100);
    let files: u64 = if free_mb > 3_000 { 50 } else { (free_mb / 60).clamp(1, 50) };
    if files < 50 {
        eprintln!("only {free_mb} MiB free: carrying {files} files of 10 MB, not 50");
    }
    let big = env.project.join("node_modules/big");
    std::fs::create_dir_all(&big).unwrap();
    let chunk: Vec<u8> = (0..10 << 20).map(|i: u32| (i % 251) as u8).collect();
    for i in 0..files {
        std::fs::write(big.join(format!("blob{i}.bin")), &chunk).unwrap();
    }
    env.command_preset_with("work", &["sh", "-c", "du -sm node_modules/big"], "worktree: true\n");
    let id = env.launch("work", "x");
    let run = env.wait_end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    let worktree = Path::new(run["worktree"]["path"].as_str().unwrap()).to_path_buf();
    for i in [0, files - 1] {
        let carried = std::fs::read(worktree.join(format!("node_modules/big/blob{i}.bin"))).unwrap();
        assert!(carried == chunk, "blob{i} carried whole");
    }
    let transcript = env.ok(&["tail", &id, "-n", "all"]);
    let said = transcript.lines().find(|l| l.contains("carried in:")).unwrap_or_else(|| panic!("{transcript}"));
    // Reflinked where the file system shares blocks, copied where not:
    // either way, said.
    assert!(said.contains("reflinked") || said.contains("copied"), "{said}");
    assert!(said.contains("MiB in"), "{said}");
    let size: u64 =
        said.split(" files, ").nth(1).and_then(|r| r.split('.').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(size >= files * 10, "{files} files of 10 MB carried: {said}");
}

#[test]
fn a_merge_of_several_refused_at_a_later_run_merges_none() {
    let (env, [first, _second, third]) = three_runs();
    // The user changes the line `first` changes and commits it: `first`
    // conflicts with main, not with `third`.
    let p = &env.project;
    std::fs::write(p.join("shared.txt"), "one\ntwo\nthree by you\nfour\nfive\n").unwrap();
    git(p, &["commit", "-q", "-am", "mine"]);
    let head = git(p, &["rev-parse", "HEAD"]);
    let out = env.corral(&["merge", &third, &first]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("run {first} cannot be merged after {third}")), "{err}");
    assert!(err.contains("conflicts with main") && err.contains("none of them is merged"), "{err}");
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "main is where it was");
    assert!(!p.join("third.txt").exists(), "the first run's file went with its merge");
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "the checkout is as it was");
    // Not recorded as merged: it merges alone, whole.
    let merged = env.ok(&["merge", &third]);
    assert!(merged.contains(&format!("{third}  merged into main")), "{merged}");
    assert_eq!(std::fs::read_to_string(p.join("third.txt")).unwrap(), "mine\n");
}

#[test]
fn setup_and_teardown_get_the_runs_placeholders_and_its_ports_until_it_is_torn_down() {
    let env = one_file_repo();
    let p = &env.project;
    let dbs = p.parent().unwrap().join("databases");
    std::fs::create_dir_all(&dbs).unwrap();
    let dbs = dbs.display();
    // `createdb app_{port}` / `dropdb app_{port}`, as folders.
    let extra = format!(
        "worktree: true\nports: 2\nsetup: [mkdir, \"{dbs}/app_{{port}}\"]\nteardown: [rm, -r, \"{dbs}/app_{{port}}\", \"{dbs}/setup_{{run}}\"]\n"
    );
    env.command_preset_with("db", &["sh", "-c", &format!("touch {dbs}/setup_$CORRAL_RUN_ID")], &extra);
    let a = env.launch("db", "x");
    env.wait_end(&a);
    let port_a = env.show(&a)["ports"]["first"].as_u64().unwrap();
    let db_a = Path::new(&format!("{dbs}/app_{port_a}")).to_path_buf();
    assert!(db_a.is_dir(), "setup made app_{{port}} with the run's port");
    // Ended, not torn down: its port is not another run's yet.
    let b = env.launch("db", "y");
    env.wait_end(&b);
    let port_b = env.show(&b)["ports"]["first"].as_u64().unwrap();
    assert_ne!(port_a, port_b, "a run whose teardown has not run keeps its ports");
    env.ok(&["discard", &a]);
    assert!(!db_a.exists(), "the teardown dropped app_{{port}} of its own port");
    assert!(!Path::new(&format!("{dbs}/setup_{a}")).exists(), "{{run}} was put in");
    assert!(Path::new(&format!("{dbs}/app_{port_b}")).is_dir(), "the other run's is untouched");
    // Torn down: its port is free again. Blocks are taken lowest first, so
    // the next gets it or a lower one (something on the machine may have
    // listened on a lower port when `a` was launched, and stopped since).
    let c = env.launch("db", "z");
    env.wait_end(&c);
    let port_c = env.show(&c)["ports"]["first"].as_u64().unwrap();
    assert!(port_c <= port_a && port_c != port_b, "a {port_a}, b {port_b}, c {port_c}");
}

#[test]
fn an_agent_runs_no_teardown_and_judges_no_runs_outside_its_tree() {
    let env = one_file_repo();
    let p = &env.project;
    let dbs = p.parent().unwrap().join("databases");
    std::fs::create_dir_all(&dbs).unwrap();
    let extra = format!(
        "worktree: true\nenv: {{DATABASE: \"{}/app_{{run}}\"}}\nteardown: [sh, -c, \"rm -r $DATABASE\"]\n",
        dbs.display()
    );
    env.command_preset_with("db", &["sh", "-c", "mkdir \"$DATABASE\" && echo work > change.txt"], &extra);
    let victim = env.launch("db", "x");
    env.wait_end(&victim);
    let database = dbs.join(format!("app_{victim}"));
    assert!(database.is_dir());
    let log = p.parent().unwrap().join("evil.log");
    let script = format!(
        "corral teardown \"$CORRAL_TASK\" >> {0} 2>&1; echo \"rc=$?\" >> {0}; corral conflicts --json >> {0} 2>&1",
        log.display()
    );
    env.command_preset_with("evil", &["sh", "-c", &script], "");
    let evil = env.launch("evil", &victim);
    env.wait_end(&evil);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(database.is_dir(), "another run's teardown did not run: {said}");
    assert!(said.contains("rc=2") && said.contains(&format!("run {victim} is not one of yours")), "{said}");
    let judged: serde_json::Value =
        serde_json::from_str(&said[said.find('{').unwrap()..]).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(judged["runs"].as_array().unwrap().len(), 0, "{judged:#}");
    // The user's discard still tears it down.
    env.ok(&["discard", &victim]);
    assert!(!database.exists());
}

#[test]
fn files_named_to_hide_are_grouped_by_their_names_and_shown_escaped() {
    let env = one_file_repo();
    let hidden = "\x1b]0;PWNED\x07red";
    let name = "\"$(printf '\\033]0;PWNED\\007red')\"";
    let script = format!("printf one > {name}; mkdir 'x b'; printf x > 'x b/a.txt'");
    env.command_preset_with("sneaky", &["sh", "-c", &script], "worktree: true\n");
    let script = format!("printf two > {name}; echo b >> a.txt");
    env.command_preset_with("plain", &["sh", "-c", &script], "worktree: true\n");
    let (sneaky, plain) = (env.launch("sneaky", "x"), env.launch("plain", "y"));
    for id in [&sneaky, &plain] {
        env.wait_end(id);
    }
    let out = env.corral(&["diff", &sneaky, &plain, "--json"]);
    let files: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<&str> = files.as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&hidden) && paths.contains(&"x b/a.txt") && paths.contains(&"a.txt"), "{paths:?}");
    let both = files.as_array().unwrap().iter().find(|f| f["path"] == hidden).unwrap();
    assert_eq!(both["runs"].as_array().unwrap().len(), 2, "{both:#}");
    // Named to the terminal, escaped: it cannot retitle or recolour it.
    let out = env.corral(&["conflicts", &sneaky, &plain]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("\\x1b]0;PWNED\\x07red") && !said.contains('\x1b'), "{said:?}");
    let out = env.corral(&["merge", &sneaky, &plain]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !err.contains('\x1b') && err.contains("\\x1b"), "{err:?}");
}

#[test]
fn a_sparse_ignored_file_is_carried_sparse() {
    use std::os::unix::fs::MetadataExt;
    let env = repo();
    let p = &env.project;
    std::fs::write(p.join(".worktreeinclude"), "big.bin\n").unwrap();
    std::fs::write(p.join(".gitignore"), ".corral/\nbig.bin\n").unwrap();
    git(p, &["commit", "-q", "-am", "carry big.bin"]);
    let big = std::fs::File::create(p.join("big.bin")).unwrap();
    big.set_len(2 << 30).unwrap();
    std::os::unix::fs::FileExt::write_at(&big, b"data in the middle", 1 << 30).unwrap();
    env.command_preset_with("look", &["true"], "worktree: true\n");
    let id = env.launch("look", "x");
    env.wait_end(&id);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    let carried = Path::new(&worktree).join("big.bin");
    let meta = std::fs::metadata(&carried).unwrap();
    assert_eq!(meta.len(), 2 << 30);
    assert!(meta.blocks() * 512 < 64 << 20, "2 GiB of holes stayed holes: {} bytes stored", meta.blocks() * 512);
    let mut middle = [0u8; 18];
    std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::open(&carried).unwrap(), &mut middle, 1 << 30).unwrap();
    assert_eq!(&middle, b"data in the middle");
}

#[test]
fn an_agent_prunes_no_runs_and_its_words_cannot_rewrite_the_terminal() {
    let env = Env::new();
    env.config("");
    env.command_preset("old", &["true"]);
    let old = env.launch("old", "an old run of another tree");
    env.wait_end(&old);
    let log = env.project.parent().unwrap().join("prune.log");
    let script = format!("corral prune --older-than 0s > {0} 2>&1; echo \"rc=$?\" >> {0}", log.display());
    env.command_preset_with("pruner", &["sh", "-c", &script], "");
    let pruner = env.launch("pruner", "x");
    env.wait_end(&pruner);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("rc=2") && said.contains("prune removes the runs of every tree"), "{said}");
    assert_eq!(env.show(&old)["status"], "completed", "the other tree's run is still there");
    // What an agent said, as `corral wait` says it: no escape sequence.
    env.command_preset("loud", &["sh", "-c", "printf 'done \\033]52;c;cHduZWQ=\\007 \\033[2J'"]);
    let loud = env.launch("loud", "x");
    env.wait_end(&loud);
    let said = env.ok(&["wait", &loud]);
    assert!(said.contains("done") && !said.contains('\x1b') && said.contains("\\x1b]52"), "{said:?}");
}

/// A worktree removed by hand: its teardown still runs (its database is
/// still to be dropped), but in an empty folder of its own, never in the
/// user's checkout, where a relative `rm -rf` would take the user's files.
#[test]
fn a_teardown_whose_worktree_was_removed_by_hand_runs_nowhere_near_the_checkout() {
    let env = one_file_repo();
    let p = &env.project;
    let dbs = p.parent().unwrap().join("databases");
    std::fs::create_dir_all(&dbs).unwrap();
    let teardown = format!("pwd > {0}/where; rm -rf a.txt; rm -r {0}/app_$CORRAL_RUN_ID", dbs.display());
    let extra = format!("worktree: true\nteardown: [sh, -c, {teardown:?}]\n");
    env.command_preset_with("db", &["sh", "-c", &format!("mkdir {}/app_$CORRAL_RUN_ID", dbs.display())], &extra);
    let id = env.launch("db", "x");
    let run = env.wait_end(&id);
    let worktree = run["worktree"]["path"].as_str().unwrap().to_string();
    std::fs::remove_dir_all(&worktree).unwrap();
    env.ok(&["discard", &id]);
    assert!(p.join("a.txt").exists(), "the teardown removed a file of the user's checkout");
    let ran_in = std::fs::read_to_string(dbs.join("where")).unwrap();
    assert!(!ran_in.trim().starts_with(p.to_str().unwrap()), "ran in {ran_in}");
    assert!(!dbs.join(format!("app_{id}")).exists(), "the teardown ran all the same");
    let said = env.ok(&["tail", &id]);
    assert!(said.contains("was gone: run in an empty folder"), "{said}");
}

/// Three runs of `one_file_repo`, each adding a file of its own (`x.txt`,
/// `y.txt`, `z.txt`).
fn three_apart(env: &Env) -> [String; 3] {
    env.command_preset_with("own", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    let ids = ["x", "y", "z"].map(|task| env.launch("own", task));
    for id in &ids {
        env.wait_end(id);
    }
    ids
}

/// A hook of the project's that blocks (its pid in `blocked`) the
/// `block`-th time it runs, and passes every other.
fn blocking_hook(env: &Env, name: &str, block: u32) -> std::path::PathBuf {
    let dir = env.project.parent().unwrap();
    let (count, blocked) = (dir.join(format!("{name}.count")), dir.join(format!("{name}.blocked")));
    let hook = env.project.join(".git/hooks").join(name);
    let script = format!(
        "#!/bin/sh\nn=$(cat {c} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {c}\n\
         if [ \"$n\" = {block} ]; then echo $$ > {b}.tmp; mv {b}.tmp {b}; exec sleep 60; fi\n",
        c = count.display(),
        b = blocked.display()
    );
    std::fs::write(&hook, script).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    blocked
}

/// `corral merge ids…` killed with SIGKILL once `blocked` says its hook
/// blocks (the hook ended too).
fn merge_killed_at(env: &Env, ids: &[String], blocked: &Path) {
    let mut args = vec!["merge"];
    args.extend(ids.iter().map(String::as_str));
    let mut merging = env.command(&args).stdout(std::process::Stdio::null()).spawn().unwrap();
    assert!(common::eventually(LIMIT, || blocked.exists()), "the hook never ran");
    merging.kill().unwrap();
    merging.wait().unwrap();
    let hook: i32 = std::fs::read_to_string(blocked).unwrap().trim().parse().unwrap();
    unsafe { libc::kill(hook, libc::SIGKILL) };
    std::fs::remove_file(blocked).unwrap();
}

/// A merge of several killed mid-way (a closed terminal, SIGKILL during a
/// slow hook) while its second run was judged: nothing of it had landed
/// (a set lands whole), the next Corral command closes it and says so in
/// each run's transcript; nothing is recorded merged, and the set merges
/// whole afterwards.
#[test]
fn a_merge_of_several_killed_mid_way_leaves_nothing_merged() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let head = git(p, &["rev-parse", "HEAD"]);
    let blocked = blocking_hook(&env, "pre-commit", 2);
    merge_killed_at(&env, &ids, &blocked);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "part of the set landed before the kill");
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "main is where it was");
    assert!(!p.join("x.txt").exists(), "the first run's file went with its merge");
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "the checkout is as it was");
    for id in &ids {
        assert!(env.show(id)["worktree"]["merged"].is_null(), "{id} recorded merged");
        assert!(env.ok(&["tail", id]).contains("was cut short (its process ended) before anything was merged"), "{id}");
    }
    let merged = env.ok(&std::iter::once("merge").chain(ids.iter().map(String::as_str)).collect::<Vec<_>>());
    assert!(ids.iter().all(|id| merged.contains(&format!("{id}  merged into main"))), "{merged}");
    for task in ["x", "y", "z"] {
        assert_eq!(std::fs::read_to_string(p.join(format!("{task}.txt"))).unwrap(), "mine\n");
    }
}

/// Killed after its last merge was made, before it was recorded (a slow
/// post-commit hook): the next command records every run merged; killed
/// part way with a commit of the user's on top since: what it merged
/// stays, recorded.
#[test]
fn a_merge_killed_after_it_was_made_or_built_on_is_recorded_as_it_stands() {
    let env = one_file_repo();
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "post-commit", 3);
    merge_killed_at(&env, &ids, &blocked);
    env.ok(&["ls"]);
    for id in &ids {
        assert!(!env.show(id)["worktree"]["merged"].is_null(), "{id} not recorded merged");
    }
    let again = env.corral(&["merge", &ids[0]]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to merge"), "{again:?}");

    // Killed in the first post-commit hook, then the user commits on top
    // before the heal: the set is recorded merged, the user's commit stays.
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "post-commit", 1);
    merge_killed_at(&env, &ids, &blocked);
    std::fs::write(p.join("yours.txt"), "yours\n").unwrap();
    git(p, &["add", "yours.txt"]);
    git(p, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "yours"]);
    let yours = git(p, &["rev-parse", "HEAD"]);
    env.ok(&["ls"]);
    for id in &ids {
        assert!(!env.show(id)["worktree"]["merged"].is_null(), "the merge under the user's commit stands: {id}");
    }
    assert_eq!(git(p, &["rev-parse", "HEAD"]), yours);
    assert!(p.join("x.txt").exists() && p.join("yours.txt").exists());
    // The user moves the branch back into the middle of the set: what the
    // branch holds is recorded, the rest is said to merge again.
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "post-commit", 1);
    merge_killed_at(&env, &ids, &blocked);
    git(p, &["reset", "-q", "--hard", "HEAD~2"]);
    env.ok(&["ls"]);
    assert!(!env.show(&ids[0])["worktree"]["merged"].is_null());
    assert!(env.show(&ids[1])["worktree"]["merged"].is_null());
    assert!(env.ok(&["tail", &ids[1]]).contains(&format!("{} are in the branch", ids[0])));
}

/// The same with the agents' commits kept (`--no-squash`), killed in the
/// last run's post-merge hook: a merge commit is known as the set's by its
/// second parent, the run's branch, and every run is recorded merged.
#[test]
fn a_merge_keeping_commits_killed_after_it_was_made_is_recorded() {
    let env = one_file_repo();
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "post-merge", 3);
    let mut args = vec!["--no-squash".to_string()];
    args.extend(ids.iter().cloned());
    merge_killed_at(&env, &args, &blocked);
    env.ok(&["ls"]);
    for id in &ids {
        let run = env.show(id);
        assert!(!run["worktree"]["merged"].is_null(), "{run:#}");
    }
}

/// What the user commits is never taken for the set's, whatever its
/// message says: a commit of theirs carrying a run's `Corral run ID` line,
/// or their amend of a merge the set made, stays with its files.
#[test]
fn a_commit_of_the_users_is_never_taken_back_for_a_merge_cut_short() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "pre-commit", 1);
    merge_killed_at(&env, &ids, &blocked);
    std::fs::write(p.join("mine.txt"), "precious\n").unwrap();
    git(p, &["add", "mine.txt"]);
    let message = format!("fix\n\nCorral run {}", ids[0]);
    git(p, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", &message]);
    let head = git(p, &["rev-parse", "HEAD"]);
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "the user's commit was taken back");
    assert_eq!(std::fs::read_to_string(p.join("mine.txt")).unwrap(), "precious\n");
    assert!(env.show(&ids[0])["worktree"]["merged"].is_null());

    // Killed after the set landed; the user amends its last merge before
    // the heal.
    let blocked = blocking_hook(&env, "post-commit", 1);
    merge_killed_at(&env, &ids, &blocked);
    std::fs::write(p.join("mine2.txt"), "precious too\n").unwrap();
    git(p, &["add", "mine2.txt"]);
    git(p, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "--amend", "--no-edit"]);
    let head = git(p, &["rev-parse", "HEAD"]);
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "the user's amend was taken back");
    assert!(p.join("mine2.txt").exists() && p.join("x.txt").exists());
}

/// `--no-squash` killed while the `pre-merge-commit` hook runs: the merge
/// is written apart from the checkout (never a `git merge` left half done
/// in it), so nothing is staged, nothing lands later, nothing recorded;
/// and a merge of the run's branch the user then makes by hand is theirs,
/// never taken back.
#[test]
fn a_merge_keeping_commits_killed_in_its_hook_leaves_nothing_in_progress() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let head = git(p, &["rev-parse", "HEAD"]);
    let blocked = blocking_hook(&env, "pre-merge-commit", 1);
    let mut args = vec!["--no-squash".to_string()];
    args.extend(ids.iter().cloned());
    merge_killed_at(&env, &args, &blocked);
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head, "main is where it was");
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "nothing left staged or in progress");
    for id in &ids {
        assert!(env.show(id)["worktree"]["merged"].is_null());
    }
    let branch = env.show(&ids[0])["worktree"]["branch"].as_str().unwrap().to_string();
    git(p, &["-c", "core.hooksPath=/dev/null", "merge", "-q", "--no-ff", "-m", "my own merge, reviewed", &branch]);
    let mine = git(p, &["rev-parse", "HEAD"]);
    let blocked = blocking_hook(&env, "pre-merge-commit", 2);
    let rest = vec!["--no-squash".to_string(), ids[1].clone(), ids[2].clone()];
    merge_killed_at(&env, &rest, &blocked);
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), mine, "the user's own merge was taken back");
    assert!(p.join("x.txt").exists());
}

/// Killed after the user's files moved to the merge and before the branch
/// did: the next command puts the files back (the journal names the
/// merge's commit), so the checkout is as it was and nothing is recorded.
#[test]
fn a_merge_killed_between_its_files_and_its_branch_puts_the_files_back() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let head = git(p, &["rev-parse", "HEAD"]);
    // A git that stops before moving the branch to a merge.
    let dir = p.parent().unwrap();
    let (wrapper, blocked) = (dir.join("slow-git"), dir.join("update-ref.blocked"));
    std::fs::create_dir_all(&wrapper).unwrap();
    let real = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout).unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *update-ref*corral:\\ merge*) echo $$ > {b}.tmp; mv {b}.tmp {b}; exec sleep 60;; esac\nexec {real} \"$@\"\n",
        b = blocked.display(),
        real = real.trim()
    );
    std::fs::write(wrapper.join("git"), script).unwrap();
    std::fs::set_permissions(wrapper.join("git"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", wrapper.display(), std::env::var("PATH").unwrap());
    let mut merging = env.command(&["merge", &ids[0], &ids[1]]).env("PATH", path).spawn().unwrap();
    assert!(common::eventually(LIMIT, || blocked.exists()), "the merge never reached its branch");
    assert!(p.join("x.txt").exists(), "the files moved first");
    merging.kill().unwrap();
    merging.wait().unwrap();
    let sleeper: i32 = std::fs::read_to_string(&blocked).unwrap().trim().parse().unwrap();
    unsafe { libc::kill(sleeper, libc::SIGKILL) };
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), head);
    assert!(!p.join("x.txt").exists(), "the merge's file was left in the checkout");
    assert_eq!(git(p, &["status", "--porcelain"]).trim(), "", "the checkout is as it was");
    assert!(env.show(&ids[0])["worktree"]["merged"].is_null());
}

/// A merge of a run's branch the user makes by hand, after a merge set of
/// that run was cut short before anything landed, is the user's: the
/// heal leaves it, and its files.
#[test]
fn the_users_own_merge_of_a_runs_branch_is_never_taken_back() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    let blocked = blocking_hook(&env, "pre-merge-commit", 1);
    let mut args = vec!["--no-squash".to_string()];
    args.extend(ids.iter().cloned());
    merge_killed_at(&env, &args, &blocked);
    std::fs::remove_file(p.join(".git/hooks/pre-merge-commit")).unwrap();
    let branch = env.show(&ids[0])["worktree"]["branch"].as_str().unwrap().to_string();
    git(p, &["merge", "-q", "--no-ff", "--no-commit", &branch]);
    std::fs::write(p.join("NOTES"), "my notes\n").unwrap();
    git(p, &["add", "NOTES"]);
    git(p, &["commit", "-q", "-m", "my merge of it, with my notes"]);
    let mine = git(p, &["rev-parse", "HEAD"]);
    env.ok(&["ls"]);
    assert_eq!(git(p, &["rev-parse", "HEAD"]), mine, "the user's merge was taken back");
    assert!(p.join("NOTES").exists() && p.join("x.txt").exists());
}

/// What a hook writes while it judges a merge (lint-staged's backup
/// stash) is the repository's: its refs point at objects the repository
/// has, whatever happens to the run's worktree after.
#[test]
fn what_a_hook_writes_while_judging_a_merge_stays_in_the_repository() {
    let env = one_file_repo();
    let p = &env.project;
    let ids = three_apart(&env);
    std::fs::write(p.join("a.txt"), "a\nwork in progress\n").unwrap();
    let hook = p.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nh=$(git stash create backup) && git stash store -m backup \"$h\"\nexit 0\n")
        .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.ok(&["merge", &ids[0]]);
    env.ok(&["rm", &ids[0]]);
    assert!(git(p, &["stash", "list"]).contains("backup"));
    let fsck = Command::new("git").args(["fsck", "--no-progress"]).current_dir(p).output().unwrap();
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stderr));
    git(p, &["gc", "-q"]);
}

/// Runs launched at once add worktrees of one repository at once, and git
/// can fail an add after it made the branch (it read another add's
/// administrative folder half-made: "failed to read
/// .git/worktrees/…/commondir: Success", seen in 10 of 180 adds three at a
/// time here): the run waits it out and gets its worktree on that branch,
/// never a failed run whose worktree is missing.
#[test]
fn a_worktree_add_git_trips_over_is_made_again() {
    let env = one_file_repo();
    env.command_preset_with("own", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    let dir = env.project.parent().unwrap();
    let (wrapper, tripped) = (dir.join("tripping-git"), dir.join("tripped"));
    std::fs::create_dir_all(&wrapper).unwrap();
    let real = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout).unwrap();
    // The first add makes its branch as git does, then fails as git did.
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *'worktree add --quiet -b '*) if [ ! -e {t} ]; then touch {t}\n\
         dir=; prev=; n=0\n\
         for a in \"$@\"; do\n\
           if [ \"$prev\" = -C ] && [ -z \"$dir\" ]; then dir=$a; fi\n\
           if [ \"$prev\" = -b ]; then b=$a; n=1; elif [ $n = 1 ]; then n=2; elif [ $n = 2 ]; then base=$a; n=3; fi\n\
           prev=$a\n\
         done\n\
         {real} -C \"$dir\" branch \"$b\" \"$base\"\n\
         echo 'fatal: failed to read .git/worktrees/other/commondir: Success' >&2; exit 128; fi;;\n\
         esac\nexec {real} \"$@\"\n",
        t = tripped.display(),
        real = real.trim()
    );
    std::fs::write(wrapper.join("git"), script).unwrap();
    std::fs::set_permissions(wrapper.join("git"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", wrapper.display(), std::env::var("PATH").unwrap());
    let out = env.command(&["launch", "own", "x", "--json"]).env("PATH", path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string();
    let run = env.wait_end(&id);
    assert!(tripped.exists(), "git's failure was never met");
    assert_eq!(run["status"], "completed", "{run:#}");
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read_to_string(Path::new(&worktree).join("x.txt")).unwrap(), "mine\n");
    env.ok(&["merge", &id]);
    assert_eq!(std::fs::read_to_string(env.project.join("x.txt")).unwrap(), "mine\n");
}

/// A run whose worktree folder is gone (removed by hand, or never made),
/// or is an empty folder put where it was, is said to be so by every verb
/// that needs it, and a discard still forgets it and its branch, and
/// nothing else: the user's own worktree on a disk unmounted stays listed.
#[test]
fn a_worktree_folder_removed_by_hand_is_said_and_discarded() {
    let env = one_file_repo();
    let p = &env.project;
    env.command_preset_with("own", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    // The user's own worktree, on a disk now unmounted.
    let mine = p.parent().unwrap().join("usb-worktree");
    git(p, &["worktree", "add", "-q", "-b", "mywork", mine.to_str().unwrap()]);
    let away = p.parent().unwrap().join("unmounted");
    std::fs::rename(&mine, &away).unwrap();
    for (task, put_back) in [("x", false), ("y", true)] {
        let id = env.launch("own", task);
        env.wait_end(&id);
        let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
        std::fs::remove_dir_all(&worktree).unwrap();
        if put_back {
            std::fs::create_dir(&worktree).unwrap();
        }
        for verb in ["merge", "diff"] {
            let out = env.corral(&[verb, &id]);
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{verb} went on");
            assert!(said.contains("is not there") && said.contains("corral discard"), "{verb}: {said}");
        }
        let shown = env.ok(&["show", &id]);
        assert!(shown.contains("missing: removed by hand; its branch keeps its commits"), "{shown}");
        env.ok(&["discard", &id]);
        let branch = format!("corral/{id}");
        assert_eq!(git(p, &["branch", "--list", &branch]).trim(), "", "the branch is gone");
        assert!(!git(p, &["worktree", "list"]).contains(&worktree), "its entry is forgotten");
    }
    assert!(git(p, &["worktree", "list"]).contains("usb-worktree"), "the user's own worktree was forgotten");
    std::fs::rename(&away, &mine).unwrap();
    assert_eq!(git(&mine, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "mywork");
}

/// `corral rm` of a run whose work is not merged keeps it and says how to
/// take it, and the words work as written: for work the agent left
/// uncommitted in its worktree, and for work on the branch of a worktree
/// removed by hand (whose entry and branch go when nothing is left).
#[test]
fn what_rm_keeps_it_says_how_to_take_and_that_works() {
    let env = one_file_repo();
    let p = &env.project;
    env.command_preset_with("own", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    let commits =
        "echo kept > \"$CORRAL_TASK.txt\"; git add -A && git -c user.name=a -c user.email=a@b commit -qm work";
    env.command_preset_with("commits", &["sh", "-c", commits], "worktree: true\n");
    let take = |said: &str| {
        let command = said.split("take them with `").nth(1).and_then(|rest| rest.split('`').next()).unwrap();
        let ran = Command::new("sh").args(["-c", command]).output().unwrap();
        assert!(ran.status.success(), "{command}: {}", String::from_utf8_lossy(&ran.stderr));
    };

    // Left uncommitted in its worktree.
    let id = env.launch("own", "u");
    env.wait_end(&id);
    let said = env.ok(&["rm", &id]);
    assert!(said.contains("kept"), "{said}");
    take(&said);
    assert_eq!(std::fs::read_to_string(p.join("u.txt")).unwrap(), "mine\n", "the advice took nothing: {said}");

    // Committed on its branch, its worktree removed by hand.
    let id = env.launch("commits", "c");
    env.wait_end(&id);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    std::fs::remove_dir_all(&worktree).unwrap();
    let said = env.ok(&["rm", &id]);
    assert!(said.contains(&format!("branch corral/{id} kept")), "{said}");
    take(&said);
    assert_eq!(std::fs::read_to_string(p.join("c.txt")).unwrap(), "kept\n");

    // Nothing on its branch, its worktree removed by hand: all goes.
    let id = env.launch("own", "n");
    env.wait_end(&id);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    std::fs::remove_dir_all(&worktree).unwrap();
    let said = env.ok(&["rm", &id]);
    assert!(!said.contains("kept"), "{said}");
    assert_eq!(git(p, &["branch", "--list", &format!("corral/{id}")]).trim(), "");
    assert!(!git(p, &["worktree", "list", "--porcelain"]).contains(&worktree), "its entry stayed");
}

/// A worktree and its branch both removed by hand: `discard` forgets the
/// run's worktree and says the branch was gone already, not that it
/// removed it.
#[test]
fn discard_says_a_branch_deleted_by_hand_was_gone_already() {
    let env = one_file_repo();
    let p = &env.project;
    env.command_preset_with("own", &["sh", "-c", "echo mine > \"$CORRAL_TASK.txt\""], "worktree: true\n");
    let id = env.launch("own", "z");
    env.wait_end(&id);
    let worktree = env.show(&id)["worktree"]["path"].as_str().unwrap().to_string();
    git(p, &["worktree", "remove", "--force", &worktree]);
    git(p, &["branch", "-D", &format!("corral/{id}")]);
    let said = env.ok(&["discard", &id]);
    assert_eq!(said.trim(), format!("{id}  worktree removed (its branch corral/{id} was gone already)"));
    assert!(env.show(&id)["worktree"].is_null());
}
