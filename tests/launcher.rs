//! The launcher, driven in-process as the app and the MCP server drive it:
//! launching leaves no zombie child behind in a long-lived launcher.

mod common;

use common::{corral_bin, fake_agent, Env};
use corral::launch::{launch, LaunchRequest};
use corral::queue::ShepherdCommand;

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
    let shepherd = ShepherdCommand { program: corral_bin(), args: vec!["shepherd".into()] };
    let request = LaunchRequest {
        preset: "ok".into(),
        task: "zombie check".into(),
        cwd: env.project.clone(),
        model: None,
        parent: None,
        env: None,
        worktree: None,
        base: None,
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
