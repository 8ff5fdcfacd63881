//! `wait_agents`: blocks until the given runs end (here, and each host's there) or the timeout passes; a call the client cancels stops waiting at once.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::server::{garbled, json_result, tool_error, CorralTools, RunView, ToolFailure};
use crate::run::caller::caller_run;
use crate::run::scope::{remote_run_for, run_for, Access};
use crate::store::Store;
use crate::verbs::wait::{collected_by, wait_for, Cancel};
use crate::Run;

#[tool_router(router = wait_agents_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "Block until every given run has ended (a run that launched runs of its own ends only after them), or until timeout_s passes (default 50 s, under the 60 s most clients allow a tool call), and return each run's outcome, final text and error. If timed_out is true, the runs marked active still work: call wait_agents again with them. This is how to collect background results: call it with all the run_ids instead of polling agent_status.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn wait_agents(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(args): Parameters<WaitArgs>,
    ) -> CallToolResult {
        if args.run_ids.is_empty() {
            return tool_error("run_ids is empty: pass the ids returned by launch_agent");
        }
        let secs = args.timeout_s.unwrap_or(DEFAULT_WAIT_S);
        if !(secs.is_finite() && secs >= 0.0) {
            return tool_error(format!("timeout_s {secs} is not a number of seconds ≥ 0"));
        }
        let deadline = Instant::now() + Duration::from_secs_f64(secs.min(MAX_WAIT_S));
        // A cancelled call drops this future, not the blocking wait: the
        // guard tells the wait to stop, so its run does not stay registered
        // as blocked (holding no slot) while its agent works again.
        let cancel = match CancelOnDrop::new() {
            Ok(cancel) => cancel,
            Err(e) => return tool_error(format!("cannot wait: {e}")),
        };
        let cancelled = cancel.cancel();
        // A client's `notifications/cancelled` cancels the request's token,
        // not this future: the wait must hear of it from the token too.
        let on_cancel = cancel.cancel();
        let token = context.ct.clone();
        let listener = tokio::spawn(async move {
            token.cancelled().await;
            on_cancel.cancel();
        });
        let _stop_listening = AbortOnDrop(listener);
        self.with_store(move |store, shepherd| {
            // This machine's runs, and each host's (waited for there).
            let mut local = Vec::new();
            let mut hosts: Vec<Vec<Run>> = Vec::new();
            for id in &args.run_ids {
                match remote_run_for(store, id, Access::Read)? {
                    Some(run) if store.find_run(id).is_err() => {
                        match hosts.iter_mut().find(|group| group[0].host == run.host) {
                            Some(group) => group.push(run),
                            None => hosts.push(vec![run]),
                        }
                    }
                    // What a wait returns (task, final text, error) is read access.
                    _ => local.push(run_for(store, id, Access::Read)?.id),
                }
            }
            let mut ended = Vec::new();
            let mut timed_out = false;
            if !local.is_empty() {
                let caller = caller_run(store)?;
                let result = wait_for(
                    store,
                    &local,
                    Some(deadline),
                    caller.as_deref(),
                    shepherd,
                    Some(&cancelled),
                    crate::run::blocking::Waiter::ToolCall,
                    None,
                )?;
                collected_by(store, caller.as_deref(), &result.runs)?;
                timed_out |= result.timed_out;
                ended.extend(result.runs);
            }
            for group in &hosts {
                let (runs, late) = wait_on_host(store, group, deadline)?;
                timed_out |= late;
                ended.extend(runs);
            }
            // In the order asked.
            let rank = |run: &Run| args.run_ids.iter().position(|id| run.id.starts_with(id.as_str()));
            ended.sort_by_key(|run| rank(run));
            let views: Vec<RunView<'_>> = ended.iter().map(RunView::from).collect();
            Ok(json_result(&serde_json::json!({
                "timed_out": timed_out,
                "all_completed": !timed_out && ended.iter().all(|r| r.status == crate::RunStatus::Completed),
                "runs": views,
            })))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitArgs {
    /// The runs to wait for (ids returned by launch_agent).
    pub run_ids: Vec<String>,
    /// Longest time to block, in seconds (default 50, at most 3600). On timeout the runs still active are reported as such: call again.
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// Default and longest blocking time of `wait_agents`, in seconds: by
/// default it returns before the 60 s most MCP clients give a tool call,
/// saying what still runs, so the model calls it again rather than being
/// cut off.
const DEFAULT_WAIT_S: f64 = 50.0;
const MAX_WAIT_S: f64 = 3600.0;

/// Cancels its wait when dropped: how a blocking task learns, at once,
/// that the call it serves was cancelled.
struct CancelOnDrop(Arc<Cancel>);

impl CancelOnDrop {
    fn new() -> std::io::Result<CancelOnDrop> {
        Ok(CancelOnDrop(Arc::new(Cancel::new()?)))
    }

    fn cancel(&self) -> Arc<Cancel> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Ends a task when dropped (the listener for a call's cancellation).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `wait_agents` on runs of one other host: waited for there, until the
/// deadline; the runs as they ended (or stand), and whether it timed out.
fn wait_on_host(store: &Store, runs: &[Run], deadline: Instant) -> Result<(Vec<Run>, bool), ToolFailure> {
    let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64();
    let mut args: Vec<std::ffi::OsString> = vec!["wait".into()];
    args.extend(runs.iter().map(|r| r.id.clone().into()));
    args.extend(["--timeout".into(), format!("{left:.3}").into(), "--json".into()]);
    let home = store.home().clone();
    let (code, printed) = crate::remote::act_with_code(&home, &runs[0], &args)?;
    let mut ended: Vec<Run> = serde_json::from_slice(&printed).map_err(|e| garbled(&runs[0], "corral wait", e))?;
    for run in &mut ended {
        run.host = runs[0].host.clone();
    }
    Ok((ended, code == 124))
}
