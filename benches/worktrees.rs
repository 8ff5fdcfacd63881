//! Worktree benchmark: prints figures, asserts nothing.
//!
//! `cargo bench --bench worktrees` measures, on a repository of 10,000
//! files: a run's worktree created and its agent started (from the run
//! getting its slot to its agent running; no `setup`), and `corral diff`
//! (`--stat`, and the whole diff) on a run that changed 1,000 files; then
//! `corral merge` (squash) of runs that changed 1, 100 and 20,000 files,
//! three of each.
//!
//! Set CORRAL_BENCH_RUNS to change the number of samples (10).

mod harness;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use harness::{fake_agent, report, AGENT_MODE};

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=B", "-c", "user.email=b@b"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn corral(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_corral")).args(args).current_dir(cwd).env("CORRAL_HOME", home).output();
    let out = out.unwrap();
    assert!(out.status.success(), "corral {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn main() {
    if std::env::var_os(AGENT_MODE).is_some() {
        fake_agent();
        return;
    }
    let samples: usize = std::env::var("CORRAL_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let root = tempfile::tempdir().unwrap();
    let (home, repo) = (root.path().join("home"), root.path().join("repo"));
    std::fs::create_dir_all(repo.join(".corral/presets")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for dir in 0..100 {
        let d = repo.join(format!("src/m{dir}"));
        std::fs::create_dir_all(&d).unwrap();
        for file in 0..100 {
            std::fs::write(d.join(format!("f{file}.rs")), format!("// file {dir}/{file}\nfn f() {{}}\n")).unwrap();
        }
    }
    std::fs::write(repo.join(".gitignore"), ".corral/\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "10k files"]);
    let preset = |name: &str, argv: &str| {
        let text = format!("---\nname: {name}\ndescription: b\nagent: command\nworktree: true\ncommand: {argv}\n---\n");
        std::fs::write(repo.join(format!(".corral/presets/{name}.md")), text).unwrap();
    };
    preset("noop", "[\"true\"]");
    preset("touch", "[sh, -c, 'for d in src/m?; do for f in $d/f*.rs; do echo changed >> $f; done; done']");
    // A project's command presets run once trusted.
    corral(&home, &repo, &["presets", "trust"]);
    println!("Corral worktree benchmark (10,000-file repository, {samples} samples)");

    let mut started = Vec::new();
    for _ in 0..samples {
        let id = corral(&home, &repo, &["launch", "noop", "x"]).trim().to_string();
        corral(&home, &repo, &["wait", &id]);
        let run: serde_json::Value = serde_json::from_str(&corral(&home, &repo, &["show", &id, "--json"])).unwrap();
        let at = |key: &str| chrono::DateTime::parse_from_rfc3339(run[key].as_str().unwrap()).unwrap();
        started.push((at("started_at") - at("promoted_at")).num_microseconds().unwrap() as f64 / 1000.0);
    }
    report("run promoted -> worktree created and agent running (ms)", &mut started);

    let id = corral(&home, &repo, &["launch", "touch", "x"]).trim().to_string();
    corral(&home, &repo, &["wait", &id]);
    let stat = corral(&home, &repo, &["diff", &id, "--stat"]);
    assert!(stat.contains("1000 files changed"), "{}", stat.lines().last().unwrap_or_default());
    for (what, args) in [("corral diff --stat", vec!["diff", &id, "--stat"]), ("corral diff", vec!["diff", &id])] {
        let mut times = Vec::new();
        for _ in 0..samples {
            let t = Instant::now();
            corral(&home, &repo, &args);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        report(&format!("{what} on a 1,000-file change (ms, whole command)"), &mut times);
    }
    corral(&home, &repo, &["discard", &id]);

    // Merges: each sample a run of its own, writing files of its own.
    preset(
        "writes",
        "[sh, -c, 'mkdir -p \"out/$MERGE_SAMPLE\" && cd \"out/$MERGE_SAMPLE\" && seq \"$MERGE_FILES\" | awk \"{f=\\\"f\\\" \\$0; print \\$0 > f; close(f)}\"']",
    );
    corral(&home, &repo, &["presets", "trust"]);
    for files in [1, 100, 20_000] {
        let mut times = Vec::new();
        for sample in 0..3 {
            let launched = Command::new(env!("CARGO_BIN_EXE_corral"))
                .args(["launch", "writes", "x"])
                .current_dir(&repo)
                .env("CORRAL_HOME", &home)
                .env("MERGE_FILES", files.to_string())
                .env("MERGE_SAMPLE", format!("{files}-{sample}"))
                .output()
                .unwrap();
            let id = String::from_utf8(launched.stdout).unwrap().trim().to_string();
            corral(&home, &repo, &["wait", &id]);
            let t = Instant::now();
            corral(&home, &repo, &["merge", &id]);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            corral(&home, &repo, &["discard", &id]);
        }
        report(&format!("corral merge of a run that changed {files} files (ms, whole command)"), &mut times);
    }
}
