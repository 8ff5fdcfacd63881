//! Budgets in the store: each run's budget, the spend its shepherd writes
//! live as the agent reports it, and whether a run's tree has crossed the
//! budget of the run itself or of a run that launched it.

use rusqlite::{params, OptionalExtension};

use super::{Doing, Store, StoreError};
use crate::cost::budget::{Budget, Crossing, OnBudget, Spent};
use crate::run::PauseReason;
use crate::run::{RunStatus, Usage};

/// A run's budget row: its parent, its budget, what crossing it does.
struct Owner {
    parent: Option<String>,
    budget: Budget,
    /// What "Allow more" adds: the budget it was launched with.
    step: Budget,
    on_budget: OnBudget,
}

impl Store {
    /// Records what run `id` has spent so far, as its agent reports it
    /// live (the outcome, when committed, writes the final figures).
    pub fn record_spend(
        &mut self,
        id: &str,
        usage: Usage,
        cost_usd: Option<f64>,
        estimated: bool,
    ) -> Result<(), StoreError> {
        self.write("recording what a run spent so far", |tx| {
            tx.execute(
                "UPDATE runs SET input_tokens = ?2, output_tokens = ?3, cache_read_tokens = ?4,
                   cache_write_tokens = ?5, cost_usd = ?6, cost_estimated = ?7
                 WHERE id = ?1 AND completed_at IS NULL",
                params![
                    id,
                    usage.input_tokens as i64,
                    usage.output_tokens as i64,
                    usage.cache_read_tokens as i64,
                    usage.cache_write_tokens as i64,
                    cost_usd,
                    estimated
                ],
            )?;
            Ok(())
        })
    }

    /// The nearest budget crossed by run `id`'s spend: its own (with its
    /// child runs), else that of the run that launched it, and so on up.
    pub fn budget_crossed(&self, id: &str) -> Result<Option<Crossing>, StoreError> {
        self.up_the_budgets(id, |owner, over, spent| {
            Crossing::is_crossed(&over.budget, &spent).then_some(Crossing {
                owner: owner.to_string(),
                budget: over.budget,
                step: over.step,
                spent,
                on_budget: over.on_budget,
            })
        })
    }

    /// What run `id` may still spend under every budget over it (its own,
    /// and those of the runs above it), the least of each; `None` if no
    /// budget covers it. Work it starts where this store cannot hold it (a
    /// run on another host) is given this as its own budget.
    pub fn budget_left(&self, id: &str) -> Result<Option<Budget>, StoreError> {
        let mut left: Option<Budget> = None;
        self.up_the_budgets(id, |_, over, spent| {
            let here = Budget {
                usd: over.budget.usd.map(|u| (u - spent.usd).max(0.0)),
                tokens: over.budget.tokens.map(|t| t.saturating_sub(spent.tokens)),
            };
            left = Some(left.map_or(here, |left| left.least(&here)));
            None::<()>
        })?;
        Ok(left)
    }

    /// Hands `each` every budget over run `id`, nearest first (the run that
    /// has it, its budget, what that run's tree spent), until it returns
    /// something: that is the answer.
    fn up_the_budgets<T>(
        &self,
        id: &str,
        mut each: impl FnMut(&str, &Owner, Spent) -> Option<T>,
    ) -> Result<Option<T>, StoreError> {
        let mut at = Some(id.to_string());
        // A parent chain is short; the bound only guards a corrupt cycle.
        for _ in 0..64 {
            let Some(run) = at.take() else { break };
            let Some(owner) = self.owner(&run)? else { break };
            if !owner.budget.is_unlimited() {
                if let Some(found) = each(&run, &owner, self.tree_spent(&run)?) {
                    return Ok(Some(found));
                }
            }
            at = owner.parent;
        }
        Ok(None)
    }

    /// The budget run `id` has, if any (not those of runs above it).
    pub fn budget_of(&self, id: &str) -> Result<Option<Budget>, StoreError> {
        Ok(self.owner(id)?.map(|o| o.budget).filter(|b| !b.is_unlimited()))
    }

    /// The budget run `id` was launched with, if any (what it has now may
    /// have been raised since): a relaunch starts from it.
    pub fn launch_budget_of(&self, id: &str) -> Result<Option<Budget>, StoreError> {
        Ok(self.owner(id)?.map(|o| o.step).filter(|b| !b.is_unlimited()))
    }

