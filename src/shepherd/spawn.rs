//! Starting the agent process: the same way for a run's first turn and for
//! a continuation turn.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::transcript::RawLog;
use crate::adapter::{Invocation, InvocationContext};
use crate::home::{self, Home};
use crate::preset::Preset;
use crate::process::{self, AgentStart, StartedAgent};
use crate::run::env::{self as run_env, RUN_ID_ENV, SHEPHERD_ENV};
use crate::run::Run;

/// Everything needed to start the run's agent, any number of times.
pub(super) struct AgentLaunch {
    pub run_id: String,
    pub preset: Preset,
    pub model: Option<String>,
    pub cwd: String,
    pub run_dir: PathBuf,
    pub system_prompt_file: Option<PathBuf>,
    /// `CORRAL_HOME` for the agent, when this installation has one.
    pub home_env: Option<PathBuf>,
    /// The launcher's environment, kept with the run (`None` for a run
    /// launched before Corral kept one: it gets the shepherd's).
    pub env: Option<Vec<(OsString, OsString)>>,
    /// Tools allowed besides the preset's, from the reply that started the
    /// current turn (`--allow-denied`); kept for its continuation turns.
    pub allowed: Vec<String>,
    /// How a new process enters the run's cgroup (nothing without one);
    /// the cgroup that owns its descriptors outlives every spawn.
    pub join: process::cgroup::Join,
    /// The run's resource limits (what its cgroup was given).
    pub limits: crate::cost::resources::ResourceLimits,
    /// Its sandbox, and the bubblewrap that makes it (`None`: unsandboxed).
    pub sandbox: Option<(crate::sandbox::Sandbox, PathBuf)>,
    /// Its worktree, when it has one.
    pub worktree: Option<PathBuf>,
    /// Its worktree's branch, as recorded (not as the worktree says).
    pub branch: Option<String>,
    /// Corral's data, worktree and settings folders, for the sandbox's view.
    pub corral_dirs: (PathBuf, PathBuf, PathBuf),
    /// The proxy a sandbox that reaches only some hosts goes out through.
    pub proxy: Option<crate::sandbox::proxy::Proxy>,
    /// The broker that carries out a sandboxed agent's `corral` outside.
    pub broker: Option<crate::sandbox::broker::Broker>,
    /// The user's home, as the run's environment says (what `~` is in its
    /// sandbox; read from every tool result of a sandboxed run).
    pub user_home: PathBuf,
    /// Its ports (`CORRAL_PORT`), if it has a block.
    pub ports: Option<crate::run::ports::PortBlock>,
}

impl AgentLaunch {
    /// With the run's kept environment `env` (read once by the shepherd);
    /// writes the preset's body to `system-prompt.md` for agents that read
    /// it from a file.
    pub fn new(
        home: &Home,
        run: &Run,
        preset: Preset,
        run_dir: PathBuf,
        env: Option<Vec<(OsString, OsString)>>,
    ) -> io::Result<AgentLaunch> {
        let user_home = user_home(env.as_deref());
        // pi keeps its session there; a sandbox makes it with its `/tmp`;
        // for the rest it would be an empty folder made before the agent
        // may start.
        if preset.agent == crate::adapter::AgentKind::Pi {
            home::ensure_private_dir(&crate::adapter::agent_dir(&run_dir)).map_err(io::Error::other)?;
        }
        // The task whole, private to the user, for commands that read it
        // from a file (`CORRAL_TASK_FILE`); the agents Corral knows take it
        // as their CLI says, and a file they never read is an inode each
        // launch waits for.
        if preset.agent == crate::adapter::AgentKind::Command {
            home::create_private(&run_dir.join(crate::adapter::TASK_FILE))?.write_all(run.task.as_bytes())?;
        }
        let system_prompt_file = if preset.system_prompt.is_empty() {
            None
        } else {
            let path = run_dir.join("system-prompt.md");
            home::create_private(&path)?.write_all(preset.system_prompt.as_bytes())?;
            Some(path)
        };
        Ok(AgentLaunch {
            run_id: run.id.clone(),
            preset,
            model: run.model.clone(),
            cwd: run.cwd.clone(),
            run_dir,
            system_prompt_file,
            home_env: home.env_value(),
            env,
            allowed: Vec::new(),
            join: Default::default(),
            limits: Default::default(),
            sandbox: None,
            worktree: run.worktree.as_ref().map(|w| PathBuf::from(&w.path)),
            branch: run.worktree.as_ref().map(|w| w.branch.clone()),
            corral_dirs: (home.data_dir().to_path_buf(), home.worktrees_dir(), home.config_dir().to_path_buf()),
            proxy: None,
            broker: None,
            user_home,
            ports: run.ports,
        })
    }

