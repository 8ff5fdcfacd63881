//! Declares the app's own commands so capabilities can grant exactly them.

const COMMANDS: &[&str] = &[
    "list_runs",
    "needs",
    "act_on_need",
    "get_run",
    "transcript",
    "transcript_size",
    "abort_run",
    "pause_run",
    "answer_budget",
    "relaunch_run",
    "clear_finished",
    "timeline",
    "list_presets",
    "list_hosts",
    "launch_run",
    "pick_folder",
    "recent_folders",
    "counts",
    "store_problem",
    "settings",
    "set_autostart",
    "run_changes",
    "merge_run",
    "open_pull_request",
    "pull_request",
    "review_runs",
    "merge_runs",
    "discard_run",
    "open_run_folder",
    "open_run_terminal",
    "reply_run",
    "run_replies",
    "worktrees_usage",
    "doctor",
    "list_schedules",
    "pause_schedule",
    "run_schedule_now",
];

fn main() {
    tauri_build::try_build(
        tauri_build::Attributes::new().app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .expect("tauri build");
}
