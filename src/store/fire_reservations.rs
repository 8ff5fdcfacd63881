//! The `fire_reservations` table and a schedule's bounds: what each fire
//! being carried out holds of its schedule's runs per hour and day's
//! budget, taken in one write with what the others hold, and what the
//! schedule's runs spent since (the `spend` ledger).

use rusqlite::params;

use super::{Doing, Store, StoreError};
use crate::run::RunStatus;

/// What a fire asks of its schedule's bounds (see [`Store::reserve_fire`]).
#[derive(Debug, Clone)]
pub struct FireAsk<'a> {
    /// The runs it would launch.
    pub wanted: usize,
    /// `max_runs_per_hour`, if set.
    pub max_per_hour: Option<u32>,
    /// An hour before now.
    pub hour_ago: &'a str,
    /// `budget_per_day`, if set.
    pub daily: Option<crate::cost::budget::Budget>,
    /// The start of today.
    pub day_since: &'a str,
}

/// What a fire was given of its schedule's bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    /// How many runs it may launch.
    pub runs: usize,
    /// The budget each of them is given (with `budget_per_day`).
    pub each: Option<crate::cost::budget::Budget>,
    /// Which bound left nothing, when one did.
    pub short: Option<Short>,
}

/// The bound that left a fire nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// `max_runs_per_hour`: the hour's runs are launched or held.
    Hour,
    /// `budget_per_day`: the day's budget is spent or held.
    Budget,
}

impl Store {
    /// How many runs schedule `name`'s fires launched since `since`.
    pub fn schedule_runs_since(&self, name: &str, since: &str) -> Result<usize, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT count(*) FROM fire_runs f JOIN fires ON fires.id = f.fire
                 WHERE fires.schedule = ?1 AND fires.fired_at >= ?2",
            )
            .and_then(|mut stmt| stmt.query_row(params![name, since], |r| r.get::<_, i64>(0)))
            .map(|n| n as usize)
            .doing("counting a schedule's runs")
    }

    /// What the runs of schedule `name`'s fires since `since` spent.
    pub fn schedule_spent_since(&self, name: &str, since: &str) -> Result<crate::cost::budget::Spent, StoreError> {
        spent_since(self.conn(), name, since).doing("adding up what a schedule's runs spent")
    }

    /// Takes for fire `id` what its schedule's bounds leave, in one write
    /// with what its schedule's other fires being carried out hold: up to
    /// `ask.wanted` runs within `max_runs_per_hour`, and an equal share of
    /// the day's budget left for each. What it takes is held until the
    /// fire is carried out, so a fire beside it never takes the same room.
    pub fn reserve_fire(&mut self, id: i64, ask: &FireAsk<'_>) -> Result<Reserved, StoreError> {
        self.write("taking a fire's share of its schedule's bounds", |tx| {
            let name: String = tx.query_row("SELECT schedule FROM fires WHERE id = ?1", [id], |r| r.get(0))?;
            // What the others being carried out hold and have not launched yet.
            let (mut pending, mut pending_usd, mut pending_tokens) = (0usize, 0.0, 0u64);
            let mut stmt = tx.prepare_cached(
                "SELECT reserved_runs - (SELECT count(*) FROM fire_runs WHERE fire = fires.id),
                   reserved_usd_each, reserved_tokens_each
                 FROM fires WHERE schedule = ?1 AND outcome = 'firing' AND id <> ?2",
            )?;
            let rows = stmt.query_map(params![name, id], |r| {
                Ok((r.get::<_, i64>(0)?.max(0) as usize, r.get::<_, Option<f64>>(1)?, r.get::<_, Option<i64>>(2)?))
            })?;
            for row in rows {
                let (runs, usd, tokens) = row?;
                pending += runs;
                pending_usd += usd.unwrap_or(0.0) * runs as f64;
                pending_tokens += tokens.unwrap_or(0).max(0) as u64 * runs as u64;
            }
            let mut runs = ask.wanted;
            if let Some(max) = ask.max_per_hour {
                let launched: i64 = tx.query_row(
                    "SELECT count(*) FROM fire_runs f JOIN fires ON fires.id = f.fire
                     WHERE fires.schedule = ?1 AND fires.fired_at >= ?2",
                    params![name, ask.hour_ago],
                    |r| r.get(0),
                )?;
                let room = (max as usize).saturating_sub(launched.max(0) as usize + pending);
                if room == 0 {
                    return Ok(Reserved { runs: 0, each: None, short: Some(Short::Hour) });
                }
                runs = runs.min(room);
            }
            let each = match &ask.daily {
                None => None,
                Some(daily) => {
                    let spent = spent_since(tx, &name, ask.day_since)?;
                    // What the schedule's runs still going may yet spend.
                    let (held_usd, held_tokens): (f64, i64) = tx.query_row(
                        &format!(
                            "SELECT coalesce(sum(max(r.budget_usd - coalesce(r.cost_usd, 0.0), 0.0)), 0.0),
                               coalesce(sum(max(r.budget_tokens - (r.input_tokens + r.output_tokens
                                 + r.cache_read_tokens + r.cache_write_tokens), 0)), 0)
                             FROM fire_runs f JOIN fires ON fires.id = f.fire JOIN runs r ON r.id = f.run_id
                             WHERE fires.schedule = ?1 AND r.status IN {}",
                            RunStatus::active_sql()
                        ),
                        [&name],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )?;
                    let taken_tokens =
                        spent.tokens.saturating_add(held_tokens.max(0) as u64).saturating_add(pending_tokens);
                    let Some(left) = daily.left_after(spent.usd + held_usd + pending_usd, taken_tokens) else {
                        return Ok(Reserved { runs: 0, each: None, short: Some(Short::Budget) });
                    };
                    // No more runs than what is left pays one message each
                    // (what one of its runs' messages cost before, at the
                    // most; a token each at the least): a share smaller
                    // than one message would be spent past before any run
                    // is paused.
                    // Before any of its runs said what a message costs, a
                    // message is taken to cost [`FIRST_MESSAGE_USD`] and
                    // [`FIRST_MESSAGE_TOKENS`].
                    let (usd_each, tokens_each) = one_message(tx, &name)?;
                    let mut payable = runs;
                    if let Some(usd) = left.usd {
                        let one = usd_each.filter(|u| *u > 0.0).unwrap_or(FIRST_MESSAGE_USD);
                        payable = payable.min((usd / one).floor() as usize);
                    }
                    if let Some(tokens) = left.tokens {
                        let one = tokens_each.filter(|t| *t > 0).unwrap_or(FIRST_MESSAGE_TOKENS);
                        payable = payable.min((tokens / one) as usize);
                    }
                    if payable == 0 {
                        return Ok(Reserved { runs: 0, each: None, short: Some(Short::Budget) });
                    }
                    runs = payable;
                    let n = runs.max(1);
                    Some(crate::cost::budget::Budget {
                        usd: left.usd.map(|u| u / n as f64),
                        tokens: left.tokens.map(|t| t / n as u64),
                    })
                }
            };
            tx.execute(
                "UPDATE fires SET reserved_runs = ?2, reserved_usd_each = ?3, reserved_tokens_each = ?4 WHERE id = ?1",
                params![id, runs as i64, each.and_then(|b| b.usd), each.and_then(|b| b.tokens).map(|t| t as i64)],
            )?;
            Ok(Reserved { runs, each, short: None })
        })
    }
}

