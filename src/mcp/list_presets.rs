//! `list_presets`: the presets a model may launch, each said available or why not.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

use super::server::{json_result, CorralTools};
use crate::preset::{self, Roots};

#[tool_router(router = list_presets_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "List the presets you can launch as background agents: name, agent, model and what each is for, and whether its agent is installed here (available: false says why; launching it fails). Call this before launch_agent to pick a preset.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_presets(&self, Parameters(args): Parameters<ListPresetsArgs>) -> CallToolResult {
        self.with_store(move |store, _| {
            let cwd = match args.cwd {
                Some(dir) => PathBuf::from(dir),
                None => crate::verbs::launch::working_folder()?,
            };
            let set = preset::discover(&Roots::new(store.home(), Some(&cwd)));
            let path = std::env::var_os("PATH");
            let default = crate::home::config::Config::load(store.home()).ok().and_then(|c| c.sandbox);
            let presets: Vec<serde_json::Value> = set
                .presets
                .iter()
                .map(|e| {
                    let mut entry = serde_json::json!({
                        "name": e.preset.name,
                        "description": e.preset.description,
                        "agent": e.preset.agent,
                        "model": e.preset.model,
                        "available": true,
                    });
                    // A preset that can never start is said so, never offered as if it could.
                    if let Some(why) = preset::available::unavailable(&e.preset, path.as_deref(), &cwd) {
                        entry["available"] = false.into();
                        entry["unavailable"] = why.into();
                    } else if let Err(why) = crate::trust::check(store, &e.preset, default.as_ref()) {
                        entry["available"] = false.into();
                        entry["unavailable"] = why.to_string().into();
                    }
                    entry
                })
                .collect();
            Ok(json_result(&presets))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListPresetsArgs {
    /// Folder whose project presets to include (default: the server's working folder).
    #[serde(default)]
    pub cwd: Option<String>,
}
