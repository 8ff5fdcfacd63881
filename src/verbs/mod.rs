//! The verbs every front door shares: the CLI, the MCP server, the tray
//! and the window each parse their own input, then call these, so a run
//! launched, aborted, paused, answered, waited for, reviewed or removed
//! obeys one rule whichever door it came through.

pub mod abort;
pub mod allow;
pub mod launch;
pub mod pause;
pub mod remove;
pub mod reply;
pub mod review;
pub mod wait;
