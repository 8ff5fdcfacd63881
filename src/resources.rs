//! What a run may use (`limits:` of a preset, `[limits]` of `config.toml`)
//! and what it used (CPU seconds and peak memory of its whole tree).
//!
//! The limits become the run's cgroup limits where the kernel's controller
//! is available (see `process::cgroup`); what cannot be applied is said in
//! the run's containment, and the run starts anyway.

use serde::{Deserialize, Serialize};

/// Limits on a run's whole process tree. `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// Most memory, in bytes (the OOM killer ends the run past it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Most CPU, in percent of one core (200 = two cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<u32>,
    /// Most processes and threads at once (a fork bomb stops there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
}

impl ResourceLimits {
    /// True if no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == ResourceLimits::default()
    }

    /// Each limit of `self`, else `defaults`'.
    pub fn or(self, defaults: ResourceLimits) -> ResourceLimits {
        ResourceLimits {
            memory_bytes: self.memory_bytes.or(defaults.memory_bytes),
            cpu_percent: self.cpu_percent.or(defaults.cpu_percent),
            tasks: self.tasks.or(defaults.tasks),
        }
    }

    /// Reads the `limits:` keys as written (`memory: 4G`, `cpu: 200%`,
    /// `tasks: 512`); `none` or `off` turns one off.
    pub fn parse(written: &WrittenLimits) -> Result<ResourceLimits, BadLimit> {
        Ok(ResourceLimits {
            memory_bytes: written.memory.as_ref().map(|v| parse_size("memory", v)).transpose()?.flatten(),
            cpu_percent: written.cpu.as_ref().map(parse_cpu).transpose()?.flatten(),
            tasks: written.tasks.as_ref().map(|v| parse_count("tasks", v)).transpose()?.flatten(),
        })
    }
}

/// The `limits:` keys as written in a preset or `config.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WrittenLimits {
    /// `4G`, `512M`, `1.5G`, or bytes.
    pub memory: Option<LimitValue>,
    /// `200%`, or a number of cores (`2`, `0.5`).
    pub cpu: Option<LimitValue>,
    /// A number of processes and threads.
    pub tasks: Option<LimitValue>,
}

/// One limit as written: a number or a text.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LimitValue {
    /// A plain number.
    Number(f64),
    /// A text such as `4G` or `200%`.
    Text(String),
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitValue::Number(n) => write!(f, "{n}"),
            LimitValue::Text(t) => f.write_str(t),
        }
    }
}

/// A limit that cannot be read, with how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`limits.{key}: {text}` {how}")]
pub struct BadLimit {
    /// Which limit.
    pub key: &'static str,
    /// What was written.
    pub text: String,
    /// How to write it.
    pub how: &'static str,
}

fn is_off(value: &LimitValue) -> bool {
    matches!(value, LimitValue::Text(t) if matches!(t.trim(), "none" | "off" | "max"))
}

pub(crate) fn parse_size(key: &'static str, value: &LimitValue) -> Result<Option<u64>, BadLimit> {
    let bad = || BadLimit { key, text: value.to_string(), how: "is not a size: write e.g. 4G, 512M or none" };
    if is_off(value) {
        return Ok(None);
    }
    let (number, unit) = match value {
        LimitValue::Number(n) => (*n, 1u64),
        LimitValue::Text(text) => {
            let text = text.trim();
            let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
            let unit = match text[split..].trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                _ => return Err(bad()),
            };
            (text[..split].parse::<f64>().map_err(|_| bad())?, unit)
        }
    };
    let bytes = number * unit as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(bad());
    }
    Ok(Some(bytes as u64))
}

fn parse_cpu(value: &LimitValue) -> Result<Option<u32>, BadLimit> {
    let bad = || BadLimit {
        key: "cpu",
        text: value.to_string(),
        how: "is not a CPU share: write e.g. 200% (two cores), 0.5 or none",
    };
    if is_off(value) {
        return Ok(None);
    }
    let percent = match value {
        LimitValue::Number(cores) => cores * 100.0,
        LimitValue::Text(text) => match text.trim().strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map_err(|_| bad())?,
            None => text.trim().parse::<f64>().map_err(|_| bad())? * 100.0,
        },
    };
    if !(percent.is_finite() && (1.0..=100_000.0).contains(&percent)) {
        return Err(bad());
    }
    Ok(Some(percent.round() as u32))
}

