//! `corral mcp`: Corral's verbs as MCP tools on stdio (rmcp), so an agent
//! can launch, await and abort background agents itself.
//!
//! The server is a thin shell over the core: each call opens the store,
//! reconciles, does one verb and returns. Failures of a call come back as
//! tool errors with text a model can act on; the server itself stays up.
//! Runs launched through it get the calling agent's run (`CORRAL_RUN_ID`
//! in the server's environment) as their parent, and an agent sees and acts
//! on its own runs only (see `scope`).

mod scope;
mod tools;

use rmcp::ServiceExt;

pub use tools::CorralTools;

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
