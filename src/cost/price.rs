//! Estimated cost of a run whose agent reports tokens but no cost (Codex,
//! Gemini CLI, Claude Code with some providers): its usage times the model's
//! prices from `data/prices.json`, shipped with Corral and refreshed from
//! LiteLLM's public price list by `scripts/refresh-prices.sh`. A cost the
//! agent reports always wins; an estimate is marked as one everywhere.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::adapter::Report;
use crate::run::Usage;

/// Prices of one model, in USD per million tokens: input, output, cache
/// read, cache write.
type Prices = [f64; 4];

#[derive(serde::Deserialize)]
struct Table {
    models: HashMap<String, Prices>,
}

static TABLE: LazyLock<HashMap<String, Prices>> = LazyLock::new(|| {
    let table: Table = serde_json::from_str(include_str!("../../data/prices.json")).expect("data/prices.json is valid");
    table.models
});

/// The prices of `model` as an agent names it: exactly, else without a
/// provider prefix (`anthropic/claude-sonnet-4-5`), a context suffix
/// (`claude-opus-4-8[1m]`) or a date (`claude-haiku-4-5-20251001`).
fn prices(model: &str) -> Option<&'static Prices> {
    let model = model.trim().to_ascii_lowercase();
    let bare = model.rsplit('/').next().unwrap_or(&model);
    let bare = bare.split('[').next().unwrap_or(bare);
    let undated = bare.rsplit_once('-').filter(|(_, date)| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()));
    let found =
        [model.as_str(), bare, undated.map_or(bare, |(name, _)| name)].into_iter().find_map(|name| TABLE.get(name));
    found
}

/// What `usage` costs with `model`'s prices, if the table knows the model.
pub fn estimate(model: &str, usage: Usage) -> Option<f64> {
    let [input, output, cache_read, cache_write] = *prices(model)?;
    let cost = (usage.input_tokens as f64 * input
        + usage.output_tokens as f64 * output
        + usage.cache_read_tokens as f64 * cache_read
        + usage.cache_write_tokens as f64 * cache_write)
        / 1e6;
    Some(cost)
}

/// Gives `report` an estimated cost if the agent reported none (or $0) but
/// counted tokens, from the model it used (else the one asked for). Returns true if
/// the cost is an estimate.
pub fn complete(report: &mut Report, asked_model: Option<&str>) -> bool {
    // Tokens said to cost nothing are a price the agent does not know (pi
    // with a custom provider that lists none), not a free run: a budget in
    // dollars would never be reached.
    if report.cost_usd == Some(0.0) && report.usage.total() > 0 {
        report.cost_usd = None;
    }
    if report.cost_usd.is_some() || report.usage.total() == 0 {
        return false;
    }
    let model = report.resolved_model.as_deref().or(asked_model);
    report.cost_usd = model.and_then(|m| estimate(m, report.usage));
    report.cost_usd.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
        }
    }

    #[test]
    fn a_usage_is_priced_by_the_model_however_the_agent_names_it() {
        // claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
        let u = usage(1_000_000, 100_000, 2_000_000, 0);
        let cost = estimate("claude-sonnet-4-5", u).unwrap();
        assert!((cost - (3.0 + 1.5 + 0.6)).abs() < 1e-9, "{cost}");
        for name in ["anthropic/claude-sonnet-4-5", "Claude-Sonnet-4-5", "claude-sonnet-4-5[1m]"] {
            assert_eq!(estimate(name, u), Some(cost), "{name}");
        }
        assert!(estimate("claude-haiku-4-5-20251001", u).is_some());
        assert!(estimate("gemini-2.5-pro", u).is_some() && estimate("gpt-5-codex", u).is_some());
        assert_eq!(estimate("stub-model", u), None, "unknown models get no made-up price");
    }

    #[test]
    fn only_a_missing_cost_is_estimated() {
        let mut reported = Report { cost_usd: Some(0.5), usage: usage(10, 10, 0, 0), ..Report::default() };
        assert!(!complete(&mut reported, Some("gpt-5-codex")));
        assert_eq!(reported.cost_usd, Some(0.5));
        let mut silent = Report { usage: usage(1_000_000, 0, 0, 0), ..Report::default() };
        assert!(complete(&mut silent, Some("gpt-5-codex")));
        assert_eq!(silent.cost_usd, Some(1.25));
        let mut nothing = Report::default();
        assert!(!complete(&mut nothing, Some("gpt-5-codex")), "no tokens, no cost");
        assert_eq!(nothing.cost_usd, None);
    }
}
