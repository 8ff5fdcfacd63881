//! The launcher's side: ask the template's spare to launch, or say there
//! is none (and the launch goes cold).

use std::io::{Read, Write};
use std::time::Duration;

use super::wire::{WarmAnswer, WarmLaunch};
use crate::home::Home;

/// How long a launcher waits for a spare to take its launch before it
/// launches cold: a spare is forked and waiting before it is needed, unless
/// the template or its spare is stopped, or the machine is swamped.
pub const TAKEN_WITHIN: Duration = Duration::from_secs(1);

/// How long a launcher waits for a spare's answer, once taken, before it
/// launches cold under the same key: a spare records the run in
/// milliseconds, unless the store waits on another writer.
const PATIENCE: Duration = Duration::from_secs(30);

/// The most an answer may be: a run with its task (at most 1 MB) and more.
const MOST: u64 = 16 << 20;

/// Asks the template of `home` to launch `launch`; `None` if no template
/// answers (none runs, or it went away): then launch cold.
pub fn ask(home: &Home, launch: &WarmLaunch) -> Option<WarmAnswer> {
    // Never waits to connect: a stopped template whose queue filled up
    // would hold every launch in `connect` for ever.
    let mut stream = crate::process::connect_now(&home.template_socket()).ok()?;
    let request = serde_json::to_vec(launch).ok()?;
    // A long task fills the socket until a spare reads it.
    stream.set_write_timeout(Some(TAKEN_WITHIN)).ok()?;
    stream.write_all(&request).ok()?;
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    stream.set_read_timeout(Some(TAKEN_WITHIN)).ok()?;
    let mut taken = [0u8; 1];
    if stream.read_exact(&mut taken).is_err() || taken != super::wire::TAKEN {
        tracing::debug!("no spare took the launch within {TAKEN_WITHIN:?}: launching cold");
        return None;
    }
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    let mut answer = Vec::new();
    stream.take(MOST).read_to_end(&mut answer).ok()?;
    match serde_json::from_slice(&answer) {
        Ok(answer) => Some(answer),
        Err(e) => {
            // A spare that died mid-answer closes the socket: nothing, or a
            // piece of one.
            tracing::debug!("no answer from the launch template ({e}): launching cold");
            None
        }
    }
}
