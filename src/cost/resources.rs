//! What a run may use (`limits:` of a preset, `[limits]` of `config.toml`)
//! and what it used (CPU seconds and peak memory of its whole tree).
//!
//! The limits become the run's cgroup limits where the kernel's controller
//! is available (see `process::cgroup`); what cannot be applied is said in
//! the run's containment, and the run starts anyway.

use serde::{Deserialize, Serialize};

/// Limits on a run's whole process tree. `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The limits written `none` (`memory`, `cpu`, `tasks`): in a preset,
    /// they lift `config.toml`'s default instead of leaving it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifted: Vec<String>,
}

impl ResourceLimits {
    /// True if no limit is set (nor lifted).
    pub fn is_empty(&self) -> bool {
        *self == ResourceLimits::default()
    }

    /// True if `key` (`memory`, `cpu`, `tasks`) was written `none`.
    fn is_lifted(&self, key: &str) -> bool {
        self.lifted.iter().any(|k| k == key)
    }

    /// Each limit of `self` (a preset's), else `defaults`' (config.toml's)
    /// unless `self` lifted it; with where each came from, to be said.
    pub fn over(&self, defaults: &ResourceLimits) -> (ResourceLimits, Vec<String>) {
        let mut sources = Vec::new();
        let mut pick = |key: &str, own: Option<u64>, default: Option<u64>| match (own, default) {
            (Some(v), _) => {
                sources.push(format!("{key}: from the preset"));
                Some(v)
            }
            (None, Some(_)) if self.is_lifted(key) => {
                sources.push(format!("{key}: config.toml's default lifted by the preset (none)"));
                None
            }
            (None, Some(v)) => {
                sources.push(format!("{key}: from config.toml [limits]"));
                Some(v)
            }
            (None, None) => None,
        };
        let limits = ResourceLimits {
            memory_bytes: pick("memory", self.memory_bytes, defaults.memory_bytes),
            cpu_percent: pick("cpu", self.cpu_percent.map(u64::from), defaults.cpu_percent.map(u64::from))
                .map(|p| p as u32),
            tasks: pick("tasks", self.tasks, defaults.tasks),
            lifted: Vec::new(),
        };
        (limits, sources)
    }

    /// Reads the `limits:` keys as written (`memory: 4G`, `cpu: 200%`,
    /// `tasks: 512`); `none` or `off` turns one off.
    pub fn parse(written: &WrittenLimits) -> Result<ResourceLimits, BadLimit> {
        let lifted = [("memory", &written.memory), ("cpu", &written.cpu), ("tasks", &written.tasks)]
            .into_iter()
            .filter(|(_, v)| v.as_ref().is_some_and(is_off))
            .map(|(k, _)| k.to_string())
            .collect();
        Ok(ResourceLimits {
            memory_bytes: written.memory.as_ref().map(|v| parse_size("memory", v)).transpose()?.flatten(),
            cpu_percent: written.cpu.as_ref().map(|v| parse_cpu(v, machine_cores())).transpose()?.flatten(),
            tasks: written.tasks.as_ref().map(|v| parse_count("tasks", v)).transpose()?.flatten(),
            lifted,
        })
    }
}

/// This machine's cores: the most CPU a limit can give.
fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
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

/// A CPU limit: `200%`, or cores (`2`, `0.5`), never more than `cores`.
fn parse_cpu(value: &LimitValue, cores: usize) -> Result<Option<u32>, BadLimit> {
    let bad = |how| BadLimit { key: "cpu", text: value.to_string(), how };
    const HOW: &str = "is not a CPU share: write cores (2, 0.5), a percentage (200% is two cores) or none";
    if is_off(value) {
        return Ok(None);
    }
    let percent = match value {
        LimitValue::Number(cores) => cores * 100.0,
        LimitValue::Text(text) => match text.trim().strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map_err(|_| bad(HOW))?,
            None => text.trim().parse::<f64>().map_err(|_| bad(HOW))? * 100.0,
        },
    };
    if !(percent.is_finite() && percent >= 1.0) {
        return Err(bad(HOW));
    }
    if percent > cores as f64 * 100.0 {
        let how = if cores == 1 {
            "is more than this machine's one core: write cores (0.5) or a percentage (50%)"
        } else {
            "is more cores than this machine has: write cores (2 is two cores) or a percentage (200% is two cores)"
        };
        return Err(bad(how));
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
        let written = WrittenLimits { memory: text("4G"), cpu: text("100%"), tasks: Some(LimitValue::Number(512.0)) };
        let limits = ResourceLimits::parse(&written).unwrap();
        let want =
            ResourceLimits { memory_bytes: Some(4 << 30), cpu_percent: Some(100), tasks: Some(512), lifted: vec![] };
        assert_eq!(limits, want);
        let written = WrittenLimits { memory: text("512MiB"), cpu: Some(LimitValue::Number(0.5)), tasks: text("none") };
        let limits = ResourceLimits::parse(&written).unwrap();
        let want = ResourceLimits {
            memory_bytes: Some(512 << 20),
            cpu_percent: Some(50),
            tasks: None,
            lifted: vec!["tasks".to_string()],
        };
        assert_eq!(limits, want);
    }

    #[test]
    fn a_cpu_limit_is_cores_or_a_percentage_and_never_more_than_the_machine() {
        let cpu = |v: LimitValue, cores| parse_cpu(&v, cores);
        assert_eq!(cpu(LimitValue::Number(2.0), 4), Ok(Some(200)));
        assert_eq!(cpu(LimitValue::Text("2".into()), 4), Ok(Some(200)));
        assert_eq!(cpu(LimitValue::Text("200%".into()), 4), Ok(Some(200)));
        // A unit-less "200" is 200 cores, not 200%: refused on 4.
        let e = cpu(LimitValue::Text("200".into()), 4).unwrap_err();
        assert!(e.to_string().contains("more cores than this machine has"), "{e}");
        assert!(cpu(LimitValue::Text("800%".into()), 4).is_err());
        assert!(cpu(LimitValue::Number(2.0), 1).unwrap_err().to_string().contains("one core"));
    }

    #[test]
    fn a_preset_lifts_sets_or_leaves_each_default() {
        let defaults =
            ResourceLimits { memory_bytes: Some(1 << 30), tasks: Some(100), cpu_percent: Some(50), lifted: vec![] };
        let preset = ResourceLimits {
            memory_bytes: None,
            tasks: Some(20),
            cpu_percent: None,
            lifted: vec!["memory".to_string()],
        };
        let (limits, sources) = preset.over(&defaults);
        assert_eq!(
            limits,
            ResourceLimits { memory_bytes: None, tasks: Some(20), cpu_percent: Some(50), lifted: vec![] }
        );
        assert!(
            sources.iter().any(|s| s == "memory: config.toml's default lifted by the preset (none)"),
            "{sources:?}"
        );
        assert!(sources.iter().any(|s| s == "tasks: from the preset"), "{sources:?}");
        assert!(sources.iter().any(|s| s == "cpu: from config.toml [limits]"), "{sources:?}");
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
            assert!(e.to_string().contains("write"), "{e}");
        }
    }
}
