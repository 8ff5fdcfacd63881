//! The real agent CLIs — Claude Code, Codex, pi, Gemini CLI and opencode
//! from npm, as
//! `scripts/setup.sh test` installs them in `target/real-agents` — run by
//! Corral against a stub model server of our own on loopback
//! (`stub_model.rs`): success, an API error, retries, abort of a hung agent,
//! a task that begins with `-`, and parents that launch children (through
//! Claude's Bash tool with `--allowedTools "Bash(corral launch:*)"`, Claude
//! and Codex through `corral mcp`, pi through its bash tool) and get their
//! results in a continuation turn.

#[path = "../common/mod.rs"]
mod common;
mod stub_model;

use std::path::PathBuf;
use std::time::Duration;

use common::{processes_of_run, Env};
use serde_json::Value;
use stub_model::StubModel;

/// Real CLIs start slowly (Node, MCP servers) and retry with backoff.
const LIMIT: Duration = Duration::from_secs(90);

/// Where `scripts/setup.sh test` installs the real CLIs.
fn real_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("CORRAL_REAL_AGENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/real-agents/node_modules/.bin"));
    let path = dir.join(name);
    assert!(path.exists(), "no real {name} at {}: run ./scripts/setup.sh test first", path.display());
    path
}

/// An installation whose `claude`, `codex` and `pi` are the real CLIs,
/// configured (in the test's own $HOME) to talk to `stub` only.
struct Real {
    env: Env,
    stub: StubModel,
}

