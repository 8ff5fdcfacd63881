//! Budgets: how much a run, with every run it launched, may spend before
//! it is frozen and the user asked (`Allow $2 more` or `Stop`).
//!
//! A budget is written `usd=2,tokens=2M` (or `$2`, `2M tokens`) at launch,
//! `budget: {usd: 2, tokens: 2M}` in a preset, `[budget]` in config.toml.
//! Spend is what the agent reports, live, message by message; Corral's
//! price table only where the agent reports tokens and no cost (an
//! estimate, marked ≈), and a model the table does not know is said, never
//! priced at zero. A run's budget covers its child runs: crossing it
//! pauses whichever run of the tree spends next. Nothing is killed without
//! the user's word, except by `on_budget: stop`.

use serde::{Deserialize, Serialize};

use crate::text::word::word_enum;

/// Dollars left below this are none: a day's shares (a third each) summed
/// back fall either side of zero by rounding, and a run given a millionth
/// of a dollar can do nothing with it.
pub const NOTHING_USD: f64 = 1e-6;

/// How much a run (with its child runs) may spend. A field left `None` is
/// not limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// US dollars, as the agent reports cost (or Corral estimates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Tokens of every kind (input, output, cache reads and writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

word_enum! {
    /// What happens when a run crosses its budget.
    pub enum OnBudget as "on_budget" {
        /// Frozen and the user asked (the default).
        Pause = "pause",
        /// Stopped at once: `aborted` with stop reason `budget`.
        Stop = "stop",
    }
}

/// A budget that cannot be read, with how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("budget `{text}` {why}: write e.g. `$2`, `usd=2,tokens=2M` or `500k tokens`")]
pub struct BadBudget {
    /// What was written.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Budget {
    /// The least of each limit of `self` and `other` (a limit only one
    /// says is kept).
    pub fn least(&self, other: &Budget) -> Budget {
        fn least<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Budget { usd: least(self.usd, other.usd), tokens: least(self.tokens, other.tokens) }
    }

    /// True if nothing is limited.
    pub fn is_unlimited(&self) -> bool {
        self.usd.is_none() && self.tokens.is_none()
    }

    /// Reads `usd=2,tokens=2M`, `$2`, `2`, `2usd`, `2M tokens`, `500k`
    /// (a count with k/M/G is tokens; a plain number is dollars).
    pub fn parse(text: &str) -> Result<Budget, BadBudget> {
        let bad = |why| BadBudget { text: text.to_string(), why };
        let mut budget = Budget::default();
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad("has an empty part"));
            }
            let (key, value) = match part.split_once('=') {
                Some((k, v)) => (Some(k.trim().to_ascii_lowercase()), v.trim()),
                None => (None, part),
            };
            let tokens_word = value.strip_suffix("tokens").or_else(|| value.strip_suffix("tok")).map(str::trim);
            let scaled = value.ends_with(['k', 'K', 'm', 'M', 'g', 'G']);
            let is_tokens = match key.as_deref() {
                Some("usd" | "dollars") => false,
                Some("tokens") => true,
                Some(_) => return Err(bad("names something other than usd or tokens")),
                None => tokens_word.is_some() || scaled,
            };
            if is_tokens {
                let n = count(tokens_word.unwrap_or(value))
                    .ok_or_else(|| bad("has a token count that is not a whole number"))?;
                set(&mut budget.tokens, n, &bad)?;
            } else {
                let usd = dollars(value).ok_or_else(|| bad("is not a sum of dollars or a token count"))?;
                set(&mut budget.usd, usd, &bad)?;
            }
        }
        Ok(budget)
    }

    /// What is left of `self` once `usd` and `tokens` are taken (spent,
    /// or held by runs still going): `None` when a limit has nothing
    /// left (see [`NOTHING_USD`]).
    pub fn left_after(&self, usd: f64, tokens: u64) -> Option<Budget> {
        let left = Budget { usd: self.usd.map(|u| u - usd), tokens: self.tokens.map(|t| t.saturating_sub(tokens)) };
        let nothing = left.usd.is_some_and(|u| u < NOTHING_USD) || left.tokens == Some(0);
        (!nothing).then_some(left)
    }

    /// `self` with `more` added to each limit `more` sets (a limit `self`
    /// does not have stays unlimited: more of nothing is still nothing).
    pub fn raised_by(&self, more: &Budget) -> Budget {
        Budget {
            usd: self.usd.map(|u| u + more.usd.unwrap_or(0.0)),
            tokens: self.tokens.map(|t| t.saturating_add(more.tokens.unwrap_or(0))),
        }
    }

    /// `usd=2,tokens=2000000`: what [`Budget::parse`] reads back exactly
    /// (for a launch on another host).
    pub fn spec(&self) -> String {
        let mut parts = Vec::new();
        if let Some(usd) = self.usd {
            parts.push(format!("usd={usd}"));
        }
        if let Some(tokens) = self.tokens {
            parts.push(format!("tokens={tokens}"));
        }
        parts.join(",")
    }

    /// How much of it `spent` has used, by the limit nearest to being
    /// reached: 0.0 to 1.0 and past it (a meter's fill).
    pub fn used(&self, spent: &Spent) -> f64 {
        let dollars = self.usd.filter(|&usd| usd > 0.0).map(|usd| spent.usd / usd);
        let tokens = self.tokens.filter(|&t| t > 0).map(|t| spent.tokens as f64 / t as f64);
        dollars.into_iter().chain(tokens).fold(0.0, f64::max)
    }

    /// `$2.00 · 2.0M tokens`, for people.
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if let Some(usd) = self.usd {
            parts.push(usd_words(usd));
        }
        if let Some(tokens) = self.tokens {
            parts.push(format!("{} tokens", short_count(tokens)));
        }
        if parts.is_empty() {
            "no limit".to_string()
        } else {
            parts.join(" · ")
        }
    }
}

