//! The shepherd: one small process per run (`corral shepherd <id>`) that
//! owns the agent from spawn to reaping, writes everything to the store, and
//! decides the run's outcome.
//!
//! It is the run's only writer once started. The outcome is committed the
//! moment it is known (the adapter's terminal event, or the agent's exit, or
//! a stop request); cleanup of lingering processes comes after and never
//! changes it. As child subreaper it inherits every orphaned descendant, so
//! it can kill and reap all of them before it exits: no process outlives
//! its run.

mod cleanup;
mod lines;
mod supervise;

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::adapter::{self, InvocationContext};
use crate::config::{Config, ConfigError};
use crate::home::{self, Home};
use crate::process::{self, ProcessId, SignalPipe};
use crate::run::{RunStatus, StopReason};
use crate::store::{Outcome, Store, StoreError};

pub use lines::LineSplitter;

/// The variable that tells every process of a run which run it belongs to.
pub const RUN_ID_ENV: &str = "CORRAL_RUN_ID";

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
    let sigchld = SignalPipe::new(&[libc::SIGCHLD]).doing("routing SIGCHLD")?;
    let stop = SignalPipe::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP]).doing("routing stop signals")?;

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
    store.record_shepherd(run_id, me.pid, me.start)?;
    process::set_child_subreaper(true).doing("becoming child subreaper")?;
    let config = Config::load(home)?;

    let fail_to_start = |store: &mut Store, error: String| -> Result<(), ShepherdError> {
        let outcome = Outcome {
            status: RunStatus::Failed,
            stop_reason: StopReason::SpawnFailed,
            exit_code: None,
            exit_signal: None,
            error: Some(error),
            report: Default::default(),
        };
        store.commit_outcome(run_id, &outcome)?;
        store.mark_exited(run_id, None, None)?;
        Ok(())
    };

    if store.run(run_id)?.abort_requested_at.is_some() {
        let outcome = Outcome {
            status: RunStatus::Aborted,
            stop_reason: StopReason::UserAbort,
            exit_code: None,
            exit_signal: None,
            error: Some("aborted before the agent started".into()),
            report: Default::default(),
        };
        store.commit_outcome(run_id, &outcome)?;
        store.mark_exited(run_id, None, None)?;
        return Ok(());
    }

    let preset = store.run_preset(run_id)?;
    let adapter = adapter::for_agent(preset.agent);
    let run_dir = home.run_dir(run_id);
    home::ensure_private_dir(&run_dir).map_err(StoreError::from)?;
    let system_prompt_file = if preset.system_prompt.is_empty() {
        None
    } else {
        let path = run_dir.join("system-prompt.md");
        let mut file = home::create_private(&path).doing("writing system-prompt.md")?;
        io::Write::write_all(&mut file, preset.system_prompt.as_bytes()).doing("writing system-prompt.md")?;
        Some(path)
    };
    let ctx = InvocationContext {
        preset: &preset,
        task: &run.task,
        model: run.model.as_deref(),
        run_dir: run_dir.clone(),
        system_prompt_file,
    };
    let invocation = match adapter.invocation(&ctx) {
        Ok(invocation) => invocation,
        Err(e) => return fail_to_start(&mut store, e.to_string()),
    };
    if !Path::new(&run.cwd).is_dir() {
        let error = format!(
            "the working folder {} does not exist: create it, or launch with --cwd pointing at an existing folder",
            run.cwd
        );
        return fail_to_start(&mut store, error);
    }

    let open = |name: &str| home::open_private_append(&run_dir.join(name));
    let stdout_log = open("stdout.log").doing("opening stdout.log")?;
    let stderr_log = open("stderr.log").doing("opening stderr.log")?;
    let signals_log = open("signals.log").doing("opening signals.log")?;

    let mut command = Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .current_dir(&run.cwd)
        .env(RUN_ID_ENV, run_id)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(root) = home.env_value() {
        command.env(home::HOME_ENV, root);
    }
    process::prepare_agent(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return fail_to_start(&mut store, spawn_error(&invocation.program, &preset.path, &e)),
    };
    let agent_pid = child.id() as i32;
    // The agent cannot have been reaped yet (only this thread reaps), so
    // its /proc entry is there to read, zombie or not.
    let agent = ProcessId::of(agent_pid)
        .ok_or_else(|| io::Error::other("the agent has no /proc entry"))
        .doing("reading the agent's identity")?;
    store.mark_running(run_id, agent.pid, agent.start)?;

    let stdout = child.stdout.take().expect("stdout was piped");
    let stderr = child.stderr.take().expect("stderr was piped");
    // The Child handle is dropped without waiting: reaping is done with
    // waitpid(-1) by the supervisor, for the agent and every orphan alike.
    drop(child);

    let mut supervisor = supervise::Supervisor::new(supervise::Setup {
        store,
        run_id: run_id.to_string(),
        me,
        agent,
        adapter,
        preset,
        config,
        stdout,
        stderr,
        stdout_log,
        stderr_log,
        signals_log,
        sigchld,
        stop,
    })?;
    supervisor.run()
}

/// Starts the next queued runs now that this run's slot is free. The
/// subreaper flag goes first: the new shepherds must not become ours.
fn hand_on_slot(home: &Home) -> Result<(), ShepherdError> {
    process::set_child_subreaper(false).doing("leaving child subreaper")?;
    let config = Config::load(home)?;
    let shepherd = crate::launch::ShepherdCommand::current_exe().doing("finding the corral executable")?;
    crate::queue::start_queued(&mut Store::open(home)?, &config, &shepherd)?;
    Ok(())
}

/// A message for an agent that could not be started, naming the binary and
/// what to do.
fn spawn_error(program: &str, preset_path: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!(
            "agent binary '{program}' not found{}: install it, or fix the command in the preset {preset_path}",
            if program.contains('/') { String::new() } else { " on PATH".to_string() }
        ),
        io::ErrorKind::PermissionDenied => format!(
            "agent binary '{program}' is not executable: chmod +x it, or fix the preset {preset_path}"
        ),
        _ => format!("cannot start agent binary '{program}': {e}"),
    }
}
