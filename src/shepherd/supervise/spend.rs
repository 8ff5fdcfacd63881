//! What the run spends, followed as the agent says it: recorded when it
//! changes, and a budget crossed acted on at once (the run frozen and the
//! user asked, or stopped). Apart from the loop because it is one rule
//! (see `cost::budget`) the loop calls at three moments.

use super::Supervisor;
use crate::adapter::EventKind;
use crate::cost::budget::{Crossing, OnBudget};
use crate::run::PauseReason;
use crate::shepherd::clock::StopCause;
use crate::shepherd::ShepherdError;

impl Supervisor {
    /// Records what the agent reported spending, if it changed, and acts
    /// on a budget it crossed: freezes the run and asks (see `budget`), or
    /// stops it (`on_budget: stop`).
    pub(super) fn keep_budget(&mut self) -> Result<(), ShepherdError> {
        if self.clock.is_paused() || self.clock.turn_is_over() || self.recorder.is_committed() {
            return Ok(());
        }
        match self.record_spend()? {
            Some(crossing) => self.act_on_crossing(crossing),
            None => Ok(()),
        }
    }

    /// Records what the agent reported spending, if it changed: the budget
    /// it crossed, if one is. Also at a turn's end (an agent that says its
    /// spend only there, Codex or Gemini CLI): the runs it waits for, and
    /// their parents' budgets, see it at once.
    pub(super) fn record_spend(&mut self) -> Result<Option<Crossing>, ShepherdError> {
        let report = self.session.report();
        let model = self.session.launch().model.clone();
        let looked = self.spending.look(&mut self.store, &self.run_id, &report, model.as_deref())?;
        if let Some(note) = looked.note {
            self.note_event(EventKind::System, note)?;
        }
        Ok(looked.crossing)
    }

    /// A new turn's agent has just started: if a budget over the run is
    /// already crossed (by the turn before, or by runs it launched), it is
    /// frozen (or stopped) before it spends, and the user asked, as at a
    /// crossing mid-turn.
    pub(super) fn hold_to_budget(&mut self) -> Result<(), ShepherdError> {
        match self.store.budget_crossed(&self.run_id)? {
            Some(crossing) => self.act_on_crossing(crossing),
            None => Ok(()),
        }
    }

    /// Freezes the run and asks, or stops it, at `crossing`.
    pub(super) fn act_on_crossing(&mut self, crossing: Crossing) -> Result<(), ShepherdError> {
        let words = crossing.words(&self.run_id);
        match crossing.on_budget {
            OnBudget::Stop => self.stop_for(StopCause::Budget(words)),
            OnBudget::Pause => {
                if self.store.request_pause_for(&self.run_id, PauseReason::Budget)? {
                    let id = &self.run_id;
                    let ask = format!(
                        "paused: {words}. Allow more with `corral resume {id} --budget +N` (N more dollars), or stop it with `corral abort {id}`"
                    );
                    self.pause(&ask)?;
                }
                Ok(())
            }
        }
    }
}
