//! A run's sandbox widened while it runs (`corral allow`): hosts at once
//! through its proxy, paths from the next turn.

use super::Supervisor;
use crate::adapter::EventKind;
use crate::shepherd::{OsDoing, ShepherdError};

impl Supervisor {
    /// Widens the run's sandbox as `corral allow` asked: hosts reachable at
    /// once, paths writable from the next turn on.
    pub(super) fn follow_allows(&mut self) -> Result<(), ShepherdError> {
        let launch = self.session.launch_mut();
        let Some((sandbox, _)) = &launch.sandbox else { return Ok(()) };
        let widening = self.store.sandbox_allows(&self.run_id)?;
        let widened = sandbox.widened(&widening);
        if &widened == sandbox {
            return Ok(());
        }
        if let Some(proxy) = &launch.proxy {
            for host in &widening.hosts {
                proxy.allow(host);
            }
        }
        if let Some((sandbox, _)) = &mut launch.sandbox {
            *sandbox = widened;
        }
        if launch.proxy.is_none() {
            // A run that had no network gets its way out from the next turn.
            launch.start_proxy().doing("starting the sandbox's proxy")?;
        }
        let note = format!(
            "sandbox widened: {}",
            widening.entries().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        );
        self.note_event(EventKind::System, note)
    }
}
