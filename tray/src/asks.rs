//! What waits for the user, on the desktop: a budget reached (one
//! notification per budget, with "Allow $2 more" and "Stop", taken back the
//! moment it is answered anywhere: a button, the window, the CLI, a parent
//! agent over MCP), runs paused at a usage limit (one notification per
//! limit, however many runs it paused), and what the forge asks of a run's
//! pull request or its end there (one notification per ask).

use std::collections::BTreeSet;

use corral::attention::ask::Answer;
use corral::store::StoreError;
use corral::upkeep::queue::ShepherdCommand;
use corral::Store;

use crate::notify::Herald;

/// The asks on the desktop: the run whose budget each asks about, with
/// that budget (a budget raised and reached again between two looks is a
/// new ask, in place of the old). Runtime state only: a tray that starts
/// asks again what still waits.
#[derive(Debug, Default)]
pub struct Asking {
    shown: BTreeSet<(String, String)>,
    /// Usage limits (agent and reset time) and pull requests' asks and
    /// ends said: one notification each, however many runs a limit paused.
    notes_said: BTreeSet<String>,
}

impl Asking {
    /// Shows what newly waits (unless "Do not disturb" is on) and takes
    /// back what no longer does.
    pub fn follow(&mut self, store: &Store, herald: &Herald, quiet: bool) -> Result<(), StoreError> {
        let pending = corral::attention::ask::pending(store)?;
        let key = |ask: &corral::attention::ask::Ask| (ask.owner().to_string(), ask.crossing.budget.spec());
        let waiting: BTreeSet<(String, String)> = pending.iter().map(key).collect();
        let owners: BTreeSet<&String> = waiting.iter().map(|(owner, _)| owner).collect();
        for (answered, _) in self.shown.difference(&waiting) {
            if !owners.contains(answered) {
                herald.withdraw(answered);
            }
        }
        self.shown.retain(|shown| waiting.contains(shown));
        let mut notes = corral::attention::announce::usage_limits(store)?;
        notes.extend(corral::attention::announce::pull_requests(store)?);
        self.notes_said.retain(|key| notes.iter().any(|(k, _)| k == key));
        if !quiet {
            for (key, note) in notes {
                if self.notes_said.insert(key) {
                    herald.announce(note, Vec::new());
                }
            }
            for ask in pending {
                // A new budget of the same run replaces its old ask.
                if self.shown.insert(key(&ask)) {
                    herald.ask(ask);
                }
            }
        }
        Ok(())
    }
}

/// A button's answer, acted on at once; what goes wrong is shown.
pub fn answer(owner: &str, answer: Answer) {
    let acted = (|| -> anyhow::Result<()> {
        let home = corral::Home::from_env()?;
        let shepherd = ShepherdCommand::lightest()?;
        let mut store = corral::upkeep::heal::open_healed(&home, &shepherd)?;
        corral::attention::ask::answer(&mut store, owner, answer, &shepherd)?;
        Ok(())
    })();
    if let Err(e) = acted {
        tracing::warn!("answering the ask of run {owner}'s budget: {e}");
        crate::notify::problem(&e.to_string());
    }
}
