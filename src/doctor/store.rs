//! The store: where it is, its schema, whether SQLite finds it sound, how
//! big it is, and the room left on its disk.

use super::{Finding, Level};
use crate::cost::resources::human_bytes;
use crate::home::Home;
use crate::store::{Store, SCHEMA_VERSION};

const AREA: &str = "store";

/// Below this much free space on the store's disk, a warning: transcripts
/// of a few busy runs fill it.
const LOW_DISK: u64 = 1 << 30;

/// The database and the disk it is on.
pub fn check(home: &Home) -> Vec<Finding> {
    let path = home.database();
    let store = match Store::open(home) {
        Ok(store) => store,
        Err(e) => {
            return vec![Finding::new(AREA, "database", Level::Fail, format!("{}: {e}", path.display()))
                .fix("see the message; `CORRAL_HOME=/another/folder` starts an empty store elsewhere")]
        }
    };
    let mut findings = Vec::new();
    match store.health() {
        Ok(health) => {
            let detail = format!(
                "{}: schema {} (this Corral writes {SCHEMA_VERSION}), {} runs, {}",
                path.display(),
                health.schema,
                health.runs,
                human_bytes(health.bytes)
            );
            findings.push(if health.integrity == "ok" {
                Finding::ok(AREA, "database", format!("{detail}, integrity ok"))
            } else {
                Finding::new(AREA, "database", Level::Fail, format!("{detail}; integrity_check found: {}", health.integrity))
                    .fix(format!(
                        "quit Corral, keep a copy of {}, then `sqlite3 {} '.recover' | sqlite3 recovered.db` and put recovered.db in its place",
                        path.display(),
                        path.display()
                    ))
            });
            if !health.gives_space_back {
                findings.push(
                    Finding::new(AREA, "space", Level::Note, "made before Corral gave removed runs' space back")
                        .fix("the next `corral rm` or `corral prune` turns it on (one full VACUUM)"),
                );
            }
        }
        Err(e) => findings.push(Finding::new(AREA, "database", Level::Fail, format!("{}: {e}", path.display()))),
    }
    findings.push(told(home));
    match crate::process::disk_free(home.data_dir()) {
        Some(free) => {
            let detail = format!("{} free on the disk of {}", human_bytes(free), home.data_dir().display());
            findings.push(if free < LOW_DISK {
                Finding::new(AREA, "disk", Level::Warn, detail)
                    .fix("free space, or remove old runs: `corral du`, then `corral prune --older-than 30d`")
            } else {
                Finding::ok(AREA, "disk", detail)
            });
        }
        None => findings.push(Finding::new(AREA, "disk", Level::Note, "cannot measure the free space")),
    }
    findings
}

/// Whether waiting processes can be told of the store's commits: by its
/// bell (a FIFO: no limit), else by inotify (an instance each: past the
/// user's limit they look every 50 ms instead).
fn told(home: &Home) -> Finding {
    if crate::process::Bell::ensure(&home.bell()).and_then(|()| crate::process::Bell::listen(&home.bell())).is_ok() {
        return Finding::ok(AREA, "told of changes", "waiting processes are told of each commit (the store's bell)");
    }
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    let raise = "sudo sysctl -w fs.inotify.max_user_instances=1024 (and the same in /etc/sysctl.d/ to keep it)";
    match crate::process::FolderWatch::new(home.data_dir(), "corral.db") {
        Err(e) => Finding::new(AREA, "told of changes", Level::Warn, format!("no bell (a FIFO) in the data folder and no inotify instance ({e}): waiting processes look at the store every 50 ms"))
            .fix(raise),
        Ok(_) => match limit {
            Some(max) if max < 512 => Finding::new(
                AREA,
                "told of changes",
                Level::Note,
                format!("no bell (a FIFO) in the data folder: each waiting Corral process takes one of this user's {max} inotify instances (shared with every program); past them, waits look every 50 ms"),
            )
            .fix(raise),
            _ => Finding::ok(AREA, "told of changes", "waiting processes are told of the store's writes (inotify)"),
        },
    }
}
