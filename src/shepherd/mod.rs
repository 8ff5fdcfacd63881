//! The shepherd: one small process per run (`corral shepherd <id>`) that
//! owns the agent from spawn to reaping, writes everything to the store, and
//! decides the run's outcome.
//!
//! It is the run's only writer once started. The outcome is committed the
//! moment it is known (the adapter's terminal event, or the agent's exit, or
//! a stop request); cleanup of lingering processes comes after and never
//! changes it. As child subreaper it inherits every orphaned descendant, so
//! it can kill and reap all of them before it exits: no process outlives
//! its run. A run whose agent launched runs of its own waits for them, and
//! hands their results back to the agent in a continuation turn.

mod children;
mod cleanup;
mod lines;
mod prepare;
mod replies;
mod spawn;
mod supervise;

use std::io;

use crate::adapter;
use crate::config::{Config, ConfigError};
use crate::home::{self, Home};
use crate::process::{self, ProcessId, SignalPipe};
use crate::queue::ShepherdCommand;
use crate::run::{RunStatus, StopReason};
use crate::store::{Store, StoreError};

pub use lines::LineSplitter;

/// What stops a shepherd from doing its job.
#[derive(Debug, thiserror::Error)]
pub enum ShepherdError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The settings file is broken.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An operating-system call failed.
    #[error("{doing}: {source}")]
    Os { doing: &'static str, source: io::Error },
}

pub(crate) trait OsDoing<T> {
    fn doing(self, doing: &'static str) -> Result<T, ShepherdError>;
}

impl<T> OsDoing<T> for io::Result<T> {
    fn doing(self, doing: &'static str) -> Result<T, ShepherdError> {
        self.map_err(|source| ShepherdError::Os { doing, source })
    }
}

/// What a shepherd logs unless `CORRAL_LOG` says otherwise.
pub const LOG_LEVEL: &str = "info";

/// The hidden `shepherd RUN` mode of the tray and the window (which start
/// shepherds of their own): logs at [`LOG_LEVEL`], supervises `run_id` in
/// this process's Corral home, and returns the exit code, having said on
/// stderr (the run's log) what went wrong. The CLI's is in its dispatch.
pub fn main(program: &str, run_id: &str) -> std::process::ExitCode {
    crate::logging::init(LOG_LEVEL);
    let failed = |e: &dyn std::fmt::Display| {
        eprintln!("{program} shepherd {run_id}: {e}");
        std::process::ExitCode::FAILURE
    };
    match crate::caller::home() {
        Ok(home) => match shepherd(&home, run_id) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => failed(&e),
        },
        Err(e) => failed(&e),
    }
}

/// Supervises run `run_id` to its end, then hands its slot on to the next
/// queued run. Returns once every process of the run is reaped and the
/// outcome and exit are recorded.
pub fn shepherd(home: &Home, run_id: &str) -> Result<(), ShepherdError> {
    let supervised = supervise_run(home, run_id);
    // Even a shepherd that failed has freed its slot.
    let handed_on = hand_on_slot(home);
    supervised.and(handed_on)
}

