//! `agent_status`: runs as they stand, without waiting: one run, or the caller's own (here and on hosts).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{garbled, json_result, CorralTools, RunView};
use crate::run::caller::caller_run;
use crate::run::scope::{remote_run_for, run_for, Access};
use crate::store::RunFilter;
use crate::Run;

#[tool_router(router = agent_status_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Check runs without waiting: status (queued, starting, running, waiting, completed, failed, aborted, lost), final text and error. With run_id: that run. Without: your own background runs (or the latest runs outside a run). To block until runs end, use wait_agents instead of calling this repeatedly.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn agent_status(&self, Parameters(args): Parameters<StatusArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let runs = match args.run_id {
                Some(id) => match remote_run_for(store, &id, Access::Read)? {
                    Some(run) if store.find_run(&id).is_err() => {
                        let home = store.home().clone();
                        let shown =
                            crate::remote::act(&home, &run, &["show".into(), run.id.clone().into(), "--json".into()])?;
                        let mut fresh: Run =
                            serde_json::from_slice(&shown).map_err(|e| garbled(&run, "corral show", e))?;
                        fresh.host = run.host;
                        vec![fresh]
                    }
                    _ => vec![run_for(store, &id, Access::Read)?],
                },
                None => {
                    let caller = caller_run(store)?;
                    let filter = RunFilter { parent_id: caller.clone(), limit: Some(50), ..RunFilter::default() };
                    let mut runs = store.runs(&filter)?;
                    // And those on other hosts: the ones it launched, or all.
                    runs.extend(match &caller {
                        Some(id) => store.remote_children(id)?,
                        None => store.remote_runs(None)?,
                    });
                    runs.sort_by(|a, b| b.created_at.cmp(&a.created_at));
                    runs.truncate(50);
                    runs
                }
            };
            let views: Vec<RunView<'_>> = runs.iter().map(RunView::from).collect();
            Ok(json_result(&views))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatusArgs {
    /// The run to check. Omit to list your own background runs (or, outside a run, the latest runs).
    #[serde(default)]
    pub run_id: Option<String>,
}