    /// What an adapter needs to build an invocation for `task`.
    pub fn context<'a>(&'a self, task: &'a str) -> InvocationContext<'a> {
        InvocationContext {
            preset: &self.preset,
            task,
            model: self.model.as_deref(),
            run_dir: self.run_dir.clone(),
            system_prompt_file: self.system_prompt_file.clone(),
            allowed: &self.allowed,
        }
    }

    /// Starts the proxy of a sandbox that may reach only some hosts (its
    /// agent's API hosts read from the run's environment and config).
    pub fn start_proxy(&mut self) -> io::Result<Option<Vec<String>>> {
        let Some((sandbox, _)) = &self.sandbox else { return Ok(None) };
        let home = &self.user_home;
        let vars: Vec<(OsString, OsString)> = self.env.clone().unwrap_or_else(|| std::env::vars_os().collect());
        let adapter = crate::adapter::for_agent(self.preset.agent);
        let env = crate::sandbox::AgentEnv { vars: &vars, home };
        let Some(hosts) = sandbox.network.hosts_for(|| adapter.api_hosts(&env)) else { return Ok(None) };
        let socket = crate::sandbox::proxy::socket_in(&self.run_dir);
        self.proxy = Some(crate::sandbox::proxy::Proxy::start(socket, hosts.clone())?);
        Ok(Some(hosts))
    }

    /// The environment a process of the run starts with: the launcher's,
    /// kept with the run (else this process's), without the shepherd's
    /// mark, with the run's id, this installation's `CORRAL_HOME`, its
    /// ports (`CORRAL_PORT`, `CORRAL_PORTS`) and its preset's `env:`.
    pub fn run_environment(&self) -> BTreeMap<OsString, OsString> {
        let mut env: BTreeMap<OsString, OsString> = match &self.env {
            Some(env) => env.iter().cloned().collect(),
            None => std::env::vars_os().collect(),
        };
        env.remove(OsStr::new(SHEPHERD_ENV));
        env.insert(RUN_ID_ENV.into(), self.run_id.clone().into());
        if let Some(root) = &self.home_env {
            env.insert(home::HOME_ENV.into(), root.into());
        }
        if let Some(ports) = self.ports {
            env.insert(crate::run::ports::PORT_ENV.into(), ports.first.to_string().into());
            env.insert(crate::run::ports::PORTS_ENV.into(), ports.count.to_string().into());
        }
        // The preset's own, with the run's id, port and worktree put in.
        for (name, value) in &self.preset.env {
            env.insert(name.into(), self.fill(value).into());
        }
        env
    }

    /// `value` with the run's `{run}`, `{port}` and `{worktree}` put in
    /// (`env:` values, and the words of `setup:` and `teardown:`).
    pub fn fill(&self, value: &str) -> String {
        let worktree = self.worktree.as_ref().map_or(self.cwd.clone(), |w| w.to_string_lossy().into_owned());
        run_env::fill(value, &self.run_id, self.ports.map(|p| p.first), &worktree)
    }

    /// A command of the preset's (`setup:`, `teardown:`) as this run runs
    /// it: each word with the placeholders put in.
    pub fn filled(&self, command: &[String]) -> Vec<String> {
        command.iter().map(|word| self.fill(word)).collect()
    }

    /// Starts the broker of a sandboxed run: its agent's `corral` is
    /// carried out outside the sandbox, with the run's environment.
    pub fn start_broker(&mut self) -> io::Result<()> {
        if self.sandbox.is_none() || self.broker.is_some() {
            return Ok(());
        }
        let mut env = self.run_environment();
        env.remove(OsStr::new(crate::sandbox::broker::SOCKET_ENV));
        let forwarding = crate::sandbox::broker::Forwarding {
            program: crate::upkeep::queue::ShepherdCommand::lightest()?.program,
            run_id: self.run_id.clone(),
            env: env.into_iter().collect(),
            cgroup: self.join.into.is_some() || self.join.v2_procs.is_some(),
        };
        let socket = crate::sandbox::broker::socket_in(&self.run_dir);
        self.broker = Some(crate::sandbox::broker::Broker::start(socket, forwarding)?);
        Ok(())
    }

