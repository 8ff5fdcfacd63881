//! `corral-push`: the push channel's own program (`[push]` in config.toml):
//! `test` (one push with an Answer button, waiting for its answer),
//! `listen` (follow the answers and send what needs the user, until
//! stopped), `check` (does the server answer; for `corral doctor`).
//!
//! Its own program so that `corral`, which every run's shepherd is, links
//! no HTTPS: `corral push …` hands over to this one, next to it.

use std::io::Write;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use serde_json::json;

use corral::home::config::Config;
use corral::push::{token, Channel};
use corral::Home;

/// Pushes to your phone (`[push]` in config.toml).
#[derive(Debug, Parser)]
#[command(name = "corral-push", version)]
struct Cli {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Send one push with an "Answer" button and wait for its answer.
    Test {
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Follow the answers and send what needs you, until stopped.
    Listen,
    /// Ask the push server whether it answers (one line; exit 1 if not).
    Check,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    corral::home::logging::init_for_command();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("corral push: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let home = Home::from_env()?;
    let mut out = std::io::stdout().lock();
    match cli.action {
        Action::Listen => {
            writeln!(out, "following the answers and sending pushes (Ctrl-C to stop)")?;
            out.flush()?;
            corral::push::listen::run_for_ever(&home)?;
            Ok(0)
        }
        Action::Check => {
            let config = Config::load(&home)?;
            let push = config.push.ok_or(corral::push::listen::ListenError::NoPush)?;
            match Channel::new(&push)?.check() {
                Ok(said) => {
                    writeln!(out, "{said}")?;
                    Ok(0)
                }
                Err(e) => {
                    writeln!(out, "{e}")?;
                    Ok(1)
                }
            }
        }
        Action::Test { timeout } => test(&home, Duration::from_secs(timeout), &mut out),
    }
}

fn test(home: &Home, timeout: Duration, out: &mut impl Write) -> anyhow::Result<u8> {
    let config = Config::load(home)?;
    let push = config.push.ok_or(corral::push::listen::ListenError::NoPush)?;
    let channel = Channel::new(&push)?;
    let secret = token::secret(home).context("making the push secret")?;
    let key = format!("test:{}", fastrand::u64(..));
    let expires = chrono::Utc::now().timestamp() + 3600;
    let message = json!({"key": key, "title": "Corral: a test push",
        "message": "Press Answer: `corral push test` waits for it.", "priority": 3, "tags": ["wave"],
        "actions": [{"label": "Answer", "answer": token::sign(&secret, &key, "test", expires)}]});
    // Answers from a little before the push on (the server's clock may be
    // behind this one's).
    let since = (chrono::Utc::now().timestamp() - 10).to_string();
    let sent = Instant::now();
    channel.publish(&message, false).map_err(|failed| failed.error)?;
    writeln!(
        out,
        "sent; waiting up to {}s for its answer ({})",
        timeout.as_secs(),
        push.ntfy.as_deref().unwrap_or("webhook")
    )?;
    out.flush()?;
    // On a topic a stranger may read or write, the push carries no button.
    if let corral::push::Answering::Off(why) = channel.answering()? {
        writeln!(out, "it carries no Answer button: {why}")?;
        return Ok(1);
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let found =
            channel.follow(&since, |_, text| match token::verify(&secret, text, chrono::Utc::now().timestamp()) {
                Ok(signed) if signed.key == key => {
                    let _ = tx.send(Ok(()));
                    false
                }
                _ => true,
            });
        if let Err(e) = found {
            let _ = tx.send(Err(e));
        }
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(())) => {
            writeln!(out, "answered after {:.1} s: the channel works both ways", sent.elapsed().as_secs_f64())?;
            Ok(0)
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => {
            writeln!(out, "no answer within {}s", timeout.as_secs())?;
            Ok(1)
        }
    }
}
