//! Follows the pull requests opened from runs while the tray runs: each
//! open one asked about at most once a minute (`corral::forge::Follower`,
//! a thread of its own), so what the forge asks of a run (failed checks,
//! changes requested) or its end there becomes a "Needs you" item.

use corral::forge::Follower;
use corral::{Home, Store};

/// Starts following them.
pub fn start(home: Home) -> std::io::Result<()> {
    std::thread::Builder::new().name("corral-pulls".into()).spawn(move || {
        let mut follower = Follower::default();
        loop {
            let next = match Store::open(&home) {
                Ok(mut store) => follower.look_due(&mut store),
                Err(e) => {
                    tracing::warn!("cannot follow pull requests: {e}");
                    corral::forge::LOOK_EVERY
                }
            };
            std::thread::sleep(next);
        }
    })?;
    Ok(())
}