/// What one message is taken to cost before a schedule's runs said: an
/// agent's message with a working context, on a frontier model.
const FIRST_MESSAGE_USD: f64 = 0.25;
/// The same in tokens.
const FIRST_MESSAGE_TOKENS: u64 = 20_000;

/// What one message of schedule `name`'s runs cost at the most, in
/// dollars and in tokens, from its latest runs that reported any (their
/// spend over their messages that spent); `None` before any did.
fn one_message(conn: &rusqlite::Connection, name: &str) -> rusqlite::Result<(Option<f64>, Option<u64>)> {
    conn.prepare_cached(
        "SELECT max(usd / n), max(tokens / n) FROM (
           SELECT s.usd, s.tokens,
             (SELECT count(*) FROM events e WHERE e.run_id = s.run_id AND e.kind = 'usage'
                AND e.text NOT LIKE '0 in / 0 out%') AS n
           FROM spend s
           WHERE s.schedule = ?1 AND (s.usd > 0 OR s.tokens > 0) ORDER BY s.fired_at DESC LIMIT 20)
         WHERE n > 0",
    )?
    .query_row([name], |r| Ok((r.get::<_, Option<f64>>(0)?, r.get::<_, Option<i64>>(1)?.map(|t| t.max(0) as u64))))
}

/// What every run schedule `name`'s fires since `since` caused spent (its
/// own runs and what they launched, here and on hosts, removed since or
/// not: the `spend` ledger), read on `conn` (the store's, or a
/// transaction's).
fn spent_since(conn: &rusqlite::Connection, name: &str, since: &str) -> rusqlite::Result<crate::cost::budget::Spent> {
    conn.prepare_cached(
        "SELECT coalesce(sum(usd), 0.0), coalesce(max(estimated), 0), coalesce(sum(tokens), 0)
         FROM spend WHERE schedule = ?1 AND fired_at >= ?2",
    )?
    .query_row(params![name, since], |r| {
        Ok(crate::cost::budget::Spent {
            usd: r.get(0)?,
            estimated: r.get::<_, i64>(1)? != 0,
            tokens: r.get::<_, i64>(2)?.max(0) as u64,
            unpriced_runs: 0,
        })
    })
}
