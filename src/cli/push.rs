//! `corral push test`: one push with a button, waiting for its answer from
//! the phone; `corral push listen`: follow the answers and send what needs
//! the user, in the foreground (the tray does it on its own; this is for a
//! machine without a desktop).

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use corral::config::Config;
use corral::push::{token, Channel};
use corral::Home;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Send one push with an "Answer" button and wait for its answer.
    Test {
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Follow the answers and send what needs you, until stopped.
    Listen,
}

pub fn run(home: &Home, args: Args, out: &mut impl Write) -> anyhow::Result<i32> {
    match args.action {
        Action::Listen => {
            writeln!(out, "following the answers and sending pushes (Ctrl-C to stop)")?;
            out.flush()?;
            corral::push::listen::run_for_ever(home)?;
            Ok(0)
        }
        Action::Test { timeout } => test(home, Duration::from_secs(timeout), out),
    }
}

fn test(home: &Home, timeout: Duration, out: &mut impl Write) -> anyhow::Result<i32> {
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
    channel.publish(&message)?;
    writeln!(
        out,
        "sent; waiting up to {}s for its answer ({})",
        timeout.as_secs(),
        push.ntfy.as_deref().unwrap_or("webhook")
    )?;
    out.flush()?;
    if !channel.answers() {
        writeln!(out, "no ntfy topic: a webhook alone cannot bring an answer back")?;
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