    /// Why the agent cannot start in the run's folder, if it cannot.
    pub fn cwd_problem(&self) -> Option<String> {
        let cwd = Path::new(&self.cwd);
        if !cwd.is_dir() {
            return Some(format!(
                "the working folder {} does not exist: create it, or launch with --cwd pointing at an existing folder",
                self.cwd
            ));
        }
        // A sandboxed run's folder was fixed at launch as on disk: one made
        // a link since (a launcher swapping its child's folder) is not
        // followed.
        let linked = self.sandbox.is_some()
            && self.worktree.is_none()
            && process::pin(cwd).is_err_and(|e| process::is_a_link(&e));
        linked.then(|| {
            format!(
                "the working folder {} is a link now, not the folder it was at launch: a sandboxed run never follows \
                 it. Launch again in the folder you mean",
                self.cwd
            )
        })
    }

    /// Starts the agent: argv only, stdin from /dev/null, stdout and stderr
    /// piped, its own process group, PDEATHSIG, the environment passed
    /// the launcher's plus the run's id.
    pub fn spawn(&self, invocation: &Invocation) -> io::Result<StartedAgent> {
        // The program is looked up on this environment's PATH, as the
        // launcher would have.
        let mut env = self.run_environment();
        for (path, text) in &invocation.files {
            home::create_private(path)?.write_all(text.as_bytes())?;
        }
        env.extend(invocation.env.iter().map(|(k, v)| (k.into(), v.into())));
        let (program, args, handed) = match &self.sandbox {
            Some((sandbox, bwrap)) => {
                let sandboxed = self.sandboxed(&invocation.program, &invocation.args, sandbox, bwrap, &mut env)?;
                (sandboxed.program, sandboxed.args, Some(sandboxed.handed))
            }
            None => (invocation.program.clone().into(), invocation.args.iter().map(OsString::from).collect(), None),
        };
        process::start_agent(AgentStart {
            program: &program,
            args: &args,
            env: env.into_iter().collect(),
            cwd: Path::new(&self.cwd),
            stdin: self.stdin_for(invocation)?,
            join: &self.join,
            handed: handed.as_ref(),
        })
    }
}

/// The user's home as the run's kept environment `env` says (else this
/// process's): what `~` is in its sandbox.
pub(super) fn user_home(env: Option<&[(OsString, OsString)]>) -> PathBuf {
    let home = run_env::var(env, "HOME").or_else(|| std::env::var_os("HOME"));
    home.map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"))
}

impl AgentLaunch {
    /// `program` and `args` as the run's sandbox runs them (bubblewrap and
    /// its arguments), `env` cut to what it keeps; `None` for a run that is
    /// not sandboxed. The preset's `setup` runs so, as its agent does.
    pub fn in_sandbox(
        &self,
        program: &str,
        args: &[String],
        env: &mut BTreeMap<OsString, OsString>,
    ) -> io::Result<Option<std::process::Command>> {
        let Some((sandbox, bwrap)) = &self.sandbox else { return Ok(None) };
        let sandboxed = self.sandboxed(program, args, sandbox, bwrap, env)?;
        let mut command = std::process::Command::new(sandboxed.program);
        command.args(sandboxed.args);
        process::hand_to(&mut command, sandboxed.handed);
        Ok(Some(command))
    }

