//! Applies `[retention]` of `config.toml` once a day while the tray runs
//! (`corral::upkeep::retention` decides what goes and when it last ran). A thread of
//! its own that wakes once an hour: the check is a file's time.

use std::time::Duration;

use corral::home::config::Config;
use corral::{Home, Store};

/// How long after the tray starts before the first check (a login is busy
/// enough), and between checks.
const FIRST_CHECK: Duration = Duration::from_secs(60);
const CHECK_EVERY: Duration = Duration::from_secs(3600);

/// Starts the retention thread.
pub fn start(home: Home) -> std::io::Result<()> {
    std::thread::Builder::new().name("corral-retention".into()).spawn(move || {
        std::thread::sleep(FIRST_CHECK);
        loop {
            check(&home);
            std::thread::sleep(CHECK_EVERY);
        }
    })?;
    Ok(())
}

/// One check; a failure is logged and tried again at the next.
fn check(home: &Home) {
    let applied = Config::load(home).map_err(|e| e.to_string()).and_then(|config| {
        let mut store = Store::open(home).map_err(|e| e.to_string())?;
        corral::upkeep::retention::apply_if_due(&mut store, &config).map_err(|e| e.to_string())
    });
    match applied {
        Ok(Some(pruned)) if pruned.runs > 0 => tracing::info!("retention removed {} run(s)", pruned.runs),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot apply [retention] of config.toml: {e}"),
    }
}
