//! What needs the user's word, and their answer, wherever it comes from
//! (a notification's button, the window, the CLI, MCP).
//!
//! Today that is a budget reached: one ask per budget, whose runs are all
//! paused for it ("lead paused: budget of $2.00 reached · 3 runs paused"),
//! answered with "Allow $2 more" (the budget raised by what it was
//! launched with, however often it was raised; every run paused for it
//! going on) or "Stop" (the budget's run aborted, with the runs it
//! launched). An answer acts once: a second one finds nothing paused and
//! says so.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cost::budget::{Budget, BudgetChange, Crossing};
use crate::store::{Store, StoreError};
use crate::upkeep::heal::HealError;
use crate::upkeep::queue::ShepherdCommand;
use crate::verbs::pause::PauseError;

/// A budget reached, waiting for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// The budget crossed (its owner is the run whose budget it is).
    pub crossing: Crossing,
    /// The owner's preset.
    pub preset: String,
    /// The runs paused for it, oldest first.
    pub paused: Vec<String>,
    /// What "Allow more" adds: the budget the run was launched with.
    pub more: Budget,
    /// When its first run paused for it: this ask, not an earlier one at
    /// the same budget (a run resumed without more, paused again).
    pub since: String,
}

/// The user's answer to an [`Ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Raise the budget by [`Ask::more`]: every run paused for it goes on.
    AllowMore,
    /// Abort the budget's run, and the runs it launched.
    Stop,
}

/// Why an answer did not act.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The store failed.
    #[error(transparent)]
    Heal(#[from] HealError),
    /// The runs could not be resumed.
    #[error(transparent)]
    Pause(#[from] PauseError),
    /// Nothing is paused for that budget any more (answered elsewhere, or
    /// the runs ended).
    #[error("nothing waits for run {0}'s budget any more: it was answered already, or its runs ended")]
    Answered(String),
}

impl From<StoreError> for AnswerError {
    fn from(e: StoreError) -> Self {
        AnswerError::Heal(e.into())
    }
}

impl Ask {
    /// The run whose budget it is.
    pub fn owner(&self) -> &str {
        &self.crossing.owner
    }

    /// "Allow $2.00 more", the button's words.
    pub fn allow_words(&self) -> String {
        format!("Allow {} more", self.more.words())
    }

    /// The notification's title.
    pub fn summary(&self) -> String {
        format!("⏸ {} paused: budget reached", self.preset)
    }

    /// The notification's body.
    pub fn body(&self) -> String {
        let n = self.paused.len();
        let runs = if n == 1 { "1 run waits".to_string() } else { format!("{n} runs wait") };
        format!("{}. {runs} for your word.", capitalised(&self.crossing.words(self.owner())))
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Every budget reached whose runs wait, one ask per budget, oldest first.
pub fn pending(store: &Store) -> Result<Vec<Ask>, StoreError> {
    let mut asks: BTreeMap<String, Ask> = BTreeMap::new();
    for id in store.all_paused_for_budget()? {
        let Some(crossing) = store.budget_crossed(&id)? else { continue };
        if let Some(ask) = asks.get_mut(&crossing.owner) {
            ask.paused.push(id);
            continue;
        }
        let preset = store.run(&crossing.owner)?.preset;
        let more = crossing.more();
        let since = store.run(&id)?.paused_at.unwrap_or_default();
        asks.insert(crossing.owner.clone(), Ask { crossing, preset, paused: vec![id], more, since });
    }
    Ok(asks.into_values().collect())
}

/// Answers the ask of run `owner`'s budget, once: a second answer (from
/// another device, a second click) finds nothing waiting.
pub fn answer(store: &mut Store, owner: &str, answer: Answer, shepherd: &ShepherdCommand) -> Result<(), AnswerError> {
    let Some(ask) = pending(store)?.into_iter().find(|a| a.owner() == owner) else {
        return Err(AnswerError::Answered(owner.to_string()));
    };
    match answer {
        Answer::AllowMore => {
            let first = &ask.paused[0];
            crate::verbs::pause::resume(store, first, Some(BudgetChange::More(ask.more)), Duration::ZERO, shepherd)?;
        }
        Answer::Stop => {
            crate::verbs::abort::abort(store, owner, Duration::ZERO, shepherd)?;
        }
    }
    Ok(())
}