    /// Bubblewrap and its arguments around `program` and `args`, and the
    /// environment cut to what the sandbox keeps.
    fn sandboxed(
        &self,
        program: &str,
        arguments: &[String],
        sandbox: &crate::sandbox::Sandbox,
        bwrap: &Path,
        env: &mut BTreeMap<OsString, OsString>,
    ) -> io::Result<Sandboxed> {
        // Found here, so a missing binary is said as one (bubblewrap would
        // only say that its exec failed).
        let path = env.get(OsStr::new("PATH")).cloned();
        let program = crate::preset::available::locate(program, path.as_deref(), Path::new(&self.cwd))
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let adapter = crate::adapter::for_agent(self.preset.agent);
        if let Some(keep) = &sandbox.env_keep {
            env.retain(|name, _| crate::sandbox::keeps(keep, &name.to_string_lossy(), adapter.own_env()));
        }
        // Sockets of the host's the sandbox does not show, and would name.
        for name in crate::sandbox::HOST_SOCKETS {
            env.remove(OsStr::new(name));
        }
        let user_home = &self.user_home;
        let scratch = crate::adapter::agent_dir(&self.run_dir);
        // The agent writes its scratch folder: its `/tmp` must be a folder
        // of it, not a link the agent left to one of the user's.
        let tmp = crate::sandbox::bwrap::own_tmp(&scratch);
        if tmp.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(&tmp)?;
        }
        home::ensure_private_dir(&tmp).map_err(io::Error::other)?;
        if !crate::sandbox::own::within(&tmp, &scratch) {
            return Err(io::Error::other(format!("{} leads out of the run's folder", tmp.display())));
        }
        env.insert("TMPDIR".into(), "/tmp".into());
        let broker = self.broker.as_ref().map(|_| crate::sandbox::broker::socket_in(&self.run_dir));
        let unreadable = self.run_dir.join("unreadable");
        if !unreadable.exists() {
            File::create(&unreadable)?;
            std::fs::set_permissions(&unreadable, std::os::unix::fs::PermissionsExt::from_mode(0o000))?;
        }
        // Inside, the agent's way out is handed to the proxy first; and
        // its `corral` (handed to the broker) is there under `read: only`.
        let helper = match (&self.proxy, &self.broker) {
            (None, None) => None,
            _ => Some(crate::upkeep::queue::ShepherdCommand::lightest()?.program),
        };
        let view = crate::sandbox::bwrap::RunView {
            user_home,
            cwd: Path::new(&self.cwd),
            worktree: self.worktree.as_deref(),
            branch: self.branch.as_deref(),
            corral_home: &self.corral_dirs.0,
            corral_config: &self.corral_dirs.2,
            run_dir: &self.run_dir,
            scratch: &scratch,
            broker: broker.as_deref(),
            worktrees: &self.corral_dirs.1,
            agent_files: adapter.own_files(),
            agent_history: adapter.own_history(),
            unreadable: &unreadable,
            programs: &[Some(program.as_path()), helper.as_deref()].into_iter().flatten().collect::<Vec<_>>(),
            search_path: &path.as_deref().map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default(),
        };
        env.extend(crate::sandbox::bwrap::git_env(&view));
        let made = crate::sandbox::bwrap::arguments(sandbox, &view);
        let (mut args, notes) = (made.args, made.notes);
        let handed = process::Handed::new(&made.fds, crate::sandbox::bwrap::FIRST_HANDED_FD)?;
        for note in notes {
            tracing::warn!(run = self.run_id, "{note}");
        }
        if let Some(helper) = helper.filter(|_| self.proxy.is_some()) {
            let socket = crate::sandbox::proxy::socket_in(&self.run_dir);
            args.extend([helper.into(), "sandbox-net".into(), socket.into(), "--".into()]);
        }
        args.push(program.into());
        args.extend(arguments.iter().map(OsString::from));
        Ok(Sandboxed { program: bwrap.into(), args, handed })
    }

    /// The agent's standard input: nothing, or the invocation's text from a
    /// private file in the run's folder (a file, so no write can block).
    fn stdin_for(&self, invocation: &Invocation) -> io::Result<Option<File>> {
        let Some(text) = &invocation.stdin else { return Ok(None) };
        let path = self.run_dir.join("input.txt");
        home::create_private(&path)?.write_all(text.as_bytes())?;
        Ok(Some(File::open(&path)?))
    }
}

/// A program as a run's sandbox starts it: bubblewrap, its arguments, and
/// the places it binds by descriptor.
struct Sandboxed {
    program: OsString,
    args: Vec<OsString>,
    handed: process::Handed,
}

/// The run folder's logs, appended to across turns: the raw streams (their
/// first `raw_max` bytes, none if 0) and what the shepherd did to the
/// processes.
pub(super) struct RunLogs {
    pub stdout: RawLog,
    pub stderr: RawLog,
}

impl RunLogs {
    pub fn open(run_dir: &Path, raw_max: u64) -> io::Result<RunLogs> {
        let open = |name: &str| home::open_private_append(&run_dir.join(name));
        let raw = |name: &str| -> io::Result<RawLog> {
            Ok(if raw_max == 0 { RawLog::none() } else { RawLog::new(open(name)?, raw_max) })
        };
        Ok(RunLogs { stdout: raw("stdout.log")?, stderr: raw("stderr.log")? })
    }

    /// Says in each raw log what it left out.
    pub fn close(&mut self) {
        self.stdout.close();
        self.stderr.close();
    }
}

/// A message for an agent that could not be started, naming the binary and
/// what to do.
pub(super) fn spawn_error(program: &str, preset_path: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!(
            "agent binary '{program}' not found{}: install it, or fix the command in the preset {preset_path}",
            if program.contains('/') { String::new() } else { " on PATH".to_string() }
        ),
        io::ErrorKind::PermissionDenied => {
            format!("agent binary '{program}' is not executable: chmod +x it, or fix the preset {preset_path}")
        }
        _ => format!("cannot start agent binary '{program}': {e}"),
    }
}
