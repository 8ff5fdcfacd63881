//! A pause followed by the loop: asked in the store (by `corral pause`, the
//! window, or a budget crossed), the run's processes frozen and its slot
//! handed on; a resume thaws them and says how long the run was paused.

use std::time::{Duration, Instant};

use super::{round_ms, Supervisor};
use crate::adapter::EventKind;
use crate::shepherd::freeze::{self, Frozen};
use crate::shepherd::ShepherdError;

impl Supervisor {
    /// Pauses or resumes the run as the store asks: freezes every process
    /// of the run and frees its slot, or takes a slot back (ahead of the
    /// queue; until one is free the run stays paused) and thaws them. The
    /// turn's clocks do not count the pause.
    pub(super) fn follow_pause(&mut self) -> Result<(), ShepherdError> {
        let wanted = self.store.pause_requested(&self.run_id)?;
        if !self.clock.is_paused() {
            if wanted && !self.clock.turn_is_over() && !self.recorder.is_committed() {
                self.pause("paused: every process of the run is frozen")?;
            }
        } else if !wanted && self.store.resume_paused(&self.run_id, self.config.max_parallel)? {
            self.cleanup.freeze(false);
            let paused = self.clock.resume(Instant::now());
            let note = format!("resumed after {} paused", humantime::format_duration(round_ms(paused)));
            self.note_event(EventKind::System, note)?;
        }
        Ok(())
    }

    /// Freezes the run and records it paused (see `freeze`), saying `why`
    /// in its transcript.
    pub(super) fn pause(&mut self, why: &str) -> Result<(), ShepherdError> {
        self.flush_events()?;
        match freeze::freeze(&mut self.store, &mut self.cleanup, &self.run_id)? {
            Frozen::Paused => {
                self.clock.pause(Instant::now());
                self.note_event(EventKind::System, why.to_string())?;
                // Its slot is free now: hand it on at once.
                self.heal_if_due(Duration::ZERO);
            }
            Frozen::NotPaused => {}
            Frozen::GaveUp => {
                let note = "pause given up: the store stayed locked each time the run was frozen";
                self.note_event(EventKind::System, note.into())?;
            }
        }
        Ok(())
    }
}