fn parse_count(key: &'static str, value: &LimitValue) -> Result<Option<u64>, BadLimit> {
    let bad = || BadLimit { key, text: value.to_string(), how: "is not a count: write e.g. 512 or none" };
    if is_off(value) {
        return Ok(None);
    }
    let n = match value {
        LimitValue::Number(n) => *n,
        LimitValue::Text(t) => t.trim().parse::<f64>().map_err(|_| bad())?,
    };
    if !(n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n < 1e12) {
        return Err(bad());
    }
    Ok(Some(n as u64))
}

/// What a run's whole process tree used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU time, user and system, of every process of the run.
    pub cpu_seconds: f64,
    /// The most memory the run's processes held at once, where the kernel
    /// measures it (a cgroup with a memory controller).
    pub memory_peak_bytes: Option<u64>,
}

/// How a run's processes are held together, recorded with the run (the
/// reconciler empties what a dead shepherd left by it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Containment {
    /// The run's cgroup v2 folder; `None` where none could be made (the
    /// process tree and the environment are followed instead).
    pub cgroup: Option<String>,
    /// Its cgroup v1 folders, for limits on a hybrid system.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub v1: Vec<String>,
    /// What was said: each limit applied or not and why, or why there is
    /// no cgroup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Containment {
    /// A run followed by its process tree, because no cgroup can be made.
    pub fn process_tree(why: &str) -> Containment {
        Containment {
            cgroup: None,
            v1: Vec::new(),
            notes: vec![format!(
                "no cgroup ({why}): the run's processes are followed by process tree and environment, and a \
                 process that leaves both while its shepherd is dead can escape; limits, pause by freezing and \
                 peak memory need a writable cgroup v2 (run as root, or in a delegated subtree)"
            )],
        }
    }

    /// `cgroup` or `process tree`: how the run is held, in one word or two.
    pub fn mechanism(&self) -> &'static str {
        if self.cgroup.is_some() {
            "cgroup"
        } else {
            "process tree"
        }
    }
}

/// `4.0 GiB`, `512 MiB`, `900 KiB`: sizes as people read them.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Option<LimitValue> {
        Some(LimitValue::Text(t.to_string()))
    }

    #[test]
    fn reads_limits_as_people_write_them() {
        let written = WrittenLimits { memory: text("4G"), cpu: text("200%"), tasks: Some(LimitValue::Number(512.0)) };
        let limits = ResourceLimits::parse(&written).unwrap();
        assert_eq!(limits, ResourceLimits { memory_bytes: Some(4 << 30), cpu_percent: Some(200), tasks: Some(512) });
        let written = WrittenLimits { memory: text("512MiB"), cpu: Some(LimitValue::Number(0.5)), tasks: text("none") };
        let limits = ResourceLimits::parse(&written).unwrap();
        assert_eq!(limits, ResourceLimits { memory_bytes: Some(512 << 20), cpu_percent: Some(50), tasks: None });
    }

    #[test]
    fn a_limit_that_makes_no_sense_says_how_to_write_it() {
        for (written, key) in [
            (WrittenLimits { memory: text("lots"), ..Default::default() }, "memory"),
            (WrittenLimits { cpu: text("fast"), ..Default::default() }, "cpu"),
            (WrittenLimits { tasks: Some(LimitValue::Number(-3.0)), ..Default::default() }, "tasks"),
            (WrittenLimits { memory: text("1e400"), ..Default::default() }, "memory"),
        ] {
            let e = ResourceLimits::parse(&written).unwrap_err();
            assert_eq!(e.key, key);
            assert!(e.to_string().contains("write e.g."), "{e}");
        }
    }
}
