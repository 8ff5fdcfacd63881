//! Preset discovery: every source, precedence and overriding, files as
//! written by Claude Code and pi users, and broken files reported without
//! stopping the others.

mod common;

use common::Env;
use serde_json::Value;

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no preset {name} in {list:#}"))
}

#[test]
fn every_source_is_read_and_later_sources_override_earlier_ones() {
    let env = Env::new();
    let home = &env.user_home;
    let write = |dir: std::path::PathBuf, file: &str, text: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    };
    // Claude Code agent, exactly as such files are written.
    write(home.join(".claude/agents"), "code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Expert code review specialist. Use proactively after writing code.\ntools: Read, Grep, Glob, Bash\nmodel: sonnet\ncolor: purple\n---\n\nYou are a senior code reviewer.\n");
    // pi subagent, as written: no agent key, list of tools, extra keys.
    write(
        home.join(".pi/agent/subagents"),
        "scout.md",
        "---\nname: scout\ndescription: user scout\ntools: [read, grep]\nthinking: low\n---\nScout it.\n",
    );
    write(env.home.join("presets"), "scout.md", "---\nname: scout\ndescription: global scout\nagent: pi\n---\n");
    write(env.home.join("presets"), "only-global.md", "---\nname: only-global\ndescription: g\nagent: codex\n---\n");
    // Project sources, found from a nested folder by walking up.
    write(
        env.project.join(".claude/agents"),
        "code-reviewer.md",
        "---\nname: code-reviewer\ndescription: project reviewer\n---\n",
    );
    write(env.project.join(".pi/subagents"), "scout.md", "---\nname: scout\ndescription: project pi scout\n---\n");
    write(
        env.project.join(".corral/presets"),
        "scout.md",
        "---\nname: scout\ndescription: project corral scout\nagent: command\ncommand: [true]\n---\n",
    );
    let nested = env.project.join("src/deep");
    std::fs::create_dir_all(&nested).unwrap();

    let list = env.json(&["presets", "--cwd", nested.to_str().unwrap()]);

    let scout = by_name(&list, "scout");
    assert_eq!(scout["description"], "project corral scout");
    assert_eq!(scout["source"], "corral-project");
    assert_eq!(scout["agent"], "command");
    let overridden: Vec<&str> = scout["overrides"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert_eq!(overridden.len(), 4, "shipped, pi user, global, pi project: {overridden:?}");
    assert_eq!(overridden[0], "builtin:presets/scout.md");
    assert!(overridden[1].ends_with(".pi/agent/subagents/scout.md"));
    assert!(overridden[2].ends_with("corral-home/presets/scout.md"));
    assert!(overridden[3].ends_with("project/.pi/subagents/scout.md"));

    let reviewer = by_name(&list, "code-reviewer");
    assert_eq!(reviewer["source"], "claude-project");
    assert_eq!(reviewer["agent"], "claude", "Claude Code folders default to agent claude");
    assert_eq!(by_name(&list, "only-global")["source"], "global");
    assert_eq!(by_name(&list, "tests")["source"], "shipped");
}

#[test]
fn claude_and_pi_files_load_as_written_in_the_wild() {
    let env = Env::new();
    let dir = env.user_home.join(".claude/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("debugger.md"),
        "---\nname: debugger\ndescription: Debugging specialist for errors, test failures, and unexpected behavior.\ntools: Read, Edit, Bash, Grep, Glob\nmodel: inherit\n---\n\nYou are an expert debugger.\n").unwrap();
    let list = env.json(&["presets"]);
    let debugger = by_name(&list, "debugger");
    assert_eq!(debugger["agent"], "claude");
    assert_eq!(debugger["model"], Value::Null, "`model: inherit` means the agent's default");
    assert_eq!(debugger["problems"].as_array().unwrap().len(), 0);
    // Every field, limits written as in a preset.
    assert_eq!(debugger["tools"], serde_json::json!(["Read", "Edit", "Bash", "Grep", "Glob"]));
    assert_eq!(debugger["system_prompt"], "You are an expert debugger.");
    env.preset_file(
        ".corral/presets",
        "limited.md",
        "---\nname: limited\ndescription: d\nagent: claude\ntimeout: 30m\nidle_timeout: 90s\nchildren_timeout: 1h 30m\nargs: [--allowedTools, Read]\n---\n",
    );
    let limited = by_name(&env.json(&["presets"]), "limited").clone();
    assert_eq!(limited["timeout"], "30m");
    assert_eq!(limited["idle_timeout"], "1m 30s");
    assert_eq!(limited["startup_timeout"], Value::Null);
    assert_eq!(limited["children_timeout"], "1h 30m");
    assert_eq!(limited["args"], serde_json::json!(["--allowedTools", "Read"]));
}

