//! Follows the hosts of `config.toml` (`[hosts.NAME]`) while the tray runs,
//! so their runs count in the tray and their endings are announced here
//! (`corral::remote::Fleet`, a thread of its own, asleep until the
//! settings file is written).

use corral::remote::Fleet;
use corral::Home;

/// Starts following the configured hosts.
pub fn start(home: Home) -> std::io::Result<()> {
    std::thread::Builder::new().name("corral-hosts".into()).spawn(move || {
        if let Err(e) = Fleet::new(home).run() {
            tracing::warn!("cannot follow the hosts of config.toml: {e}");
        }
    })?;
    Ok(())
}
