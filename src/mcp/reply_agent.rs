//! `reply_agent`: one more thing told to a run's agent, in a new turn of its session.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{json_result, CorralTools, RunView};
use crate::run::scope::{run_for, Access};

#[tool_router(router = reply_agent_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Tell a run's agent one more thing, in a new turn of its own session (same folder or worktree): a follow-up to a run that ended (it runs again), or to an active one (its agent gets it when its current turn ends). Then call wait_agents with its run_id for the new result.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn reply_agent(&self, Parameters(args): Parameters<ReplyArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let allow = args.allow_denied.unwrap_or(false);
            let mut verb = vec!["reply", "{id}"];
            if allow {
                verb.push("--allow-denied");
            }
            verb.extend(["--", args.text.as_str()]);
            if let Some(there) = super::server::on_host(store, &args.run_id, Access::Act, &verb)? {
                return Ok(json_result(&serde_json::json!({ "result": "told there", "run": RunView::from(&there) })));
            }
            let run = run_for(store, &args.run_id, Access::Act)?;
            let replied = crate::verbs::reply::reply(store, &run.id, &args.text, allow, shepherd)?;
            let note = match replied.placed {
                crate::store::ReplyPlaced::Kept => "kept: its agent gets it when its current turn ends",
                crate::store::ReplyPlaced::Reopened => "a new turn of its session starts",
            };
            Ok(json_result(&serde_json::json!({ "result": note, "run": RunView::from(&replied.run) })))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReplyArgs {
    /// The run to reply to.
    pub run_id: String,
    /// What to tell its agent next. May be empty with allow_denied.
    #[serde(default)]
    pub text: String,
    /// Allow exactly the tool calls the agent was refused, for the new turn
    /// (not what its sandbox refused: only a person widens a sandbox).
    #[serde(default)]
    pub allow_denied: Option<bool>,
}
