//! Corral's core: presets, the store, adapters, the shepherd that supervises
//! each run, and the verbs the CLI, the MCP server and the app share.
//!
//! Nothing here depends on Tauri; the desktop app is a thin shell over this
//! crate's public API. Each module is a wing of the house (ARCHITECTURE.md,
//! "The wings"): the verbs every front door calls, what needs the user,
//! what a run costs, the run itself, the shepherd, the store, and the rest.

pub mod adapter;
pub mod attention;
pub mod cost;
pub mod doctor;
pub mod forge;
pub mod home;
pub mod mcp;
pub mod preset;
pub mod process;
pub mod push;
pub mod remote;
pub mod run;
pub mod sandbox;
pub mod schedule;
pub mod shepherd;
pub mod store;
pub mod text;
pub mod trust;
pub mod upkeep;
pub mod verbs;
pub mod watch;
pub mod worktree;

pub use home::Home;
pub use preset::{Preset, PresetSet};
pub use run::{Run, RunStatus, StopReason, Usage};
pub use store::Store;