#[test]
fn broken_files_are_listed_with_path_and_reason_and_others_still_load() {
    let env = Env::new();
    env.preset_file(
        ".corral/presets",
        "good.md",
        "---\nname: good\ndescription: fine\nagent: command\ncommand: [true]\n---\n",
    );
    env.preset_file(".corral/presets", "no-front.md", "just markdown\n");
    env.preset_file(".corral/presets", "bad-yaml.md", "---\nname: [unclosed\n---\n");
    env.preset_file(".corral/presets", "bad-agent.md", "---\nname: x\ndescription: d\nagent: gpt-9\n---\n");
    env.preset_file(
        ".corral/presets",
        "bad-time.md",
        "---\nname: y\ndescription: d\nagent: pi\ntimeout: forever\n---\n",
    );

    let list = env.json(&["presets"]);
    assert_eq!(by_name(&list, "good")["agent"], "command");
    let problems: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"].is_null())
        .map(|p| (p["path"].as_str().unwrap(), p["problems"][0].as_str().unwrap()))
        .collect();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    let reason = |file: &str| problems.iter().find(|(p, _)| p.ends_with(file)).unwrap().1;
    assert!(reason("no-front.md").contains("frontmatter"));
    assert!(reason("bad-yaml.md").contains("invalid YAML"));
    assert!(reason("bad-agent.md").contains("gpt-9"));
    assert!(reason("bad-time.md").contains("not a duration"));

    let human = env.ok(&["presets"]);
    assert!(human.contains("Not usable (4)"), "{human}");
    assert!(human.contains("bad-agent.md"));

    // Launching the broken one says why, naming the file.
    let out = env.corral(&["launch", "bad-time", "go"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no preset 'bad-time'") && err.contains("bad-time.md"), "{err}");
}

#[test]
fn a_cloned_repositorys_preset_runs_a_command_only_once_trusted_and_says_what_it_replaces() {
    let env = Env::new();
    let ran = env.project.join("ran");
    // A repository the user just cloned replaces the shipped `reviewer`.
    let text = format!(
        "---\nname: reviewer\ndescription: looks harmless\nagent: command\ncommand: [touch, '{}']\n---\n",
        ran.display()
    );
    let file = env.untrusted_preset_file(".claude/agents", "reviewer.md", &text);
    let out = env.corral(&["launch", "reviewer", "review this"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a cloned repository's command ran with no word");
    assert!(err.contains("runs a command") && err.contains("corral presets trust"), "{err}");
    assert!(!ran.exists());
    let listed = env.ok(&["presets"]);
    assert!(listed.contains("Not trusted yet (1)"), "{listed}");
    assert!(listed.contains("is the project's") && listed.contains("builtin:presets/reviewer.md"), "{listed}");
    let list = env.json(&["presets"]);
    assert!(by_name(&list, "reviewer")["untrusted"].is_string(), "{list:#}");

    // Trusted as it is, it runs; the launch says it is the project's.
    let trusted = env.ok(&["presets", "trust"]);
    assert!(trusted.contains("trusted") && trusted.contains("reviewer.md"), "{trusted}");
    let out = env.corral(&["launch", "reviewer", "review this"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is the project's"), "the launch did not say the preset replaces the shipped one: {said}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(env.wait_end(&id)["status"], "completed");
    assert!(ran.exists());

    // Changed after it was trusted: asked again.
    std::fs::write(&file, text.replace("looks harmless", "changed")).unwrap();
    let out = env.corral(&["launch", "reviewer", "again"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed since you trusted it"));
}

#[test]
fn trust_is_never_given_from_inside_a_run() {
    let env = Env::new();
    let out = env.project.join("out");
    env.command_preset(
        "truster",
        &["sh", "-c", &format!("corral presets trust > '{}' 2>&1; echo rc=$? >> '{0}'", out.display())],
    );
    env.untrusted_preset_file(
        ".corral/presets",
        "evil.md",
        "---\nname: evil\ndescription: e\nagent: command\ncommand: [true]\n---\n",
    );
    let id = env.launch("truster", "x");
    env.wait_end(&id);
    let said = std::fs::read_to_string(&out).unwrap();
    assert!(said.contains("not from inside run") && said.contains("rc=2"), "{said}");
    let failed = env.corral(&["launch", "evil", "x"]);
    assert!(!failed.status.success(), "a run's agent trusted a preset");
}
