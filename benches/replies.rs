//! Reply benchmark: prints figures, asserts nothing.
//!
//! `cargo bench --bench replies` measures `corral reply` on a run that
//! ended: from the command's start to the agent of the new turn running
//! (the conversing fake Claude, a shell script, marks its own start), and
//! to the run ended again. The fake starts in about a millisecond, so the
//! figure is Corral's own part: the CLI, the reopened run's promotion, its
//! new shepherd and the resume invocation.
//!
//! Set CORRAL_BENCH_RUNS to change the number of samples (20).

mod harness;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::report;

fn corral(home: &Path, bin: &Path, cwd: &Path, args: &[&str]) -> String {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .current_dir(cwd)
        .env("CORRAL_HOME", home)
        .env("PATH", path)
        .env("CONVERSE_LOG", cwd.join("turns.log"))
        .output()
        .unwrap();
    assert!(out.status.success(), "corral {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn turns(log: &Path) -> usize {
    std::fs::read_to_string(log).map(|t| t.lines().count()).unwrap_or(0)
}

fn main() {
    let samples: usize = std::env::var("CORRAL_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let root = tempfile::tempdir().unwrap();
    let (home, project, bin) = (root.path().join("home"), root.path().join("project"), root.path().join("bin"));
    for dir in [&home, &project.join(".corral/presets"), &bin] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-agents/conversing");
    std::os::unix::fs::symlink(fake, bin.join("claude")).unwrap();
    std::fs::write(project.join(".corral/presets/talk.md"), "---\nname: talk\ndescription: b\nagent: claude\n---\n")
        .unwrap();
    let log = project.join("turns.log");
    let id = corral(&home, &bin, &project, &["launch", "talk", "hello"]).trim().to_string();
    corral(&home, &bin, &project, &["wait", &id]);
    println!("Corral reply benchmark ({samples} replies to one run that ended)");

    let (mut started, mut ended) = (Vec::new(), Vec::new());
    for n in 0..samples {
        let before = turns(&log);
        let t0 = Instant::now();
        corral(&home, &bin, &project, &["reply", &id, &format!("follow-up {n}")]);
        while turns(&log) == before {
            std::thread::sleep(Duration::from_micros(200));
        }
        started.push(t0.elapsed().as_secs_f64() * 1000.0);
        corral(&home, &bin, &project, &["wait", &id]);
        ended.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    report("corral reply -> the new turn's agent running (ms)", &mut started);
    report("corral reply -> the run ended again, its exit recorded (ms)", &mut ended);
}
