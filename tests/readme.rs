//! The README and the manual, read as a newcomer reads them: the first run
//! is run word for word in a shell (so it cannot drift from what Corral
//! does), the presets it names exist, and every link in the README and
//! `docs/` leads somewhere, with every chapter in the book's summary.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Env;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).expect("README.md")
}

/// The text of the README's section under `## HEADING`, to the next `## `.
fn section(text: &str, heading: &str) -> String {
    let start = text.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("no section {heading:?}"));
    let rest = &text[start + heading.len() + 5..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// The fenced ```sh blocks of `text`, in order.
fn shell_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_first_run_runs_as_written() {
    let env = Env::new();
    let block = shell_blocks(&section(&readme(), "Your first run")).into_iter().next().expect("a first run to type");
    // A user's shell, in the project folder, `corral` on the PATH as
    // start.sh installs it; each command's failure stops the try.
    let out = Command::new("sh")
        .args(["-e", "-c", &block])
        .current_dir(&env.project)
        .env("CORRAL_HOME", &env.home)
        .env("HOME", &env.user_home)
        .env("PATH", format!("{}:{}", env.bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env_remove("CORRAL_RUN_ID")
        .output()
        .expect("sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the README's first run failed:\n{block}\nstdout: {stdout}\nstderr: {stderr}");
    // What the README says each command shows.
    assert!(stdout.contains("hello  "), "`corral ls` lists the run by its preset:\n{stdout}");
    assert!(stdout.lines().any(|l| l.contains(" completed")), "`corral wait` says completed:\n{stdout}");
    assert!(stdout.contains("hello, world"), "`corral show` has its output:\n{stdout}");
    assert!(
        !stdout.contains("tokens") && !stdout.contains("- -> -"),
        "a command's show says no agent's figures:\n{stdout}"
    );
    let runs = env.json(&["ls"]);
    let run = &runs.as_array().expect("runs")[0];
    assert_eq!(run["status"], "completed", "{run}");
    // (Its start is recorded a moment after its process started.)
    assert!(
        common::millis_between(run, "started_at", "completed_at") >= 4500,
        "the README says it takes five seconds (the tray shows it running meanwhile): {run}"
    );
}

#[test]
fn the_presets_the_readme_names_ship() {
    let env = Env::new();
    let listed = env.json(&["presets"]);
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    let text = section(&readme(), "Your first run");
    for name in ["scout", "reviewer", "tests", "lead"] {
        assert!(text.contains(&format!("`{name}`")), "the README names {name}");
        assert!(names.contains(&name), "`corral presets` lists {name}: {names:?}");
    }
    for block in shell_blocks(&text).iter().skip(1) {
        for line in block.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let ["corral", "launch", preset, ..] = words[..] {
                assert!(names.contains(&preset), "the README launches {preset}, which does not ship");
            }
        }
    }
}

/// Every relative link of a markdown file, resolved against its folder.
fn links(file: &Path) -> Vec<(String, PathBuf)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            found.push((target.to_string(), file.parent().unwrap().join(target)));
        }
    }
    found
}

#[test]
fn every_link_of_the_readme_and_the_manual_leads_somewhere() {
    let docs = repo().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).expect("docs/SUMMARY.md");
    for page in &pages {
        let name = page.file_name().unwrap().to_string_lossy();
        if name != "SUMMARY.md" {
            assert!(summary.contains(&format!("]({name})")), "docs/SUMMARY.md leaves out {name}");
        }
    }
    for file in pages.iter().chain([repo().join("README.md"), repo().join("ARCHITECTURE.md")].iter()) {
        for (target, path) in links(file) {
            assert!(path.exists(), "{} links to {target}, which is not there", file.display());
        }
    }
}
