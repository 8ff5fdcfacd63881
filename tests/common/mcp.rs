//! An MCP client (rmcp) of `corral mcp` over stdio, as an agent runs it.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::Value;

use super::{corral_bin, Env};

/// Starts `corral mcp` in `env`, as the agent of run `caller` if given.
pub async fn connect(env: &Env, caller: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(corral_bin());
    cmd.arg("mcp")
        .current_dir(&env.project)
        .env("CORRAL_HOME", &env.home)
        .env("HOME", &env.user_home)
        .env("PATH", format!("{}:{}", env.bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env_remove("CORRAL_RUN_ID");
    if let Some(id) = caller {
        cmd.env("CORRAL_RUN_ID", id);
    }
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.expect("MCP session")
}

/// Calls `tool`; returns whether it was an error, and its JSON (or text).
pub async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, args: Value) -> (bool, Value) {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    let result: CallToolResult = client.call_tool(params).await.expect("the server answers");
    let text = result.content[0].as_text().expect("text content").text.clone();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (result.is_error == Some(true), value)
}