impl Real {
    fn new() -> Real {
        let env = Env::new();
        // The raw streams are kept: a failing test leaves them as captures.
        env.config("[transcripts]\nraw_logs = \"20M\"\n[usage_limits]\nretry = \"1s\"\n");
        let stub = StubModel::start();
        for agent in ["claude", "codex", "pi", "gemini", "opencode"] {
            let link = env.bin.join(agent);
            std::fs::remove_file(&link).unwrap();
            std::os::unix::fs::symlink(real_bin(agent), link).unwrap();
        }
        let home = &env.user_home;
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(
            home.join(".codex/config.toml"),
            format!(
                "model = \"stub-model\"\nmodel_provider = \"stub\"\n\n[model_providers.stub]\nname = \"stub\"\n\
                 base_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"STUB_API_KEY\"\nstream_max_retries = 2\n\n\
                 [mcp_servers.corral]\ncommand = \"corral\"\nargs = [\"mcp\"]\ndefault_tools_approval_mode = \"approve\"\n",
                stub.base_url()
            ),
        )
        .unwrap();
        std::fs::create_dir_all(home.join(".pi/agent")).unwrap();
        let models = serde_json::json!({"providers": {"stub": {
            "baseUrl": stub.base_url(), "api": "anthropic-messages", "apiKey": "STUB_API_KEY",
            "models": [{"id": "stub-model", "name": "Stub", "reasoning": false, "input": ["text"],
                        "contextWindow": 100000, "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}});
        std::fs::write(home.join(".pi/agent/models.json"), models.to_string()).unwrap();
        // Gemini CLI: an API key's auth (the stub is its base URL), no
        // telemetry or update checks.
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        let gemini = serde_json::json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": true}, "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false}});
        std::fs::write(home.join(".gemini/settings.json"), gemini.to_string()).unwrap();
        // opencode: its Anthropic provider, pointed at the stub.
        std::fs::create_dir_all(home.join(".config/opencode")).unwrap();
        let opencode = serde_json::json!({"provider": {"anthropic": {"options": {
            "baseURL": format!("{}/v1", stub.base_url()), "apiKey": "sk-stub"}}},
            "autoupdate": false, "share": "disabled"});
        std::fs::write(home.join(".config/opencode/opencode.json"), opencode.to_string()).unwrap();
        env.command_preset("quick", &["sh", "-c", "echo child says $CORRAL_TASK"]);
        Real { env, stub }
    }

    /// A preset for a real agent.
    fn preset(&self, name: &str, agent: &str, extra: &str) {
        let model = match agent {
            "pi" => "model: stub-model\nargs: [--provider, stub]\n",
            // Headless Gemini CLI refuses a folder it was not told to trust.
            "gemini" => "args: [--skip-trust]\n",
            "opencode" => "model: anthropic/claude-sonnet-4-5\n",
            _ => "",
        };
        self.env.agent_preset(name, agent, &format!("{model}{extra}"));
    }

    /// Launches `preset` with `task` (after `--`), in the stub's world.
    fn launch(&self, preset: &str, task: &str) -> String {
        self.launch_with(&[], preset, task)
    }

    /// As [`Real::launch`], with `options` for `corral launch`.
    fn launch_with(&self, options: &[&str], preset: &str, task: &str) -> String {
        self.launch_in(&[], options, preset, task)
    }

    /// As [`Real::launch_with`], with `vars` set in the launcher's
    /// environment (which the run's agent inherits).
    fn launch_in(&self, vars: &[(&str, &str)], options: &[&str], preset: &str, task: &str) -> String {
        let mut args = vec!["launch"];
        args.extend(options);
        args.extend([preset, "--", task]);
        let mut cmd = self.env.command(&args);
        cmd.envs(vars.iter().copied());
        cmd.env("ANTHROPIC_BASE_URL", self.stub.base_url())
            .env("ANTHROPIC_API_KEY", "sk-stub")
            .env("STUB_API_KEY", "sk-stub")
            .env("GEMINI_API_KEY", "stub")
            .env("GOOGLE_GEMINI_BASE_URL", self.stub.base_url())
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("NO_UPDATE_NOTIFIER", "1");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "launch failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn end(&self, id: &str) -> Value {
        self.env.wait_run(id, LIMIT, |r| !r["exited_at"].is_null() && common::is_terminal(r))
    }

    /// With `CORRAL_CAPTURE_TO=DIR`, keeps the run's raw stdout as
    /// `DIR/AGENT-CASE.jsonl`: how `tests/captures/` is refreshed for a new
    /// CLI version.
    fn capture(&self, id: &str, agent: &str, case: &str) {
        if let Some(dir) = std::env::var_os("CORRAL_CAPTURE_TO") {
            let to = PathBuf::from(dir).join(format!("{agent}-{case}.jsonl"));
            std::fs::copy(self.env.run_dir(id).join("stdout.log"), to).expect("keep the capture");
        }
    }

    fn transcript(&self, id: &str) -> String {
        self.env.ok(&["tail", "-n", "all", id])
    }

    /// Every case that any agent must pass.
    fn basics(&self, agent: &str, args: &str) {
        self.preset("a", agent, args);
        let ok = self.launch("a", "--verbose please stub> say hello from the stub");
        let run = self.end(&ok);
        assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{}", self.transcript(&ok));
        assert_eq!(run["final_text"], "hello from the stub", "{agent}");
        self.capture(&ok, agent, "success");
        let served = self.stub.paths();
        assert!(served.iter().any(|p| p.starts_with("POST /v1")), "{agent} never asked the stub: {served:?}");

        let flaky = self.launch("a", "stub> flaky 1 stub> say recovered");
        let run = self.end(&flaky);
        assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{}", self.transcript(&flaky));
        assert_eq!(run["final_text"], "recovered", "{agent}");
        self.capture(&flaky, agent, "retried-500");

        let broken = self.launch("a", "stub> error 400");
        let run = self.end(&broken);
        assert_eq!(run["status"], "failed", "{agent}: {run:#}\n{}", self.transcript(&broken));
        self.capture(&broken, agent, "error-400");

        let hung = self.launch("a", "stub> hang");
        self.env.wait_run(&hung, LIMIT, |r| r["status"] == "running");
        let aborted = self.env.json(&["abort", &hung]);
        assert_eq!(aborted[0]["status"], "aborted", "{agent}");
        let run = self.end(&hung);
        assert_eq!(run["stop_reason"], "user_abort");
        assert!(processes_of_run(&hung).is_empty(), "{agent}: processes survived the abort");
    }

    /// `corral reply` continues the agent's own session: the stub sees the
    /// first answer in the conversation of the second turn.
    fn follow_up(&self, preset: &str) {
        let id = self.launch(preset, "stub> say first answer");
        let first = self.end(&id);
        assert_eq!(first["final_text"], "first answer");
        self.env.ok(&["reply", &id, "--", "stub> say second answer"]);
        let run = self.env.wait_run(&id, LIMIT, |r| r["final_text"] == "second answer" && !r["exited_at"].is_null());
        assert_eq!(run["status"], "completed", "{run:#}\n{}", self.transcript(&id));
        assert_eq!(run["session_id"], first["session_id"], "the same session");
        let tokens = |r: &Value| r["usage"]["output_tokens"].as_u64().unwrap();
        assert!(tokens(&run) > tokens(&first), "usage adds up: {run:#}");
        assert!(self.transcript(&id).contains("[user] stub> say second answer"));
        self.capture(&id, self.env.show(&id)["agent"].as_str().unwrap(), "resumed");
    }

    /// A parent that launched a child and ended its turn gets the child's
    /// result in a continuation turn.
    fn parent_gets_child_result(&self, preset: &str, task: &str) {
        let parent = self.launch(preset, task);
        let run = self.end(&parent);
        let transcript = self.transcript(&parent);
        assert_eq!(run["status"], "completed", "{run:#}\n{transcript}");
        let children = run["children"].as_array().unwrap();
        assert_eq!(children.len(), 1, "{run:#}\n{transcript}");
        let child = self.env.show(children[0].as_str().unwrap());
        assert_eq!(child["status"], "completed");
        assert_eq!(run["final_text"], "Combined: child says from-the-parent", "{transcript}");
        assert!(transcript.contains("continuation turn 1"), "{transcript}");
    }
}

#[test]
fn real_claude_code() {
    let real = Real::new();
    real.basics("claude", "args: [--allowedTools, \"Bash(corral launch:*)\"]\n");
    real.follow_up("a");
    real.preset("lead", "claude", "args: [--allowedTools, \"Bash(corral launch:*)\"]\n");
    real.parent_gets_child_result("lead", "stub> bash corral launch quick from-the-parent stub> say launched {last}");
    let mcp = serde_json::json!({"mcpServers": {"corral": {"command": "corral", "args": ["mcp"]}}}).to_string();
    real.preset(
        "mcplead",
        "claude",
        &format!("args: [--mcp-config, '{mcp}', --allowedTools, mcp__corral__launch_agent]\n"),
    );
    real.parent_gets_child_result(
        "mcplead",
        r#"stub> mcp launch_agent {"preset": "quick", "task": "from-the-parent"} stub> say launched {last}"#,
    );

    // A tool call headless Claude refuses is shown as denied.
    real.preset("plain", "claude", "");
    let id = real.launch("plain", "stub> bash touch /tmp/corral-denied-probe stub> say after the denial");
    let run = real.end(&id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(run["denied"], serde_json::json!(["Bash(touch /tmp/corral-denied-probe)"]), "{run:#}");
    let shown = real.env.ok(&["show", &id]);
    assert!(shown.contains("1 action was denied: Bash(touch /tmp/corral-denied-probe)"), "{shown}");

    // Allow and continue: the same session, with exactly that call allowed.
    let id = real.launch("plain", "stub> bash touch corral-probe stub> say after the denial");
    let run = real.end(&id);
    assert_eq!(run["denied"], serde_json::json!(["Bash(touch corral-probe)"]), "{run:#}");
    let again = "stub> bash touch corral-probe stub> say touched it";
    let out = real.env.ok(&["reply", &id, "--allow-denied", "--", again]);
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{out}\n{run:#}\n{transcript}");
    assert_eq!(run["final_text"], "touched it", "{transcript}");
    assert_eq!(run["denied"], serde_json::json!([]), "{run:#}\n{transcript}");
    assert!(real.env.project.join("corral-probe").exists(), "the allowed call ran:\n{transcript}");

    // A plain follow-up, in the same session.
    real.env.ok(&["reply", &id, "--", "stub> say and a follow-up"]);
    let run = real.end(&id);
    assert_eq!(run["final_text"], "and a follow-up");
    assert_eq!(real.env.store().replies(&id).unwrap().len(), 2);

    // The provider's rate limit, no reset time said: tried again later in
    // its own session (config.toml's [usage_limits] retry, short here), and
    // it goes on.
    let id = real.launch("a", "stub> limit 1 stub> say after the rate limit");
    let run = real.end(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{}", real.transcript(&id));
    assert_eq!(run["final_text"], "after the rate limit");
    assert!(real.transcript(&id).contains("usage limit reached with no reset time said"), "{}", real.transcript(&id));

    // A budget crossed mid-run: Claude Code's second model message (12
    // input tokens each, as its stream says them live) crosses 20 tokens;
    // the run is frozen, and goes on to its end once more is allowed.
    real.preset("echoer", "claude", "args: [--allowedTools, \"Bash(echo:*)\"]\n");
    let task = "stub> bash echo one stub> bash echo two stub> say spent";
    let id = real.launch_with(&["--budget", "tokens=20"], "echoer", task);
    let paused = real.env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["pause_reason"], "budget", "{paused:#}\n{}", real.transcript(&id));
    real.env.ok(&["resume", &id, "--budget", "+1M tokens"]);
    let run = real.end(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{}", real.transcript(&id));
    assert_eq!(run["final_text"], "spent");
}

#[test]
fn real_codex() {
    let real = Real::new();
    real.basics("codex", "");
    real.follow_up("a");
    real.preset("lead", "codex", "");
    real.parent_gets_child_result(
        "lead",
        r#"stub> mcp launch_agent {"preset": "quick", "task": "from-the-parent"} stub> say launched {last}"#,
    );

    // The account's usage limit, resetting now: Codex says "try again at
    // <this minute>"; the run is paused (not failed), then goes on in its
    // own session by itself and finishes.
    let id = real.launch("a", "stub> limit 1 stub> say after the limit");
    let paused = real.env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(paused["pause_reason"], "usage_limit", "{paused:#}\n{}", real.transcript(&id));
    real.capture(&id, "codex", "usage-limit-now");
    let run = real.end(&id);
    assert_eq!(run["status"], "completed", "{run:#}\n{}", real.transcript(&id));
    assert_eq!(run["final_text"], "after the limit");
    assert!(real.transcript(&id).contains("Continue where you stopped"));
}

#[test]
fn doctor_knows_the_stream_of_each_real_cli() {
    let real = Real::new();
    let out = real.env.command(&["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor prints JSON");
    for agent in ["claude", "codex", "pi", "gemini", "opencode"] {
        let finding = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["area"] == "agents" && f["check"] == agent)
            .unwrap_or_else(|| panic!("no finding for {agent}: {report:#}"));
        assert_eq!(finding["level"], "ok", "{finding:#}");
        assert!(finding["detail"].as_str().unwrap().contains("its stream is known"), "{finding:#}");
    }
}

#[test]
fn real_pi() {
    let real = Real::new();
    real.basics("pi", "");
    real.follow_up("a");
    real.preset("lead", "pi", "tools: bash\n");
    real.parent_gets_child_result("lead", "stub> bash corral launch quick from-the-parent stub> say launched {last}");
}

#[test]
fn real_gemini_cli() {
    let real = Real::new();
    real.basics("gemini", "");
    real.follow_up("a");
    answers_through_the_sandboxs_proxy(&real, "gemini");
}

#[test]
fn real_opencode() {
    let real = Real::new();
    real.basics("opencode", "");
    real.follow_up("a");
    answers_through_the_sandboxs_proxy(&real, "opencode");
}

/// Sandboxed with only its API reachable, the agent talks to the stub
/// through the shepherd's proxy (the sandbox has no other way out) and
/// writes only its own folders (opencode's `~/.cache/opencode`, made if
/// missing: it failed the run before).
fn answers_through_the_sandboxs_proxy(real: &Real, agent: &str) {
    // As on a fresh home: the caches and state earlier runs made are gone.
    for made in [".cache", ".local/state"] {
        let _ = std::fs::remove_dir_all(real.env.user_home.join(made));
    }
    real.preset("api-only", agent, "sandbox: {write: [worktree], network: [agent]}\n");
    let id = real.launch("api-only", "stub> say hello there");
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{transcript}");
    assert_eq!(run["final_text"], "hello there", "{agent}: {transcript}");
    assert!(transcript.contains("sandbox: reaches only 127.0.0.1"), "{agent}: {transcript}");
    assert!(!transcript.contains("sandbox refused writing"), "{agent}: {transcript}");
}

/// A sandboxed real agent: its own work (the folder it may write, its stub
/// API) works; a write outside and a read of `~/.ssh` fail and are shown as
/// the sandbox's denials.
fn sandboxed(real: &Real, agent: &str, args: &str) {
    std::fs::create_dir_all(real.env.user_home.join(".ssh")).unwrap();
    std::fs::write(real.env.user_home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let outside = real.env.user_home.join(format!("{agent}-outside.txt"));
    // The project is a repository: the agent writes it, never its hooks.
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").args(args).current_dir(&real.env.project).status().unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    if !real.env.project.join(".git").exists() {
        git(&["init", "-q"]);
    }
    let hook = real.env.project.join(".git/hooks/pre-commit");
    real.preset("boxed", agent, &format!("{args}sandbox: {{write: [worktree], network: all}}\n"));
    let task = format!(
        "stub> bash echo mine > {agent}-inside.txt; echo x > {}; cat ~/.ssh/id_ed25519 stub> bash echo touch-pwned > .git/hooks/pre-commit stub> say sandboxed {{last}}",
        outside.display()
    );
    let id = real.launch("boxed", &task);
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{transcript}");
    assert!(real.env.project.join(format!("{agent}-inside.txt")).exists(), "{agent}: {transcript}");
    assert!(!outside.exists(), "{agent} wrote outside its sandbox");
    assert!(!run["final_text"].as_str().unwrap_or("").contains("PRIVATE KEY"), "{agent}: {run:#}");
    let denied: Vec<&str> = run["denied"].as_array().unwrap().iter().filter_map(|d| d.as_str()).collect();
    assert!(
        denied.contains(&format!("sandbox: write {}", outside.display()).as_str()),
        "{agent}: {denied:?}\n{transcript}"
    );
    // The key is not there at all (the home is shown by allow-list), so no
    // read of it is refused: there is nothing to read.
    assert!(transcript.contains("sandbox refused writing"), "{agent}: {transcript}");
    assert!(!hook.exists(), "{agent} planted a hook");
    // Claude Code refuses a write into `.git` itself, before the sandbox.
    let refused_hook =
        |d: &&str| d.contains("pre-commit") && (d.starts_with("sandbox: write") || d.starts_with("Bash("));
    assert!(denied.iter().any(refused_hook), "{agent}: {denied:?}\n{transcript}");
}

/// A prompt-injected real agent writes its own folder to plant what the
/// user's next unsandboxed agent, or Corral, would run or read: a preset
/// in `~/.claude/agents` (`sandbox: none`), a hook in Claude Code's
/// settings, a provider in Codex's config. It writes the run's copy: the
/// user's folder, and `corral presets`, are as they were.
fn plants_nothing_in_its_own_folder(real: &Real, agent: &str, args: &str, folder: &str, file: &str) {
    let real_folder = real.env.user_home.join(folder);
    std::fs::create_dir_all(&real_folder).unwrap();
    let target = real_folder.join(file);
    let before = std::fs::read(&target).ok();
    real.preset("planter", agent, &format!("{args}sandbox: {{write: [worktree], network: [agent]}}\n"));
    let planted = "---\\nname: planted\\nagent: command\\ncommand: [sh, -c, pwned]\\nsandbox: none\\n---\\n";
    let task = format!(
        "stub> bash mkdir -p ~/{folder}/agents; printf -- '{planted}' > ~/{folder}/agents/planted.md; \
         printf 'planted' >> ~/{folder}/{file}; echo done stub> say planted {{last}}"
    );
    let id = real.launch("planter", &task);
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{transcript}");
    assert!(transcript.contains("done"), "{agent}: the agent could not write its own folder: {transcript}");
    assert!(!real_folder.join("agents/planted.md").exists(), "{agent} planted a preset in the user's folder");
    assert_eq!(std::fs::read(&target).ok(), before, "{agent} changed the user's {folder}/{file}");
    let presets = real.env.ok(&["presets"]);
    assert!(!presets.contains("planted"), "{agent}: {presets}");
}

/// A real agent whose sandbox reaches only its API: the stub answers, a
/// host not listed is refused and shown.
fn reaching_only_its_api(real: &Real, agent: &str, args: &str) {
    real.preset("api-only", agent, &format!("{args}sandbox: {{write: [worktree], network: [agent]}}\n"));
    let task = "stub> bash curl -sS -o /dev/null https://example.com/ 2>&1; echo tried stub> say reached {last}";
    let id = real.launch("api-only", task);
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{transcript}");
    assert!(run["final_text"].as_str().unwrap_or("").starts_with("reached"), "{agent}: {run:#}");
    assert!(transcript.contains("sandbox refused connecting to example.com"), "{agent}: {transcript}");
}

/// Allow and go on: a write refused, widened with `corral allow` (or with
/// `reply --allow-denied`, the window's and the phone's "Allow and
/// continue"), and the agent's session goes on to write it; a denied read
/// is never allowed that way.
fn allowed_and_going_on(real: &Real, agent: &str, args: &str, by_reply: bool) {
    let shared = real.env.user_home.join(format!("{agent}-shared"));
    std::fs::create_dir_all(&shared).unwrap();
    real.preset("narrow", agent, &format!("{args}sandbox: {{write: [worktree], network: [agent]}}\n"));
    let task =
        format!("stub> bash echo first > {}/a.txt; cat ~/.ssh/id_ed25519 stub> say refused {{last}}", shared.display());
    let id = real.launch("narrow", &task);
    let run = real.end(&id);
    assert!(!shared.join("a.txt").exists(), "{agent}");
    let transcript = real.transcript(&id);
    assert!(transcript.contains(&format!("corral allow {id} --write {}", shared.display())), "{agent}: {transcript}");
    let again =
        format!("stub> bash echo second > {}/a.txt; cat ~/.ssh/id_ed25519 stub> say wrote it", shared.display());
    let shared_text = shared.to_string_lossy().into_owned();
    if by_reply {
        real.env.ok(&["reply", &id, "--allow-denied", "--", &again]);
    } else {
        let out = real.env.ok(&["allow", &id, "--write", &shared_text, "--", &again]);
        assert!(out.contains(&format!("its sandbox now allows write {shared_text}")), "{out}");
    }
    let run2 = real.env.wait_run(&id, LIMIT, |r| r["final_text"] == "wrote it" && !r["exited_at"].is_null());
    assert_eq!(run2["status"], "completed", "{agent}: {run:#}\n{run2:#}\n{}", real.transcript(&id));
    assert_eq!(std::fs::read_to_string(shared.join("a.txt")).unwrap().trim(), "second", "{agent}");
    assert_eq!(run2["session_id"], run["session_id"], "{agent}: the same session went on");
    // The key stays out of reach after the widening: not there at all
    // (the home is shown by allow-list), never allowed by a click.
    assert!(!real.transcript(&id).contains("PRIVATE KEY"), "{agent}");
}

/// The shipped profiles: a reviewer reads the project and writes nothing;
/// a builder writes its folder and /tmp; both reach their agent's API.
fn profiles(real: &Real, agent: &str, args: &str) {
    reviewed(real, agent, args, &[]);
    real.preset("bld", agent, &format!("{args}sandbox: builder\n"));
    let id = real.launch(
        "bld",
        "stub> bash echo x > built.txt && echo y > /tmp/corral-built && echo done stub> say built {last}",
    );
    let run = real.end(&id);
    let said = run["final_text"].as_str().unwrap_or("");
    assert!(said.starts_with("built") && said.ends_with("done"), "{agent}: {run:#}\n{}", real.transcript(&id));
    assert!(real.env.project.join("built.txt").exists());
    let _ = std::fs::remove_file("/tmp/corral-built");
}

/// A reviewer's run: it reads the project, its write is refused, and the
/// refusal is said in its transcript, in the words of the shell its agent
/// chose (`vars`: `SHELL`; Claude Code runs zsh where SHELL is not bash
/// and zsh is installed, and zsh words a refusal its own way).
fn reviewed(real: &Real, agent: &str, args: &str, vars: &[(&str, &str)]) {
    std::fs::write(real.env.project.join("notes.txt"), "the project's own words").unwrap();
    real.preset("rev", agent, &format!("{args}sandbox: reviewer\n"));
    let id =
        real.launch_in(vars, &[], "rev", "stub> bash cat notes.txt; echo x > reviewed.txt stub> say reviewed {last}");
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent} {vars:?}: {run:#}\n{transcript}");
    assert!(transcript.contains("the project's own words"), "{agent} {vars:?}: {transcript}");
    assert!(!real.env.project.join("reviewed.txt").exists(), "{agent} {vars:?}: a reviewer wrote");
    assert!(transcript.contains("sandbox refused writing"), "{agent} {vars:?}: {transcript}");
}

/// `read: only`: a real agent still runs (its CLI, Node and its own files
/// are let in) and sees only what is listed.
fn reading_only(real: &Real, agent: &str, args: &str) {
    std::fs::write(real.env.project.join("notes.txt"), "the project's own words").unwrap();
    std::fs::write(real.env.user_home.join("diary.txt"), "the user's diary").unwrap();
    let only =
        format!("sandbox: {{read: {{only: [{}]}}, write: [worktree], network: [agent]}}\n", real.env.project.display());
    real.preset("only", agent, &format!("{args}{only}"));
    let id = real.launch("only", "stub> bash cat notes.txt; cat ~/diary.txt || echo no-diary stub> say read {last}");
    let run = real.end(&id);
    let transcript = real.transcript(&id);
    assert_eq!(run["status"], "completed", "{agent}: {run:#}\n{transcript}");
    let said = run["final_text"].as_str().unwrap_or("");
    assert!(said.contains("the project's own words") && said.contains("no-diary"), "{agent}: {transcript}");
    assert!(!said.contains("the user's diary"), "{agent}: {transcript}");
}

#[test]
fn real_agents_in_a_sandbox() {
    let real = Real::new();
    sandboxed(&real, "claude", "args: [--allowedTools, Bash]\n");
    sandboxed(&real, "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n");
    sandboxed(&real, "pi", "tools: bash\n");
    plants_nothing_in_its_own_folder(&real, "claude", "args: [--allowedTools, Bash]\n", ".claude", "settings.json");
    let codex = "args: [--dangerously-bypass-approvals-and-sandbox]\n";
    plants_nothing_in_its_own_folder(&real, "codex", codex, ".codex", "config.toml");
    reaching_only_its_api(&real, "claude", "args: [--allowedTools, Bash]\n");
    reaching_only_its_api(&real, "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n");
    reaching_only_its_api(&real, "pi", "tools: bash\n");
    allowed_and_going_on(&real, "claude", "args: [--allowedTools, Bash]\n", false);
    allowed_and_going_on(&real, "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n", false);
    allowed_and_going_on(&real, "pi", "tools: bash\n", true);
    profiles(&real, "claude", "args: [--allowedTools, Bash]\n");
    profiles(&real, "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n");
    reviewed(&real, "claude", "args: [--allowedTools, Bash]\n", &[("SHELL", "/usr/bin/zsh")]);
    // A sandboxed agent launches a run over MCP and its shell, its
    // `corral` carried out by its shepherd outside the sandbox (Codex
    // starts its MCP server with a scrubbed environment: found by its
    // cgroup), and is handed the child's result.
    real.preset("boxedlead", "codex", "sandbox: {write: [worktree], network: [agent]}\n");
    real.parent_gets_child_result(
        "boxedlead",
        r#"stub> mcp launch_agent {"preset": "quick", "task": "from-the-parent"} stub> say launched {last}"#,
    );
    real.preset(
        "boxedlead",
        "claude",
        "args: [--allowedTools, Bash]\nsandbox: {write: [worktree], network: [agent]}\n",
    );
    real.parent_gets_child_result(
        "boxedlead",
        "stub> bash corral launch quick from-the-parent stub> say launched {last}",
    );
    reading_only(&real, "claude", "args: [--allowedTools, Bash]\n");
    reading_only(&real, "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n");
    reading_only(&real, "pi", "tools: bash\n");
}

/// Real Codex says a turn's spend on its stream only at the turn's end:
/// while its shell command runs, its rollout file already says what the
/// first response cost, and the run is frozen at its budget mid-turn.
#[test]
fn real_codex_is_held_to_its_budget_mid_turn() {
    let real = Real::new();
    real.preset("c", "codex", "args: [--dangerously-bypass-approvals-and-sandbox]\n");
    let id = real.launch_with(&["--budget", "15 tokens"], "c", "stub> bash sleep 20 stub> say done");
    let run = real.env.wait_run(&id, LIMIT, |r| r["status"] == "paused" || common::is_terminal(r));
    assert_eq!(run["status"], "paused", "{run:#}\n{}", real.transcript(&id));
    assert_eq!(run["pause_reason"], "budget", "{run:#}");
    assert!(run["final_text"].is_null(), "paused only at the turn's end: {run:#}");
    assert!(run["usage"]["output_tokens"].as_u64().unwrap_or(0) > 0, "{run:#}");
    real.env.ok(&["abort", &id]);
}
