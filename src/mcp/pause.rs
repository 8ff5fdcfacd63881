//! `pause_agent` and `resume_agent`: a run frozen whole, holding no slot, and let go on.

use super::server::{json_result, CorralTools, RunArgs, RunView};
use crate::run::scope::{run_for, Access};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

#[tool_router(router = pause_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Pause a running run: every process it started is frozen, its time limits stop, and it holds no slot, until resume_agent. Use it to hold work you may want later without losing it.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn pause_agent(&self, Parameters(args): Parameters<RunArgs>) -> CallToolResult {
        self.pause_or_resume(args.run_id, true).await
    }

    #[tool(
        description = "Resume a paused run: it takes a slot back before any queued run and goes on where it stopped. A run paused because it reached its budget (pause_reason: budget) goes on only with budget: \"+2\" (two dollars more), \"+500k tokens\", or a whole new budget; every run paused for that budget goes on with it.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn resume_agent(&self, Parameters(args): Parameters<ResumeArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let change = args.budget.as_deref().map(crate::cost::budget::BudgetChange::parse).transpose()?;
            let mut verb = vec!["resume", "{id}"];
            if let Some(budget) = args.budget.as_deref() {
                verb.extend(["--budget", budget]);
            }
            if let Some(there) = super::server::on_host(store, &args.run_id, Access::Act, &verb)? {
                return Ok(json_result(&RunView::from(&there)));
            }
            let run = run_for(store, &args.run_id, Access::Act)?;
            let run = crate::verbs::pause::resume(store, &run.id, change, crate::verbs::pause::PATIENCE, shepherd)?;
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }
}

/// The arguments of `resume_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ResumeArgs {
    /// The run's id (or a unique prefix).
    pub run_id: String,
    /// For a run paused at its budget: how much more to allow ("+2" dollars, "+500k tokens"), or a whole new budget ("usd=5").
    #[serde(default)]
    pub budget: Option<String>,
}

impl CorralTools {
    /// Pauses (`paused`) or resumes the run the caller may act on.
    async fn pause_or_resume(&self, run_id: String, paused: bool) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let verb = [if paused { "pause" } else { "resume" }, "{id}"];
            if let Some(there) = super::server::on_host(store, &run_id, Access::Act, &verb)? {
                return Ok(json_result(&RunView::from(&there)));
            }
            let run = run_for(store, &run_id, Access::Act)?;
            let run = crate::verbs::pause::pause(store, &run.id, paused, crate::verbs::pause::PATIENCE, shepherd)?;
            Ok(json_result(&RunView::from(&run)))
        })
        .await
    }
}
