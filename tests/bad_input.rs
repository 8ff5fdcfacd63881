//! Bad input gets a clear error before anything is recorded, and loses
//! nothing: tasks too long or with a NUL byte, folders whose names are not
//! UTF-8 or that were deleted, JSON into a closed pipe, durations no clock
//! can hold. Each test is named after what a hostile reading found.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use common::{corral_bin, Env};
use corral::verbs::launch::{launch, LaunchError, LaunchRequest};

fn request(env: &Env, task: String) -> LaunchRequest {
    LaunchRequest {
        preset: "count".into(),
        task,
        cwd: env.project.clone(),
        model: None,
        parent: None,
        env: Some(std::env::vars_os().collect()),
        worktree: None,
        base: None,
        budget: None,
        fire: None,
        request: None,
        scope_own: false,
    }
}

/// Runs `script` with `sh -c` in the project, with this installation.
fn in_shell(env: &Env, script: &str) -> std::process::Output {
    Command::new("sh").arg("-c").arg(script).current_dir(&env.project).env("CORRAL_HOME", &env.home).output().unwrap()
}

/// The shepherd the tests' launches start: the corral binary under test.
fn shepherd() -> corral::upkeep::queue::ShepherdCommand {
    corral::upkeep::queue::ShepherdCommand::program(corral_bin())
}

#[test]
fn a_200_kb_task_reaches_a_command_whole_and_a_task_too_long_or_with_nul_is_refused_before_anything_is_recorded() {
    let env = Env::new();
    env.config("");
    env.command_preset(
        "count",
        &["sh", "-c", "wc -c < \"$CORRAL_TASK_FILE\"; echo \"${CORRAL_TASK:-no variable}\" | head -c 11"],
    );
    let mut store = env.store();
    let shepherd = shepherd();
    let task = "x".repeat(200 << 10);
    let run = launch(&mut store, &request(&env, task), &shepherd).unwrap();
    let run = env.wait_end(&run.id);
    assert_eq!(run["status"], "completed", "{run:#}");
    assert_eq!(
        run["final_text"], "204800\nno variable",
        "the task file holds the task whole; the variable is left out"
    );

    let before = store.runs(&Default::default()).unwrap().len();
    let too_long = launch(&mut store, &request(&env, "y".repeat(2 << 20)), &shepherd).unwrap_err();
    assert!(matches!(too_long, LaunchError::TaskTooLong { .. }), "{too_long}");
    assert!(too_long.to_string().contains("put the details in a file"), "{too_long}");
    let nul = launch(&mut store, &request(&env, "a\0b".into()), &shepherd).unwrap_err();
    assert!(nul.to_string().contains("NUL byte (at byte 1)"), "{nul}");
    assert_eq!(store.runs(&Default::default()).unwrap().len(), before, "a refused launch recorded a run");
    // A reply reaches the agent the same way: the same bounds.
    let nul =
        corral::verbs::reply::reply(&mut store, run["id"].as_str().unwrap(), "a\0b", false, &shepherd).unwrap_err();
    assert!(nul.to_string().contains("the reply holds a NUL byte"), "{nul}");
    assert!(store.replies(run["id"].as_str().unwrap()).unwrap().is_empty(), "a refused reply was recorded");
}

#[test]
fn a_folder_whose_name_is_not_utf8_is_refused_with_its_name() {
    let env = Env::new();
    env.config("");
    env.command_preset("count", &["true"]);
    let odd = env.project.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir_all(&odd).unwrap();
    let out = env.command(&["launch", "count", "x", "--cwd"]).arg(&odd).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not UTF-8") && err.contains("caf\\xE9"), "{err}");
    assert!(env.json(&["ls", "--all"]).as_array().unwrap().is_empty(), "a run was recorded");
}

#[test]
fn launching_from_a_deleted_folder_says_so() {
    let env = Env::new();
    env.config("");
    let script = format!("mkdir gone && cd gone && rmdir ../gone && exec '{}' launch count x", corral_bin().display());
    let out = in_shell(&env, &script);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no longer exists") && err.contains("--cwd"), "{err}");
}

#[test]
fn json_into_a_closed_pipe_is_quiet() {
    let env = Env::new();
    env.config("");
    env.command_preset("count", &["true"]);
    // More JSON than a pipe holds, so the write fails once `head` is gone.
    let long = "z".repeat(4000);
    let mut store = env.store();
    let shepherd = shepherd();
    for _ in 0..40 {
        launch(&mut store, &request(&env, long.clone()), &shepherd).unwrap();
    }
    let script = format!("'{}' ls --all --json 2>err | head -c 10 >/dev/null; cat err", corral_bin().display());
    let out = in_shell(&env, &script);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "corral complained about the closed pipe");
}

#[test]
fn a_wait_too_long_for_the_clock_gets_a_clear_error() {
    let env = Env::new();
    env.config("");
    env.command_preset("count", &["true"]);
    let id = env.launch("count", "x");
    let out = env.corral(&["wait", &id, "--timeout", "1e20"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("longer than the longest Corral accepts") && !err.contains("panicked"), "{err}");
    // It says the time asked for, not the clock's own end.
    let out = env.corral(&["wait", &id, "--timeout", "1e12"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(": 1000000000000 s is longer"), "{err}");
}
