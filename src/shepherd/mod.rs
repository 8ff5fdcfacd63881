//! The shepherd: one small process per run (`corral shepherd <id>`, or the
//! copy `corral launch` forked of itself: see `forked`, or a warm spare of
//! the launch `template`) that owns the agent from spawn to reaping,
//! writes everything to the store, and decides the run's outcome.
//!
//! It is the run's only writer once started. The outcome is committed the
//! moment it is known (the adapter's terminal event, or the agent's exit, or
//! a stop request); cleanup of lingering processes comes after and never
//! changes it. As child subreaper it inherits every orphaned descendant, so
//! it can kill and reap all of them before it exits: no process outlives
//! its run. A run whose agent launched runs of its own waits for them, and
//! hands their results back to the agent in a continuation turn.

mod budget;
mod child_runs;
mod children;
mod cleanup;
mod clock;
pub mod forked;
mod freeze;
mod launchers;
mod limit;
mod limited;
mod lines;
mod prepare;
mod recorder;
mod replies;
mod session;
pub mod spare;
mod spawn;
mod streams;
mod supervise;
pub mod teardown;
pub mod template;
mod transcript;
mod turn;

use std::io;

use crate::adapter;
use crate::cost::resources::{Containment, ResourceLimits};
use crate::home::config::{Config, ConfigError};
use crate::home::{self, Home};
use crate::process::cgroup::RunCgroup;
use crate::process::{self, ProcessId, Sig, SignalPipe};
use crate::run::{RunStatus, StopReason};
use crate::store::{Store, StoreError};
use crate::upkeep::queue::ShepherdCommand;
use cleanup::Cleanup;

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
    crate::home::logging::init(LOG_LEVEL);
    let failed = |e: &dyn std::fmt::Display| {
        eprintln!("{program} shepherd {run_id}: {e}");
        std::process::ExitCode::FAILURE
    };
    match crate::run::caller::home() {
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
    shepherd_with(home, run_id, None)
}

/// As [`shepherd`], with the store already open (a forked shepherd opens
/// it while its launcher works).
fn shepherd_with(home: &Home, run_id: &str, store: Option<Store>) -> Result<(), ShepherdError> {
    let supervised = supervise_run(home, run_id, store);
    // Even a shepherd that failed has freed its slot.
    let handed_on = hand_on_slot(home, run_id);
    supervised.and(handed_on)
}

