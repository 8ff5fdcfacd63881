//! `corral hosts`: the machines in `config.toml` (`[hosts.NAME]`), each
//! asked now whether it answers, its Corral's version and its runs; and
//! `corral hosts add NAME user@host`, which checks the connection and the
//! remote Corral (copying this one there with `--install` when the machine
//! is alike) before writing the host to `config.toml`.

use std::ffi::OsString;
use std::io::Write;

use anyhow::Context as _;
use serde::Serialize;

use super::table::{cell, Table};
use corral::home::config::{host_name_problem, Config, HostConfig};
use corral::remote::{about, About, RemoteError, Ssh, SshError};
use corral::{Home, Store};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where `--install` puts the binary on the host.
const INSTALLED_AT: &str = "~/.local/bin/corral";

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Follow every host into this machine's store until stopped, as the
    /// tray does (for a machine without a desktop: run it as a service).
    Follow,
    /// Add a host: check it answers and runs this Corral, then write it to
    /// config.toml.
    Add(AddArgs),
}

/// `corral hosts add`.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// Its name here (letters, digits, '-', '_').
    name: String,
    /// `user@host`, or a Host of ~/.ssh/config.
    ssh: String,
    /// Its SSH port.
    #[arg(long)]
    port: Option<u16>,
    /// The private key to use.
    #[arg(long, value_name = "FILE")]
    identity_file: Option<String>,
    /// One more `ssh` argument (repeatable): `--ssh-option=-oProxyJump=bastion`.
    #[arg(long = "ssh-option", value_name = "ARG", allow_hyphen_values = true)]
    ssh_options: Vec<String>,
    /// The remote corral, if not on its PATH.
    #[arg(long, value_name = "PATH")]
    corral: Option<String>,
    /// The remote CORRAL_HOME, if not the default.
    #[arg(long, value_name = "DIR")]
    home: Option<String>,
    /// Copy this corral there (to ~/.local/bin/corral) if it has none,
    /// or another version, and the machine is alike (same OS and
    /// architecture).
    #[arg(long)]
    install: bool,
}

#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    ssh: &'a str,
    reachable: bool,
    error: Option<String>,
    about: Option<About>,
    followed: Option<corral::store::HostState>,
}

pub fn run(home: &Home, store: &Store, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    match args.action {
        None => list(home, store, args.json, out),
        Some(action) => act(home, action, out),
    }
}

fn list(home: &Home, store: &Store, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let config = Config::load(home)?;
    if config.hosts.is_empty() && !json {
        writeln!(out, "no hosts: add one with 'corral hosts add NAME user@host'")?;
        return Ok(0);
    }
    // Asked side by side: an unreachable host costs its timeout once.
    let answers: Vec<Result<About, RemoteError>> = std::thread::scope(|scope| {
        let asks: Vec<_> = config.hosts.iter().map(|host| scope.spawn(move || about(&Ssh::new(home, host)))).collect();
        asks.into_iter().map(|ask| ask.join().expect("a host's check does not panic")).collect()
    });
    let mut listed = Vec::new();
    for (host, answer) in config.hosts.iter().zip(answers) {
        let (about, error) = match answer {
            Ok(about) => (Some(about), None),
            Err(e) => (None, Some(e.to_string())),
        };
        listed.push(Listed {
            name: &host.name,
            ssh: &host.ssh,
            reachable: about.is_some(),
            error,
            about,
            followed: store.host_state(&host.name)?,
        });
    }
    if json {
        super::print_json(out, &listed)?;
        return Ok(0);
    }
    let mut table = Table::new(&["HOST", "SSH", "STATE", "VERSION", "RUNNING", "RUNS"]);
    for host in &listed {
        let (state, version, running, total) = match &host.about {
            Some(a) => ("reachable".to_string(), a.version.clone(), a.running.to_string(), a.total.to_string()),
            None => ("unreachable".to_string(), "-".into(), "-".into(), "-".into()),
        };
        table.row(vec![host.name.to_string(), cell(host.ssh, 30), state, cell(&version, 30), running, total]);
    }
    table.write(out)?;
    for host in listed.iter().filter(|h| !h.reachable) {
        let why = host.error.as_deref().map_or_else(|| "no answer".to_string(), |e| cell(e, 400));
        writeln!(out, "{}: {why}", host.name)?;
    }
    Ok(if listed.iter().all(|h| h.reachable) { 0 } else { 1 })
}

/// `hosts follow` or `hosts add`.
fn act(home: &Home, action: Action, out: &mut impl Write) -> anyhow::Result<i32> {
    match action {
        Action::Follow => {
            corral::remote::Fleet::new(home.clone()).run().context("following the hosts of config.toml")?;
            Ok(0)
        }
        Action::Add(args) => add(home, args, out),
    }
}

