//! `corral doctor`: each finding a user would act on, with the fix it names,
//! and the exit code scripts read.

mod common;

use common::Env;
use serde_json::Value;

fn findings(report: &Value, area: &str) -> Vec<Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["area"] == area).cloned().collect()
}

fn doctor(env: &Env) -> (Option<i32>, Value) {
    let out = env.corral(&["doctor", "--json"]);
    (out.status.code(), serde_json::from_slice(&out.stdout).expect("doctor prints JSON"))
}

#[test]
fn a_broken_settings_file_fails_and_names_its_fix_and_the_rest_is_still_checked() {
    let env = Env::new();
    env.config("max_paralel = 3\n");
    let (code, report) = doctor(&env);
    assert_eq!(code, Some(1), "{report:#}");
    let settings = findings(&report, "settings");
    let config = settings.iter().find(|f| f["check"] == "config.toml").unwrap();
    assert_eq!(config["level"], "fail");
    assert!(config["detail"].as_str().unwrap().contains("max_paralel"), "{config}");
    assert!(config["fix"].as_str().unwrap().contains("config.toml"), "{config}");
    let store = findings(&report, "store");
    assert_eq!(store[0]["level"], "ok", "{store:?}");
    assert!(store[0]["detail"].as_str().unwrap().contains("integrity ok"), "{store:?}");
    assert!(!findings(&report, "containment").is_empty() && !findings(&report, "git").is_empty());

    // Text for people: grouped by area, each fix under its finding.
    let text = String::from_utf8(env.corral(&["doctor"]).stdout).unwrap();
    assert!(text.contains("settings\n") && text.contains("  FAIL  config.toml"), "{text}");
    assert!(text.contains("→ fix"), "{text}");
    assert!(text.contains("1 failing"), "{text}");
}

#[test]
fn agent_clis_are_found_with_their_versions_and_their_sign_in() {
    let env = Env::new();
    env.config("");
    let fake = |name: &str, says: &str| {
        let path = env.bin.join(name);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    fake("codex", "codex-cli 0.169.0");
    fake("claude", "3.0.1 (Claude Code)");
    std::fs::remove_file(env.bin.join("gemini")).unwrap();
    std::fs::create_dir_all(env.user_home.join(".codex")).unwrap();
    std::fs::write(env.user_home.join(".codex/auth.json"), "{}").unwrap();
    let mut command = env.command(&["doctor", "--json"]);
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "CODEX_HOME",
    ] {
        command.env_remove(var);
    }
    let report: Value = serde_json::from_slice(&command.output().unwrap().stdout).unwrap();
    let agents = findings(&report, "agents");
    let find =
        |check: &str| agents.iter().find(|f| f["check"] == check).unwrap_or_else(|| panic!("{check}: {agents:#?}"));
    assert_eq!(find("codex")["level"], "ok");
    assert!(find("codex")["detail"].as_str().unwrap().starts_with("0.169.0 at "), "{agents:#?}");
    assert_eq!(find("codex sign-in")["level"], "ok");
    assert!(find("codex sign-in")["detail"].as_str().unwrap().contains(".codex/auth.json"));
    assert_eq!(find("claude")["level"], "note");
    assert!(find("claude")["detail"].as_str().unwrap().contains("tested with 2.1.197"), "{agents:#?}");
    assert_eq!(find("claude sign-in")["level"], "warn");
    assert!(find("claude sign-in")["fix"].as_str().unwrap().contains("claude setup-token"));
    let gemini = find("gemini");
    if gemini["level"] == "note" && gemini["detail"] == "not installed (its presets cannot start)" {
        assert!(gemini["fix"].as_str().unwrap().contains("npm install -g @google/gemini-cli"));
    }
}

#[test]
fn a_misspelt_preset_key_is_a_warning_with_its_file() {
    let env = Env::new();
    env.config("");
    env.command_preset_with("typo", &["true"], "idle_timout: 5m\n");
    let (code, report) = doctor(&env);
    assert_eq!(code, Some(0), "a warning is not a failure: {report:#}");
    let typo = findings(&report, "settings").into_iter().find(|f| f["check"] == "preset typo").unwrap();
    assert_eq!(typo["level"], "warn");
    assert!(typo["detail"].as_str().unwrap().contains("did you mean `idle_timeout:`?"), "{typo}");
    assert!(typo["fix"].as_str().unwrap().contains("typo.md"), "{typo}");
}
