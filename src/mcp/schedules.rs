//! `list_schedules`, `add_schedule`, `run_schedule_now`, `pause_schedule`
//! and `resume_schedule`: the user's schedules (see `crate::schedule`), as
//! `corral schedule` has them. Schedules are the user's, not a run's: a
//! schedule's runs have no parent, and any agent can see them.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::server::{json_result, CorralTools};
use crate::schedule::{self, Keep, Overlap, Precheck, Settings, When};

#[tool_router(router = schedules_router, vis = "pub(super)")]
impl CorralTools {
    #[tool(
        description = "List the schedules (presets launched by a clock): when each fires, its next fire, whether it is paused and why, and its latest fires with their outcomes and runs.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_schedules(&self) -> CallToolResult {
        self.with_store(|store, shepherd| {
            schedule::refuse_inside_a_sandbox(store)?;
            // Presets' schedules as their files say now (problems are the
            // firer's to say), their timers with them.
            schedule::presets::sync(store)?;
            schedule::timers::follow(store, &shepherd.program)?;
            schedule::settle_orphans(store)?;
            let mut values = Vec::new();
            for schedule in schedule::all(store)? {
                values.push(schedule::shown(store, &schedule, "last_fires", 5)?);
            }
            Ok(json_result(&values))
        })
        .await
    }

    #[tool(
        description = "Add a schedule: the preset launched with the task at each due time (a cron expression or a calendar phrase such as \"weekdays 09:00\" in the machine's time zone, or a period such as 2h), each slot once. Optional: a precheck command (non-zero exit: nothing to do; with each: one run per new line it prints, {item} in the task), overlap (skip, queue, allow), bounds on runs per fire and per hour.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn add_schedule(&self, Parameters(args): Parameters<AddScheduleArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let when =
                When::choose(args.cron.as_deref(), args.every.as_deref(), args.at.as_deref(), ["cron", "every", "at"])
                    .map_err(schedule::ScheduleError::from)?;
            let cwd = match args.cwd {
                Some(dir) => std::path::PathBuf::from(dir),
                None => crate::verbs::launch::working_folder()?,
            };
            schedule::check_folder(&cwd)?;
            let roots = crate::preset::Roots::new(store.home(), Some(&cwd));
            crate::preset::discover(&roots).get(&args.preset).map_err(crate::verbs::launch::LaunchError::from)?;
            let settings = Settings {
                preset: args.preset,
                task: args.task,
                cwd: cwd.to_string_lossy().into_owned(),
                host: None,
                when,
                overlap: args.overlap.unwrap_or_default(),
                precheck: args.precheck.map(|command| Precheck {
                    command,
                    each: args.each.unwrap_or(false),
                    timeout_secs: args.precheck_timeout_secs.unwrap_or(60),
                }),
                max_runs_per_fire: args.max_runs_per_fire,
                max_runs_per_hour: args.max_runs_per_hour,
                budget_per_day: args.budget_per_day.as_deref().map(crate::cost::budget::Budget::parse).transpose()?,
                pause_after_failures: args.pause_after_failures,
                keep: Keep::default(),
            };
            let added = schedule::add(store, &args.name, &settings, std::env::vars_os())?;
            // Its timer, where timers fire the schedules.
            schedule::timers::follow(store, &shepherd.program)?;
            Ok(json_result(&added))
        })
        .await
    }

    #[tool(
        description = "Fire a schedule now, as a slot of its own, paused or not; returns the fire with its outcome and runs.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn run_schedule_now(&self, Parameters(args): Parameters<ScheduleArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let fire = schedule::run_now(store, &args.name, shepherd)?;
            schedule::timers::follow(store, &shepherd.program)?;
            Ok(json_result(&fire))
        })
        .await
    }

    #[tool(
        description = "Pause a schedule: its fires launch nothing (each is kept as skipped) until resume_schedule.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn pause_schedule(&self, Parameters(args): Parameters<ScheduleArgs>) -> CallToolResult {
        self.with_store(move |store, _| Ok(json_result(&schedule::pause(store, &args.name)?))).await
    }

    #[tool(
        description = "Resume a paused schedule: its fires launch runs again (each slot once, as ever; a slot missed while nothing fired is caught up once).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn resume_schedule(&self, Parameters(args): Parameters<ScheduleArgs>) -> CallToolResult {
        self.with_store(move |store, shepherd| {
            let resumed = schedule::resume(store, &args.name)?;
            schedule::timers::follow(store, &shepherd.program)?;
            Ok(json_result(&resumed))
        })
        .await
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScheduleArgs {
    /// The schedule's name.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddScheduleArgs {
    /// The schedule's name (letters, digits, '.', '_', '-').
    pub name: String,
    /// The preset to launch.
    pub preset: String,
    /// The task; {item} is a precheck line with each.
    pub task: String,
    /// A cron expression in the machine's time zone, e.g. "0 9 * * 1-5".
    #[serde(default)]
    pub cron: Option<String>,
    /// A period from now on, e.g. "2h".
    #[serde(default)]
    pub every: Option<String>,
    /// A calendar phrase in the machine's time zone, e.g. "weekdays 09:00",
    /// "mon,wed,fri 18:30", "daily 7am", "monthly 09:00".
    #[serde(default)]
    pub at: Option<String>,
    /// Working folder of its runs (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// skip (default), queue or allow, when the last fire's runs still run.
    #[serde(default)]
    pub overlap: Option<Overlap>,
    /// A command and its arguments run before each fire.
    #[serde(default)]
    pub precheck: Option<Vec<String>>,
    /// One run per line the precheck prints, each line once.
    #[serde(default)]
    pub each: Option<bool>,
    /// How long the precheck may take, in seconds (default 60).
    #[serde(default)]
    pub precheck_timeout_secs: Option<u64>,
    #[serde(default)]
    pub max_runs_per_fire: Option<u32>,
    #[serde(default)]
    pub max_runs_per_hour: Option<u32>,
    #[serde(default)]
    pub pause_after_failures: Option<u32>,
    /// What its fires' runs may spend in a day: "$5", "usd=5,tokens=5M".
    #[serde(default)]
    pub budget_per_day: Option<String>,
}