fn add(home: &Home, args: AddArgs, out: &mut impl Write) -> anyhow::Result<i32> {
    let AddArgs { name, ssh, port, identity_file, ssh_options, corral, home: remote_home, install } = args;
    if let Some(why) = host_name_problem(&name) {
        anyhow::bail!("{why}");
    }
    let config = Config::load(home)?;
    if config.hosts.iter().any(|h| h.name == name) {
        anyhow::bail!("there is already a host '{name}' in {}: edit it there", home.config_file().display());
    }
    let mut host = HostConfig {
        name: name.clone(),
        ssh,
        port,
        identity_file,
        ssh_options,
        corral: corral.unwrap_or_else(|| "corral".to_string()),
        home: remote_home,
    };
    let checked = match about(&Ssh::new(home, &host)) {
        Err(RemoteError::Ssh(SshError::NoCorral { .. }) | RemoteError::Version { .. }) if install => {
            install_here(home, &mut host)?;
            writeln!(out, "copied this corral to {}:{INSTALLED_AT}", host.name)?;
            about(&Ssh::new(home, &host))?
        }
        other => other?,
    };
    append_host(home, &host)?;
    writeln!(
        out,
        "added host '{}' ({}): corral {} on {} {}, {} running, {} runs",
        host.name, host.ssh, checked.version, checked.os, checked.arch, checked.running, checked.total
    )?;
    Ok(0)
}

/// Copies this binary to the host when it is the same OS and architecture.
fn install_here(home: &Home, host: &mut HostConfig) -> anyhow::Result<()> {
    let ssh = Ssh::new(home, host);
    let uname = ssh.shell_line(&["uname".into(), "-sm".into()]).output().context("running ssh")?;
    if let Some(e) = ssh.failure(uname.status.code(), &uname.stderr) {
        return Err(e.into());
    }
    // Its last line: a login shell's banner may come first.
    let said = String::from_utf8_lossy(&uname.stdout);
    let theirs = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_lowercase();
    let ours = format!("{} {}", std::env::consts::OS, std::env::consts::ARCH);
    if theirs != ours {
        anyhow::bail!(
            "host '{}' is {theirs}, this machine {ours}: this corral cannot run there; build Corral on it \
             (cargo install --path . in a clone) and set `corral` in [hosts.{}] to its path",
            host.name,
            host.name
        );
    }
    let exe = std::env::current_exe().context("finding this corral")?;
    let binary = std::fs::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
    let script = "mkdir -p ~/.local/bin && cat > ~/.local/bin/corral.new && chmod 755 ~/.local/bin/corral.new \
                  && mv ~/.local/bin/corral.new ~/.local/bin/corral";
    // The script is ours and fixed: it goes as one word, to `sh -c`.
    let mut command = ssh.shell_line(&[OsString::from("sh"), "-c".into(), script.into()]);
    command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null());
    command.stderr(std::process::Stdio::piped());
    let mut child = command.spawn().context("running ssh")?;
    std::io::Write::write_all(&mut child.stdin.take().expect("piped"), &binary)?;
    let done = child.wait_with_output()?;
    if let Some(e) = ssh.failure(done.status.code(), &done.stderr) {
        return Err(e.into());
    }
    if !done.status.success() {
        anyhow::bail!("copying corral to '{}' failed: {}", host.name, String::from_utf8_lossy(&done.stderr).trim());
    }
    host.corral = INSTALLED_AT.to_string();
    Ok(())
}

/// Appends `[hosts.NAME]` to config.toml, leaving the rest as written.
fn append_host(home: &Home, host: &HostConfig) -> anyhow::Result<()> {
    let path = home.config_file();
    let mut table = toml::map::Map::new();
    table.insert(host.name.clone(), toml::Value::try_from(host)?);
    let mut hosts = toml::map::Map::new();
    hosts.insert("hosts".to_string(), toml::Value::Table(table));
    let text = toml::to_string(&toml::Value::Table(hosts))?;
    let mut existing = std::fs::read_to_string(&path).unwrap_or_default();
    if !existing.is_empty() && !existing.ends_with('\n') {
        existing.push('\n');
    }
    if !existing.is_empty() {
        existing.push('\n');
    }
    existing.push_str(&text);
    if let Some(dir) = path.parent() {
        corral::home::ensure_private_dir(dir)?;
    }
    std::fs::write(&path, existing).with_context(|| format!("writing {}", path.display()))?;
    // What was written must load: a mistake here is caught now.
    Config::load(home).with_context(|| format!("checking {}", path.display()))?;
    Ok(())
}
