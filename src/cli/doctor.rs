//! `corral doctor [--json]`: what works on this machine and what to do
//! about what does not (see `corral::doctor`). Exit 0 unless something
//! fails (warnings are not failures).

use std::io::Write;

use corral::doctor::{self, Level, Report};
use corral::Home;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(home: &Home, json: bool, out: &mut impl Write) -> anyhow::Result<i32> {
    let report = doctor::examine(home);
    if json {
        super::print_json(out, &report)?;
    } else {
        print(&report, out)?;
    }
    Ok(if report.worst == Level::Fail { 1 } else { 0 })
}

fn print(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    let colour = super::colour::wanted();
    let width = report.findings.iter().map(|f| f.check.chars().count()).max().unwrap_or(0).min(28);
    let mut area = "";
    for finding in &report.findings {
        if finding.area != area {
            area = finding.area;
            writeln!(out, "{area}")?;
        }
        let word = format!("{:<4}", finding.level.word());
        let word = if colour { super::colour::level(&word, finding.level) } else { word };
        writeln!(out, "  {word}  {:<width$}  {}", finding.check, finding.detail)?;
        if let Some(fix) = &finding.fix {
            writeln!(out, "        {:<width$}  → {fix}", "")?;
        }
    }
    let count = |level: Level| report.findings.iter().filter(|f| f.level == level).count();
    writeln!(
        out,
        "\n{} failing, {} to look at, {} ok ({} ms)",
        count(Level::Fail),
        count(Level::Warn),
        count(Level::Ok),
        report.took_ms
    )
}