fn supervise_run(home: &Home, run_id: &str, store: Option<Store>) -> Result<(), ShepherdError> {
    // Signals first, so neither an abort nor a child's exit can be missed.
    let mut sigchld = SignalPipe::new(&[libc::SIGCHLD]).doing("routing SIGCHLD")?;
    let mut stop = SignalPipe::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP]).doing("routing stop signals")?;
    let nudge = SignalPipe::new(&[libc::SIGUSR1]).doing("routing SIGUSR1")?;

    let mut store = match store {
        Some(store) => store,
        None => Store::open(home)?,
    };
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
    // Started by a process of another run of this store (a child run, or
    // one it started from the queue), this shepherd is in that run's
    // cgroup: it must not stop, or keep it alive, with it. A run of
    // another installation (`CORRAL_HOME=… corral launch` inside a run)
    // stays in the group it was started in, and is stopped with that run.
    let outer = process::cgroup::run_of(me.pid);
    let inside_stranger = match &outer {
        Some(outer) => match store.run(outer) {
            Ok(_) => false,
            Err(StoreError::UnknownRun(_)) => true,
            Err(e) => return Err(e.into()),
        },
        None => false,
    };
    if !inside_stranger {
        if let Err(e) = process::cgroup::leave_run_group() {
            tracing::warn!(run = run_id, "cannot leave the launching run's cgroup: {e}");
        }
    }
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
    let logs = spawn::RunLogs::open(&run_dir, config.transcripts.raw_log_bytes).doing("opening the run's logs")?;
    // Every process of the run, setup's too, starts inside its cgroup.
    let (limits, sources) = config.resource_limits_for(&preset);
    let (cgroup, mut containment) = if let (true, Some(outer)) = (inside_stranger, &outer) {
        let why = format!("started inside run {outer} of another Corral installation: held in that run's cgroup");
        (None, Containment::process_tree(&why))
    } else if config.cgroups {
        contain(run_id, &limits)
    } else {
        (None, Containment::process_tree("turned off by `cgroups = false` in config.toml"))
    };
    // `show` says where each limit came from.
    containment.notes.extend(sources);
    // The environment the run was launched with, read once.
    let kept_env = match crate::run::env::load(&run_dir) {
        Ok(env) => env,
        Err(e) => {
            let error = format!("cannot prepare the run's folder {}: {e}", run_dir.display());
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };
    let sandbox = match sandbox_of(&store, run_id, &config, &preset, kept_env.as_deref())? {
        Sandboxing::Made { sandbox, bwrap, home } => {
            containment.notes.push(format!("sandbox: {}", sandbox.describe()));
            containment.notes.extend(sandbox.missing_writes(&home));
            Some((sandbox, bwrap))
        }
        Sandboxing::NotAsked => None,
        Sandboxing::Without(e) => {
            containment.notes.push(format!("sandbox: none ({e}); running unsandboxed, as `sandbox: optional` allows"));
            None
        }
        Sandboxing::Refused(e) => {
            store.record_containment(run_id, &containment)?;
            let error = format!("preset {} runs sandboxed, and {e}", preset.name);
            return end_unstarted(&mut store, run_id, RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };
    store.record_containment(run_id, &containment)?;
    let first_signal = if adapter::for_agent(preset.agent).interrupts_first() { Sig::Int } else { Sig::Term };
    let mut cleanup = Cleanup::new(
        home,
        run_id,
        me.pid,
        cgroup,
        (config.exit_grace, config.stop_grace),
        first_signal,
        run_dir.join("signals.log"),
    );
    let mut early = Early { store: &mut store, cleanup: &mut cleanup, run_id };
    // A run that started before was reopened by a reply: its first turn
    // here delivers the reply in the agent's session.
    let reopened = run.started_at.is_some();
    let mut launch = match spawn::AgentLaunch::new(home, &run, preset, run_dir, kept_env) {
        Ok(launch) => launch,
        Err(e) => {
            let error = format!("cannot prepare the run's folder {}: {e}", home.run_dir(run_id).display());
            return early.end(RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };
    launch.limits = limits;
    launch.sandbox = sandbox;
    launch.join = early.cleanup.cgroup().map(|g| g.join()).unwrap_or_default();
    if let Err(e) = launch.start_broker() {
        let error = format!("cannot start the sandbox's broker in {}: {e}", home.run_dir(run_id).display());
        return early.end(RunStatus::Failed, StopReason::SpawnFailed, &error);
    }
    match launch.start_proxy() {
        Ok(Some(hosts)) => {
            let note = format!("sandbox: reaches only {}", hosts.join(", "));
            early.store.append_events(
                run_id,
                early.store.last_event_seq(run_id)? + 1,
                &[crate::adapter::TranscriptEvent::text(crate::adapter::EventKind::System, note)],
            )?;
        }
        Ok(None) => {}
        Err(e) => {
            let error = format!("cannot start the sandbox's proxy in {}: {e}", home.run_dir(run_id).display());
            return early.end(RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    }
    match prepare::prepare(early.store, &run, &launch, !reopened, (&mut sigchld, &mut stop)) {
        Ok(()) => {}
        Err(prepare::NotPrepared::Store(e)) => return Err(e.into()),
        Err(prepare::NotPrepared::Failed(error)) => {
            return early.end(RunStatus::Failed, StopReason::SetupFailed, &error)
        }
        Err(prepare::NotPrepared::Stopped) if early.store.run(run_id)?.abort_requested_at.is_some() => {
            return early.end(RunStatus::Aborted, StopReason::UserAbort, "aborted during setup");
        }
        Err(prepare::NotPrepared::Stopped) => {
            let why = "the shepherd was told to stop (SIGTERM, SIGINT or SIGHUP) during setup";
            return early.end(RunStatus::Aborted, StopReason::Signal, why);
        }
    }
    if early.store.run(run_id)?.abort_requested_at.is_some() {
        return early.end(RunStatus::Aborted, StopReason::UserAbort, "aborted before the agent started");
    }
    let adapter = adapter::for_agent(launch.preset.agent);
    let mut earlier = None;
    let invocation = if reopened {
        let Some(turn) = replies::deliver(early.store, run_id)? else {
            let why = "the run was reopened, but no reply waits for it";
            return early.end(RunStatus::Failed, StopReason::SpawnFailed, why);
        };
        launch.allowed = turn.allowed.unwrap_or_default();
        let session = run.session_id.as_deref().unwrap_or_default();
        let Some(invocation) = adapter.resume_invocation(&launch.context(&turn.prompt), session) else {
            let why = format!("{} cannot resume this run's session, so it cannot take a reply", launch.preset.agent);
            return early.end(RunStatus::Failed, StopReason::SpawnFailed, &why);
        };
        early.store.append_events(run_id, early.store.last_event_seq(run_id)? + 1, &turn.notes)?;
        earlier = Some(replies::earlier_report(&run, adapter.usage_is_cumulative()));
        invocation
    } else {
        match adapter.invocation(&launch.context(&run.task)) {
            Ok(invocation) => invocation,
            Err(e) => return early.end(RunStatus::Failed, StopReason::SpawnFailed, &e.to_string()),
        }
    };
    if let Some(problem) = launch.cwd_problem() {
        return early.end(RunStatus::Failed, StopReason::SpawnFailed, &problem);
    }
    let child = match launch.spawn(&invocation) {
        Ok(child) => child,
        Err(e) => {
            let error = spawn::spawn_error(&invocation.program, &launch.preset.path, &e);
            return early.end(RunStatus::Failed, StopReason::SpawnFailed, &error);
        }
    };

    let supervisor = supervise::Supervisor::new(supervise::Setup {
        store,
        run_id: run_id.to_string(),
        child,
        adapter,
        launch,
        config,
        logs,
        sigchld,
        stop,
        nudge,
        shepherd: ShepherdCommand::current_exe().doing("finding the corral executable")?,
        earlier,
        cleanup,
        used_before: run.resources.unwrap_or_default(),
    })?;
    live(supervisor)
}

/// The run's life once its agent runs: turn after turn (the first, a
/// continuation with child runs' results, a reply's) until the outcome is
/// committed and every process of the run is reaped.
fn live(mut sup: supervise::Supervisor) -> Result<(), ShepherdError> {
    sup.begin()?;
    loop {
        sup.supervise_turn()?;
        // A turn that ended at the agent's usage limit waits it out.
        if let Some(limited) = sup.limited.take() {
            let tries = sup.limit_tries;
            if limited.limit.resets_at.is_none() || limited::resets_now(&limited.limit) {
                sup.limit_tries += 1;
            }
            match limit::wait_out(&mut sup, limited, tries)? {
                Some(turn) => {
                    sup.start_turn(turn)?;
                    continue;
                }
                None => break,
            }
        }
        // Settling may hold the verdict again: a reply that came in as the
        // run was about to end.
        let next = loop {
            let Some(verdict) = sup.held.take() else { break None };
            if let children::Next::Turn(turn) = children::settle(&mut sup, verdict)? {
                break Some(turn);
            }
        };
        match next {
            Some(turn) => sup.start_turn(turn)?,
            None => break,
        }
    }
    sup.finish()
}

/// Whether a run is sandboxed, and how.
enum Sandboxing {
    /// Its preset and `[sandbox]` ask for none.
    NotAsked,
    /// Its sandbox (widened by what `corral allow` added), the bubblewrap
    /// that makes it, and the user's home the run has.
    Made { sandbox: crate::sandbox::Sandbox, bwrap: std::path::PathBuf, home: std::path::PathBuf },
    /// None can be made here, and its preset allows going without.
    Without(crate::sandbox::engine::NoEngine),
    /// None can be made here: it does not start.
    Refused(crate::sandbox::engine::NoEngine),
}

/// How run `run_id` is sandboxed, bubblewrap found on the PATH it was
/// launched with (`env`, kept with it).
fn sandbox_of(
    store: &Store,
    run_id: &str,
    config: &Config,
    preset: &crate::preset::Preset,
    env: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> Result<Sandboxing, StoreError> {
    // Only a sandboxed run's start reads what its sandbox was widened by.
    let Some(sandbox) = config.sandbox_for(preset) else { return Ok(Sandboxing::NotAsked) };
    let sandbox = sandbox.widened(&store.sandbox_allows(run_id)?);
    let (path, home) = (crate::run::env::var(env, "PATH"), spawn::user_home(env));
    // A sandbox that must be was tried by its launch (a failure at start
    // now is said by bubblewrap itself); an optional one is tried here, to
    // know whether to go without.
    let engine = match sandbox.optional {
        true => crate::sandbox::engine::bwrap(path.as_deref()),
        false => crate::sandbox::engine::locate(path.as_deref()),
    };
    Ok(match engine {
        Ok(bwrap) => Sandboxing::Made { sandbox, bwrap, home },
        Err(e) if sandbox.optional => Sandboxing::Without(e),
        Err(e) => Sandboxing::Refused(e),
    })
}

/// The run's cgroup with its limits, and how the run is held (recorded with
/// it); the process tree where no cgroup can be made.
fn contain(run_id: &str, limits: &ResourceLimits) -> (Option<RunCgroup>, Containment) {
    match RunCgroup::create(run_id, limits) {
        Ok((group, notes)) => {
            let containment = group.containment(notes);
            (Some(group), containment)
        }
        Err(why) => {
            tracing::info!(run = run_id, "no cgroup for the run: {why}");
            let mut containment = Containment::process_tree(&why);
            if !limits.is_empty() {
                containment.notes.push("limits not applied: they need the run's cgroup".to_string());
            }
            (None, containment)
        }
    }
}

/// A run that ends before its agent started: whatever its `setup` left
/// running is stopped with it.
struct Early<'a> {
    store: &'a mut Store,
    cleanup: &'a mut Cleanup,
    run_id: &'a str,
}

impl Early<'_> {
    /// Stops every process of the run, then ends it.
    fn end(&mut self, status: RunStatus, stop_reason: StopReason, error: &str) -> Result<(), ShepherdError> {
        self.cleanup.sweep(error);
        let used = self.cleanup.resources();
        self.cleanup.remove_cgroup();
        self.store.end_unstarted(self.run_id, status, stop_reason, error.to_string())?;
        self.store.mark_exited_using(self.run_id, None, None, Some(&used))?;
        Ok(())
    }
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

/// Starts the next queued runs now that this run's slot is free, and the
/// fires queued behind it. The
/// subreaper flag goes first: the new shepherds must not become ours.
fn hand_on_slot(home: &Home, run_id: &str) -> Result<(), ShepherdError> {
    process::set_child_subreaper(false).doing("leaving child subreaper")?;
    let config = Config::load(home)?;
    let shepherd = ShepherdCommand::current_exe().doing("finding the corral executable")?;
    let mut store = Store::open(home)?;
    crate::upkeep::queue::start_queued(&mut store, &config, &shepherd)?;
    // A fire of its schedule queued behind this run goes now, firer or not.
    if let Err(e) = crate::schedule::fire_queued_after(&mut store, run_id, &shepherd) {
        tracing::warn!(run = run_id, "cannot carry out the fires queued behind this run: {e}");
    }
    // Its run ended and its slot handed on, nothing waits for this
    // shepherd: a good time to keep the WAL short for the next opener.
    if let Err(e) = store.checkpoint_idle() {
        tracing::debug!("{e}");
    }
    Ok(())
}