fn supervise_run(home: &Home, run_id: &str) -> Result<(), ShepherdError> {
    // Signals first, so neither an abort nor a child's exit can be missed.
    let mut sigchld = SignalPipe::new(&[libc::SIGCHLD]).doing("routing SIGCHLD")?;
    let mut stop = SignalPipe::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP]).doing("routing stop signals")?;

    let mut store = Store::open(home)?;
    store.limit_cache(512)?;
    let run = store.run(run_id)?;
    if run.status != RunStatus::Starting {
        tracing::info!(run = run_id, status = %run.status, "nothing to do: the run is not starting");
        return Ok(());
    }
    let me = ProcessId::of(std::process::id() as i32)
        .ok_or_else(|| io::Error::other("no /proc entry for this process"))
        .doing("reading the shepherd's identity")?;
    if !store.claim_shepherd(run_id, me.pid, me.start)? {
        tracing::info!(run = run_id, "nothing to do: another shepherd owns the run, or it ended");
        return Ok(());
    }
    process::set_child_subreaper(true).doing("becoming child subreaper")?;
    let config = Config::load(home)?;

    if store.run(run_id)?.abort_requested_at.is_some() {
        return end_unstarted(
            &mut store,
            run_id,
            RunStatus::Aborted,
            StopReason::UserAbort,
            "aborted before the agent started",
        );
    }
    let preset = store.run_preset(run_id)?;
    let run_dir = home.run_dir(run_id);
    home::ensure_private_dir(&run_dir).map_err(StoreError::from)?;
    // A run that started before was reopened by a reply: its first turn
    // here delivers the reply in the agent's session.
    let reopened = run.started_at.is_some();
    let mut launch = match spawn::AgentLaunch::new(home, &run, preset, run_dir) {
        Ok(launch) => launch,
        Err(e) => {
            let error = format!("cannot prepare the run's folder {}: {e}", home.run_dir(run_id).display());
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };
    match prepare::prepare(&mut store, &run, &launch, !reopened, (&mut sigchld, &mut stop)) {
        Ok(()) => {}
        Err(prepare::NotPrepared::Store(e)) => return Err(e.into()),
        Err(prepare::NotPrepared::Failed(error)) => {
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SetupFailed, &error)
        }
        Err(prepare::NotPrepared::Stopped) if store.run(run_id)?.abort_requested_at.is_some() => {
            let why = "aborted during setup";
            return end_unstarted(&mut store, run_id, RunStatus::Aborted, StopReason::UserAbort, why);
        }
        Err(prepare::NotPrepared::Stopped) => {
            let why = "the shepherd was told to stop (SIGTERM, SIGINT or SIGHUP) during setup";
            return end_unstarted(&mut store, run_id, RunStatus::Aborted, StopReason::Signal, why);
        }
    }
    if store.run(run_id)?.abort_requested_at.is_some() {
        let why = "aborted before the agent started";
        return end_unstarted(&mut store, run_id, RunStatus::Aborted, StopReason::UserAbort, why);
    }
    let adapter = adapter::for_agent(launch.preset.agent);
    let mut earlier = None;
    let invocation = if reopened {
        let Some(turn) = replies::deliver(&mut store, run_id)? else {
            let why = "the run was reopened, but no reply waits for it";
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, why);
        };
        launch.allowed = turn.allowed.unwrap_or_default();
        let session = run.session_id.as_deref().unwrap_or_default();
        let Some(invocation) = adapter.resume_invocation(&launch.context(&turn.prompt), session) else {
            let why = format!("{} cannot resume this run's session, so it cannot take a reply", launch.preset.agent);
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &why);
        };
        store.append_events(run_id, store.last_event_seq(run_id)? + 1, &turn.notes)?;
        earlier = Some(replies::earlier_report(&run, adapter.usage_is_cumulative()));
        invocation
    } else {
        match adapter.invocation(&launch.context(&run.task)) {
            Ok(invocation) => invocation,
            Err(e) => {
                return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &e.to_string())
            }
        }
    };
    if let Some(problem) = launch.cwd_problem() {
        return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &problem);
    }
    let logs = spawn::RunLogs::open(&launch.run_dir).doing("opening the run's logs")?;
    let child = match launch.spawn(&invocation) {
        Ok(child) => child,
        Err(e) => {
            let error = spawn::spawn_error(&invocation.program, &launch.preset.path, &e);
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };

    let mut supervisor = supervise::Supervisor::new(supervise::Setup {
        store,
        run_id: run_id.to_string(),
        me,
        child,
        adapter,
        launch,
        config,
        logs,
        sigchld,
        stop,
        shepherd: ShepherdCommand::current_exe().doing("finding the corral executable")?,
        earlier,
    })?;
    supervisor.run()
}

/// Ends a run whose agent never started.
fn end_unstarted(
    store: &mut Store,
    run_id: &str,
    status: RunStatus,
    stop_reason: StopReason,
    error: &str,
) -> Result<(), ShepherdError> {
    store.end_unstarted(run_id, status, stop_reason, error.to_string())?;
    Ok(())
}

/// Starts the next queued runs now that this run's slot is free. The
/// subreaper flag goes first: the new shepherds must not become ours.
fn hand_on_slot(home: &Home) -> Result<(), ShepherdError> {
    process::set_child_subreaper(false).doing("leaving child subreaper")?;
    let config = Config::load(home)?;
    let shepherd = ShepherdCommand::current_exe().doing("finding the corral executable")?;
    crate::queue::start_queued(&mut Store::open(home)?, &config, &shepherd)?;
    Ok(())
}
