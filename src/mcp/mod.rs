//! `corral mcp`: Corral's verbs as MCP tools on stdio (rmcp), so an agent
//! can launch, await and abort background agents itself.
//!
//! The server is a thin shell over the core: each call opens the store,
//! reconciles, does one verb and returns. Failures of a call come back as
//! tool errors with text a model can act on; the server itself stays up.
//! Runs launched through it get the calling agent's run (`CORRAL_RUN_ID`
//! in the server's environment) as their parent, and an agent sees and acts
//! on its own runs only (see `scope`).
//!
//! One file per tool, as the CLI has one per verb; what they share (the
//! server, a run as a model sees it, errors as text for a model) is in
//! `server`; who may see and act on which run, in `scope`.

mod abort_agent;
mod agent_result;
mod agent_status;
mod discard_run;
mod launch_agent;
mod list_presets;
mod merge_run;
mod open_pull_request;
mod pause;
mod reply_agent;
mod run_changes;
mod run_conflicts;
mod schedules;
mod server;
mod wait_agents;

use rmcp::ServiceExt;

pub use server::CorralTools;

impl CorralTools {
    /// Every tool, over the installation at `home`.
    pub fn new(home: crate::Home) -> CorralTools {
        let router = CorralTools::list_presets_router()
            + CorralTools::launch_agent_router()
            + CorralTools::agent_status_router()
            + CorralTools::wait_agents_router()
            + CorralTools::agent_result_router()
            + CorralTools::pause_router()
            + CorralTools::abort_agent_router()
            + CorralTools::run_changes_router()
            + CorralTools::run_conflicts_router()
            + CorralTools::merge_run_router()
            + CorralTools::open_pull_request_router()
            + CorralTools::reply_agent_router()
            + CorralTools::discard_run_router()
            + CorralTools::schedules_router();
        CorralTools::serving(home, router)
    }
}

/// What can stop the MCP server itself.
#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    /// The async runtime could not start.
    #[error("cannot start the MCP server's runtime: {0}")]
    Runtime(std::io::Error),
    /// The MCP session failed to start or ended in error.
    #[error("MCP session failed: {0}")]
    Session(String),
}

/// Serves MCP on stdin/stdout until the client disconnects.
pub fn serve_stdio(home: crate::Home) -> Result<(), McpServerError> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(McpServerError::Runtime)?;
    runtime.block_on(async move {
        let service = CorralTools::new(home)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpServerError::Session(e.to_string()))?;
        service.waiting().await.map_err(|e| McpServerError::Session(e.to_string()))?;
        Ok(())
    })
}