fn set<T>(slot: &mut Option<T>, value: T, bad: &impl Fn(&'static str) -> BadBudget) -> Result<(), BadBudget> {
    if slot.is_some() {
        return Err(bad("gives the same limit twice"));
    }
    *slot = Some(value);
    Ok(())
}

/// `2`, `$2`, `2.50`, `2usd`: a positive sum of dollars.
fn dollars(text: &str) -> Option<f64> {
    let text = text.trim();
    let text = text.strip_prefix('$').unwrap_or(text);
    let text = text.strip_suffix("usd").or_else(|| text.strip_suffix("USD")).unwrap_or(text).trim();
    let value: f64 = text.parse().ok()?;
    (value > 0.0 && value < 1e9).then_some(value)
}

/// `2000000`, `2M`, `500k`, `1.5M`: a positive whole number of tokens.
fn count(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1e3),
        (i, 'm' | 'M') => (&text[..i], 1e6),
        (i, 'g' | 'G') => (&text[..i], 1e9),
        _ => (text, 1.0),
    };
    let value: f64 = number.trim().replace('_', "").parse().ok()?;
    let tokens = value * scale;
    ((1.0..1e15).contains(&tokens) && tokens.fract() == 0.0).then_some(tokens as u64)
}

/// A count as people read one: 950, 41k, 1.2M. The one rule for the CLI,
/// notifications, `corral top` and the window's commands.
pub fn short_count(n: u64) -> String {
    match n {
        // Exact while a rounding would read as a tenth off (1,999 is not
        // "1k").
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", n / 1_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Dollars in words: cents (`$2.00`), and below a cent as many digits as
/// it takes (`$0.004`), never `$0.00` for a sum that is not nothing.
pub fn usd_words(usd: f64) -> String {
    if usd == 0.0 || usd.abs() >= 0.01 || !usd.is_finite() {
        return format!("${usd:.2}");
    }
    let digits = (-usd.abs().log10()).ceil() as usize + 1;
    let text = format!("{usd:.digits$}");
    format!("${}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// How a budget is changed when the user allows more: `+2` adds two
/// dollars to it, `5` makes it five.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetChange {
    /// Added to the budget as it is (`+2`, `+500k tokens`).
    More(Budget),
    /// The budget from now on (`5`, `usd=5,tokens=3M`).
    To(Budget),
}

impl BudgetChange {
    /// Reads `+2`, `+$2`, `+500k tokens`, or a whole budget.
    pub fn parse(text: &str) -> Result<BudgetChange, BadBudget> {
        match text.trim().strip_prefix('+') {
            Some(more) => Budget::parse(more).map(BudgetChange::More),
            None => Budget::parse(text).map(BudgetChange::To),
        }
    }

    /// `budget` changed so.
    pub fn applied_to(&self, budget: &Budget) -> Budget {
        match self {
            BudgetChange::More(more) => budget.raised_by(more),
            BudgetChange::To(to) => *to,
        }
    }
}

/// A budget as written in a preset or config.toml: `{usd: 2, tokens: 2M}`
/// or one text (`"$2"`, `"usd=2,tokens=2M"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum WrittenBudget {
    /// `budget: "$2"`.
    Text(String),
    /// `budget: 2` (dollars).
    Dollars(f64),
    /// `budget: {usd: 2, tokens: 2M}`.
    Keys {
        /// Dollars.
        #[serde(default)]
        usd: Option<crate::cost::resources::LimitValue>,
        /// Tokens: a number, or `2M`, `500k`.
        #[serde(default)]
        tokens: Option<crate::cost::resources::LimitValue>,
    },
}

impl WrittenBudget {
    /// The budget it says.
    pub fn read(&self) -> Result<Budget, BadBudget> {
        match self {
            WrittenBudget::Text(text) => Budget::parse(text),
            WrittenBudget::Dollars(usd) => Budget::parse(&usd.to_string()),
            WrittenBudget::Keys { usd, tokens } => {
                let mut parts = Vec::new();
                if let Some(usd) = usd {
                    parts.push(format!("usd={usd}"));
                }
                if let Some(tokens) = tokens {
                    parts.push(format!("tokens={tokens}"));
                }
                if parts.is_empty() {
                    return Err(BadBudget { text: "{}".into(), why: "sets neither usd nor tokens" });
                }
                Budget::parse(&parts.join(","))
            }
        }
    }
}

/// What a run's tree has spent, as the store has it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Dollars reported (or estimated) so far.
    pub usd: f64,
    /// Some of it is Corral's estimate (≈).
    pub estimated: bool,
    /// Tokens of every kind.
    pub tokens: u64,
    /// Runs that counted tokens and have no cost, reported or estimated
    /// (a model the price table does not know): their dollars are unknown.
    pub unpriced_runs: u64,
}

impl Spent {
    /// The dollars spent, in words: `$1.20`, `≈$1.20` (partly Corral's
    /// estimate), `at least $1.20` when some run's dollars cannot be
    /// counted (a model the price table does not know), and never `$0.00`
    /// for dollars that were not counted at all.
    pub fn dollars(&self) -> String {
        let approx = if self.estimated { "≈" } else { "" };
        let runs = |n: u64| if n == 1 { "1 run".to_string() } else { format!("{n} runs") };
        match self.unpriced_runs {
            0 => format!("{approx}{}", usd_words(self.usd)),
            n if self.usd > 0.0 => {
                format!("at least {approx}{} (the dollars of {} cannot be counted)", usd_words(self.usd), runs(n))
            }
            n => format!("dollars not counted ({} with no known price)", runs(n)),
        }
    }
}

/// A budget a run's tree has crossed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// The run whose budget it is (the run itself, or one that launched it).
    pub owner: String,
    /// Its budget.
    pub budget: Budget,
    /// What "Allow more" adds to it: the budget it was launched with (a
    /// limit it no longer has is not offered).
    pub step: Budget,
    /// What its tree has spent.
    pub spent: Spent,
    /// What crossing it does.
    pub on_budget: OnBudget,
}

