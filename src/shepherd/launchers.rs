//! Corral's own programs inside a run (`corral launch … &`, an MCP server):
//! a turn that ended waits for them before it is judged, since a child run
//! they are recording must be counted, or the parent would end while its
//! child runs.

use std::path::Path;
use std::time::{Duration, Instant};

use super::cleanup::Cleanup;
use crate::process;

/// How often a turn that ended looks again for Corral processes of the run
/// still recording child runs.
const LAUNCHER_POLL: Duration = Duration::from_millis(2);
/// How long a turn that ended waits for a process of the run forked this
/// recently to turn out to be a Corral launcher (a fork not yet exec'd).
const LAUNCH_SETTLE: Duration = Duration::from_millis(50);

/// Waits, at most `patience`, until no process of the run runs `corral_exe`
/// (and none forked just now, other than `agent`, may still become one).
pub(super) fn await_launchers(cleanup: &mut Cleanup, corral_exe: &Path, agent: i32, patience: Duration) {
    let start = Instant::now();
    let deadline = start + patience;
    let mut noted = false;
    loop {
        let left: Vec<i32> = cleanup.own_processes().into_iter().map(|p| p.pid).collect();
        let launchers: Vec<i32> =
            left.iter().copied().filter(|&pid| process::exe_of(pid).is_some_and(|exe| exe == corral_exe)).collect();
        // A shell's `corral launch … &` may not have exec'd yet when the
        // shell exits: a process forked just now may still become a
        // launcher. One that has run longer (the agent lingering after its
        // last line, a server it started) never delays the verdict.
        let since = start.elapsed();
        let fresh = |pid: &i32| process::age(*pid).is_some_and(|age| age <= LAUNCH_SETTLE + since);
        let settling =
            since < LAUNCH_SETTLE && left.iter().filter(|p| **p != agent && !launchers.contains(p)).any(fresh);
        if (launchers.is_empty() && !settling) || Instant::now() >= deadline {
            return;
        }
        if !launchers.is_empty() && !noted {
            let pids: Vec<String> = launchers.iter().map(i32::to_string).collect();
            cleanup.note(&format!("waiting for Corral processes of the run to finish: pids {}", pids.join(" ")));
            noted = true;
        }
        // Nothing is reaped here: the agent's exit status is read by the
        // supervisor's `reap` alone (zombies are in no list of the run's
        // processes).
        std::thread::sleep(LAUNCHER_POLL);
    }
}
