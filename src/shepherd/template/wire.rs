//! What a launcher and a spare say to each other over the template's
//! socket, and the one check both make of the program they run: a leaf
//! the template, its spares and the launcher's side (`ask`) all read.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::run::Run;

/// What a spare says first, as it takes a launch: its launcher then waits
/// for the answer, not for a spare (a stopped template or spare sends the
/// launch cold within [`super::ask::TAKEN_WITHIN`]).
pub const TAKEN: &[u8] = b"+";

/// What a launcher asks a spare: a launch as `corral launch` has it, with
/// the launcher's folder and environment (the agent's).
#[derive(Debug, Serialize, Deserialize)]
pub struct WarmLaunch {
    pub preset: String,
    pub task: String,
    /// Absolute: the spare works in `/`.
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub worktree: Option<bool>,
    pub base: Option<String>,
    pub budget: Option<crate::cost::budget::Budget>,
    /// The launch's key: asked again cold under it, the run is not made
    /// twice.
    pub request: String,
    /// The launcher's environment, which the run starts with.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The launcher's program: a template of another `corral` (another
    /// version installed elsewhere) leaves the launch to it.
    pub program: PathBuf,
}

/// A spare's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum WarmAnswer {
    /// The run, as recorded (`starting` or `queued`), and the warnings a
    /// cold launch would have printed.
    Launched { run: Box<Run>, said: String },
    /// Refused, with why (as a cold launch says it) and the warnings.
    Refused { error: String, said: String },
    /// Not this spare's to do (a caller inside a run, another user): launch
    /// cold, where the launch is judged as it always is.
    NotHere { why: String },
}

/// True if this process's program file was replaced or removed since it
/// started.
pub fn exe_replaced() -> bool {
    std::fs::read_link("/proc/self/exe").is_ok_and(|exe| exe.to_string_lossy().ends_with(" (deleted)"))
}
