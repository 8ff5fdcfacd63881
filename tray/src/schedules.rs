//! Fires the schedules while the tray runs (`corral::schedule::firer`, a
//! thread of its own, asleep until the next due time or a change in the
//! store). Other firers may run beside it (`corral schedule run`, a
//! timer, another tray): each slot is launched once.

use std::time::Duration;

use corral::upkeep::queue::ShepherdCommand;
use corral::{Home, Store};

/// How long after a failure (a store that cannot be opened) the firer
/// starts again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Starts the schedules' firer.
pub fn start(home: Home) -> std::io::Result<()> {
    std::thread::Builder::new().name("corral-schedules".into()).spawn(move || loop {
        // Its runs' shepherds are the `corral` CLI beside the tray, not the
        // tray: a shepherd that maps GTK starts ~20 ms later and holds
        // more memory for the whole run.
        let fired = ShepherdCommand::lightest().map_err(|e| e.to_string()).and_then(|shepherd| {
            let mut store = Store::open(&home).map_err(|e| e.to_string())?;
            corral::schedule::firer::run(&mut store, "tray", &shepherd, |round| {
                for (name, e) in &round.errors {
                    tracing::warn!("cannot fire schedule {name}: {e}");
                }
                true
            })
            .map_err(|e| e.to_string())
        });
        if let Err(e) = fired {
            tracing::warn!("the schedules' firer stopped: {e}; starting again in {RETRY_AFTER:?}");
        }
        std::thread::sleep(RETRY_AFTER);
    })?;
    Ok(())
}