    /// Gives run `id` the budget `to` (a raise the user allowed) if its
    /// budget is still `from`: false if someone changed it meanwhile, so
    /// two answers to one ask raise it once.
    pub fn change_budget(&mut self, id: &str, from: &Budget, to: &Budget) -> Result<bool, StoreError> {
        self.write("changing a run's budget", |tx| {
            let n = tx.execute(
                "UPDATE runs SET budget_usd = ?4, budget_tokens = ?5
                 WHERE id = ?1 AND budget_usd IS ?2 AND budget_tokens IS ?3",
                params![id, from.usd, from.tokens.map(|t| t as i64), to.usd, to.tokens.map(|t| t as i64)],
            )?;
            Ok(n == 1)
        })
    }

    /// Every run paused for a budget, oldest first.
    pub fn all_paused_for_budget(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "SELECT id FROM runs WHERE status = '{}' AND pause_reason = ?1 ORDER BY num",
                RunStatus::Paused
            ))
            .doing("listing runs paused for a budget")?;
        let ids = stmt
            .query_map([PauseReason::Budget.as_str()], |r| r.get(0))
            .doing("listing runs paused for a budget")?
            .collect::<Result<Vec<String>, _>>()
            .doing("listing runs paused for a budget")?;
        Ok(ids)
    }

    /// What run `id` and every run below it have spent, here and on other
    /// hosts (as their stores last said, never below zero), removed since
    /// or not: the `spend` ledger.
    pub fn tree_spent(&self, id: &str) -> Result<Spent, StoreError> {
        self.conn()
            .prepare_cached(
                "WITH RECURSIVE tree(id) AS (
                    SELECT ?1 UNION SELECT s.run_id FROM spend s JOIN tree ON s.parent_id = tree.id)
                 SELECT coalesce(sum(usd), 0.0), coalesce(max(estimated), 0), coalesce(sum(tokens), 0),
                   coalesce(sum(NOT priced AND tokens > 0), 0)
                 FROM spend WHERE run_id IN tree",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id], |r| {
                    Ok(Spent {
                        usd: r.get(0)?,
                        estimated: r.get::<_, i64>(1)? != 0,
                        tokens: r.get::<_, i64>(2)?.max(0) as u64,
                        unpriced_runs: r.get::<_, i64>(3)?.max(0) as u64,
                    })
                })
            })
            .doing("adding up what a run's tree spent")
    }

    /// Runs of `owner`'s tree (itself included) paused for a budget.
    pub fn paused_for_budget(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(&format!(
                "WITH RECURSIVE tree(id) AS (
                    SELECT ?1 UNION SELECT r.id FROM runs r JOIN tree ON r.parent_id = tree.id)
                 SELECT id FROM runs WHERE id IN tree AND status IN {} AND pause_reason = ?2 ORDER BY num",
                RunStatus::sql_list(&[RunStatus::Running, RunStatus::Paused])
            ))
            .doing("listing runs paused for a budget")?;
        let ids = stmt
            .query_map(params![owner, PauseReason::Budget.as_str()], |r| r.get(0))
            .doing("listing runs paused for a budget")?
            .collect::<Result<Vec<String>, _>>()
            .doing("listing runs paused for a budget")?;
        Ok(ids)
    }

    /// Asks run `id` to pause for `reason` (its shepherd's own request):
    /// false if it is not running.
    pub fn request_pause_for(&mut self, id: &str, reason: PauseReason) -> Result<bool, StoreError> {
        self.write("asking a run to pause", |tx| {
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET pause_requested = 1, pause_reason = ?2 WHERE id = ?1 AND status = '{}'",
                    RunStatus::Running
                ),
                params![id, reason.as_str()],
            )?;
            Ok(n == 1)
        })
    }

    fn owner(&self, id: &str) -> Result<Option<Owner>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT parent_id, budget_usd, budget_tokens, on_budget,
                   coalesce(budget_step_usd, budget_usd), coalesce(budget_step_tokens, budget_tokens)
                 FROM runs WHERE id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id], |r| {
                    let tokens = |i| r.get::<_, Option<i64>>(i).map(|t| t.map(|t| t.max(0) as u64));
                    Ok(Owner {
                        parent: r.get(0)?,
                        budget: Budget { usd: r.get(1)?, tokens: tokens(2)? },
                        step: Budget { usd: r.get(4)?, tokens: tokens(5)? },
                        on_budget: r
                            .get::<_, Option<String>>(3)?
                            .and_then(|w| w.parse().ok())
                            .unwrap_or(OnBudget::Pause),
                    })
                })
                .optional()
            })
            .doing("reading a run's budget")
    }
}
