//! The webview's commands, typed, one file per subject. Each opens its own
//! store connection and runs off the main thread (`async`), so a slow call
//! never freezes the window.

pub mod launch;
pub mod needs;
pub mod presets;
pub mod review;
pub mod runs;
pub mod schedules;
pub mod settings;
pub mod store;
