//! Keeping a run's budget: what it spent is written live as its agent
//! reports it, message by message, and the moment its tree crosses a
//! budget (its own, or that of a run that launched it) the supervisor
//! freezes it and the user is asked, or stops it (`on_budget: stop`).

use crate::adapter::Report;
use crate::cost::budget::Crossing;
use crate::run::Usage;
use crate::store::{Store, StoreError};

/// What the agent had reported when last looked at. Runtime state only.
#[derive(Debug, Default)]
pub(super) struct Spending {
    last: Option<(Usage, Option<f64>)>,
    /// The "dollars cannot be counted" note was written.
    unpriced_said: bool,
}

/// What a change of spend came to.
#[derive(Debug, Default)]
pub(super) struct Looked {
    /// The budget crossed, if one is.
    pub crossing: Option<Crossing>,
    /// Something to say in the transcript once (a model the price table
    /// does not know, under a budget in dollars).
    pub note: Option<String>,
}

impl Spending {
    /// If `report`'s spend changed since last time: records it in the store
    /// (priced by the table when the agent reports no cost) and looks at
    /// the budgets that cover run `id`.
    pub fn look(
        &mut self,
        store: &mut Store,
        id: &str,
        report: &Report,
        model: Option<&str>,
    ) -> Result<Looked, StoreError> {
        let now = (report.usage, report.cost_usd);
        if self.last == Some(now) || (self.last.is_none() && report.usage.total() == 0 && report.cost_usd.is_none()) {
            return Ok(Looked::default());
        }
        self.last = Some(now);
        let mut priced = report.clone();
        let estimated = crate::cost::price::complete(&mut priced, model) || priced.cost_estimated;
        store.record_spend(id, priced.usage, priced.cost_usd, estimated)?;
        let crossing = store.budget_crossed(id)?;
        let mut note = None;
        if priced.cost_usd.is_none() && !self.unpriced_said {
            if let Some(budget) = self.dollar_budget(store, id)? {
                self.unpriced_said = true;
                let model = priced.resolved_model.as_deref().or(model).unwrap_or("(not said)");
                note = Some(format!(
                    "the budget's dollars ({budget}) cannot be counted for this run: its agent reports no cost (or $0) and \
                     Corral's price table does not know the model {model}; its tokens still count"
                ));
            }
        }
        Ok(Looked { crossing, note })
    }

    /// The dollars of a budget that covers run `id`, in words, if any does.
    fn dollar_budget(&self, store: &Store, id: &str) -> Result<Option<String>, StoreError> {
        let mut at = Some(store.run(id)?);
        while let Some(run) = at {
            if let Some(usd) = run.budget.and_then(|b| b.usd) {
                return Ok(Some(format!("${usd:.2}")));
            }
            // A parent removed since is no budget.
            at = run.parent_id.and_then(|p| store.run(&p).ok());
        }
        Ok(None)
    }
}
