//! Without the `corral` CLI installed beside it, the tray supervises the
//! runs it starts itself (`corral-tray shepherd RUN`): to a truthful end,
//! with the agent's answer recorded.

use std::time::{Duration, Instant};

use corral::process::ProcessId;
use corral::upkeep::queue::ShepherdCommand;
use corral::verbs::launch::{launch, LaunchRequest};
use corral::{Home, RunStatus, Store};

#[test]
fn the_trays_own_shepherd_supervises_a_run_to_its_end() {
    let root = tempfile::tempdir().unwrap();
    let home = Home::at(root.path().join("home"));
    home.ensure().unwrap();
    std::fs::create_dir_all(home.presets_dir()).unwrap();
    std::fs::write(
        home.presets_dir().join("echo.md"),
        "---\nname: echo\ndescription: echoes its task\nagent: command\ncommand: [\"echo\", \"{task}\"]\n---\n",
    )
    .unwrap();
    let mut store = Store::open(&home).unwrap();
    let shepherd = ShepherdCommand::program(env!("CARGO_BIN_EXE_corral-tray"));
    let request = LaunchRequest {
        preset: "echo".into(),
        task: "hello from the tray".into(),
        cwd: root.path().to_path_buf(),
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
    let run = launch(&mut store, &request, &shepherd).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ended = loop {
        let now = store.run(&run.id).unwrap();
        if now.status.is_terminal() && now.exited_at.is_some() {
            break now;
        }
        assert!(Instant::now() < deadline, "the run did not end: {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ended.status, RunStatus::Completed, "{ended:?}");
    assert_eq!(ended.final_text.as_deref(), Some("hello from the tray"));
    let shepherd = ProcessId { pid: ended.shepherd_pid.unwrap(), start: ended.shepherd_start.unwrap() };
    while shepherd.is_alive() {
        assert!(Instant::now() < deadline, "its shepherd outlived the run");
        std::thread::sleep(Duration::from_millis(20));
    }
}
