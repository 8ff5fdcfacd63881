//! `corral-wake`: where a `corral wait` sleeps once nothing but its runs'
//! ends is left to be told of (see `corral::watch::asleep`). It prints
//! them and exits as `corral wait` would; told of anything else, it goes
//! back to being that `corral wait`.
//!
//! Its own small program so that a thousand waits asleep are a thousand
//! small processes, quick to wake and to exit.

use std::io::Write;

use corral::verbs::wait::WaitResult;
use corral::watch::asleep::{Asleep, Woken};

/// As `corral` reports an error.
const EXIT_ERROR: i32 = 2;

fn main() {
    let asleep = match Asleep::from_arg(std::env::args_os().nth(1).as_deref()) {
        Ok(asleep) => asleep,
        Err(e) => {
            eprintln!("corral-wake: {e}");
            std::process::exit(EXIT_ERROR);
        }
    };
    let runs = match asleep.sleep() {
        Ok(Woken::Ended(runs)) => runs,
        // Whatever else woke it, or kept it from sleeping, the wait it came
        // from looks again (and heals).
        Ok(Woken::Back) | Err(_) => {
            let e = asleep.go_back();
            eprintln!("corral-wake: cannot go back to `corral wait`: {e}");
            std::process::exit(EXIT_ERROR);
        }
    };
    let mut out = std::io::stdout().lock();
    let printed = if asleep.json {
        serde_json::to_writer_pretty(&mut out, &runs).map_err(std::io::Error::from).and_then(|()| writeln!(out))
    } else {
        runs.iter().try_for_each(|run| writeln!(out, "{}", run.ended_line()))
    };
    let result = WaitResult { runs, timed_out: false, cancelled: false, still: Vec::new() };
    match printed.and_then(|()| out.flush()) {
        Ok(()) => std::process::exit(result.exit_code()),
        // A reader that went away wants nothing more, as `corral` takes it.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("corral-wake: cannot print the runs: {e}");
            std::process::exit(EXIT_ERROR);
        }
    }
}