impl Crossing {
    /// What "Allow more" adds: [`Crossing::step`] in the limits the budget
    /// has now, else the budget itself.
    pub fn more(&self) -> Budget {
        let usd = self.budget.usd.map(|now| self.step.usd.filter(|s| *s > 0.0).unwrap_or(now));
        let tokens = self.budget.tokens.map(|now| self.step.tokens.filter(|s| *s > 0).unwrap_or(now));
        Budget { usd, tokens }
    }

    /// "budget of $1.00 reached: $1.20 spent" ("run X's budget …" when
    /// it is not `run`'s own).
    pub fn words(&self, run: &str) -> String {
        let whose = if self.owner == run { "budget".to_string() } else { format!("run {}'s budget", self.owner) };
        let mut spent = Vec::new();
        if self.budget.usd.is_some() {
            spent.push(self.spent.dollars());
        }
        if self.budget.tokens.is_some() {
            spent.push(format!("{} tokens", short_count(self.spent.tokens)));
        }
        format!("{whose} of {} reached: {} spent", self.budget.words(), spent.join(" · "))
    }

    /// True if `spent` is past `budget` in any limit.
    pub fn is_crossed(budget: &Budget, spent: &Spent) -> bool {
        budget.usd.is_some_and(|usd| usd - spent.usd < NOTHING_USD) || budget.tokens.is_some_and(|t| spent.tokens >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_under_a_cent_and_counts_under_ten_thousand_read_exactly() {
        assert_eq!(usd_words(0.004), "$0.004");
        assert_eq!(usd_words(0.0005), "$0.0005");
        assert_eq!(usd_words(0.0), "$0.00");
        assert_eq!(usd_words(2.5), "$2.50");
        assert_eq!(Budget { usd: Some(0.005), tokens: Some(1_999) }.words(), "$0.005 · 1999 tokens");
        assert_eq!(short_count(41_000), "41k");
    }

    #[test]
    fn a_day_given_out_in_thirds_has_nothing_left_however_it_rounds() {
        let day = Budget { usd: Some(1.0), tokens: None };
        let third = 1.0 / 3.0;
        // The shares as runs hold them part-spent, summed in any order.
        let half = 0.5 / 3.0;
        for taken in [third + third + third, 0.1 + (third - 0.1) + third + third, 0.5 + half + half + half] {
            assert_eq!(day.left_after(taken, 0), None, "{taken:e} of $1 taken");
        }
        assert_eq!(day.left_after(0.5, 0).and_then(|b| b.usd), Some(0.5));
        let tokens = Budget { usd: None, tokens: Some(100) };
        assert_eq!(tokens.left_after(0.0, 100), None);
        assert_eq!(tokens.left_after(5.0, 40), Some(Budget { usd: None, tokens: Some(60) }));
    }

    #[test]
    fn budgets_are_read_as_people_write_them() {
        let b = |t: &str| Budget::parse(t).unwrap();
        assert_eq!(b("$2"), Budget { usd: Some(2.0), tokens: None });
        assert_eq!(b("2.5"), Budget { usd: Some(2.5), tokens: None });
        assert_eq!(b("2usd"), Budget { usd: Some(2.0), tokens: None });
        assert_eq!(b("2M tokens"), Budget { usd: None, tokens: Some(2_000_000) });
        assert_eq!(b("500k"), Budget { usd: None, tokens: Some(500_000) });
        assert_eq!(b("usd=2, tokens=1.5M"), Budget { usd: Some(2.0), tokens: Some(1_500_000) });
        assert_eq!(b("tokens=2000"), Budget { usd: None, tokens: Some(2000) });
        let both = b("usd=0.3,tokens=2M");
        assert_eq!(b(&both.spec()), both);
        for wrong in ["", "free", "$-1", "$0", "usd=2,usd=3", "euros=2", "1.5 tokens", "2,", "NaN", "inf"] {
            assert!(Budget::parse(wrong).is_err(), "{wrong} was read");
        }
    }

    #[test]
    fn a_change_is_more_with_a_plus_and_a_new_budget_without() {
        let now = Budget { usd: Some(1.0), tokens: Some(1000) };
        let more = BudgetChange::parse("+2").unwrap();
        assert_eq!(more.applied_to(&now), Budget { usd: Some(3.0), tokens: Some(1000) });
        let to = BudgetChange::parse("usd=5").unwrap();
        assert_eq!(to.applied_to(&now), Budget { usd: Some(5.0), tokens: None });
        assert!(BudgetChange::parse("+").is_err());
    }

    #[test]
    fn a_raise_adds_only_to_limits_that_exist() {
        let budget = Budget { usd: Some(1.0), tokens: None };
        let raised = budget.raised_by(&Budget { usd: Some(2.0), tokens: Some(5) });
        assert_eq!(raised, Budget { usd: Some(3.0), tokens: None });
    }

    #[test]
    fn a_crossing_says_what_was_spent_of_what() {
        let c = Crossing {
            owner: "lead".into(),
            budget: Budget { usd: Some(1.0), tokens: Some(2_000_000) },
            step: Budget { usd: Some(1.0), tokens: Some(2_000_000) },
            spent: Spent { usd: 1.2, estimated: true, tokens: 41_000, unpriced_runs: 0 },
            on_budget: OnBudget::Pause,
        };
        assert_eq!(c.words("lead"), "budget of $1.00 · 2.0M tokens reached: ≈$1.20 · 41k tokens spent");
        assert_eq!(c.words("kid"), "run lead's budget of $1.00 · 2.0M tokens reached: ≈$1.20 · 41k tokens spent");
    }
}
