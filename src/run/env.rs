//! The environment of a run's processes: the variables that tie a process
//! to its run, and the launcher's environment, kept with the run.
//!
//! A run starts with the environment of whoever launched it (PATH from nvm
//! or a virtualenv, API keys, `CORRAL_*`), whichever process later starts
//! it from the queue. It is kept in the run's folder as `env` (0600, the
//! `/proc/PID/environ` format: `KEY=VALUE` entries ended by NUL bytes), and
//! never in the database or the transcript: it holds secrets.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::home;

/// The variable that tells every process of a run which run it belongs to.
pub const RUN_ID_ENV: &str = "CORRAL_RUN_ID";
/// The variable that marks a shepherd process (its value: the run id).
pub const SHEPHERD_ENV: &str = "CORRAL_SHEPHERD";

/// What a preset's `env:` values may name, filled in per run.
pub const PLACEHOLDERS: [&str; 3] = ["run", "port", "worktree"];

/// A preset's `env:` value for one run: `{run}` its id, `{port}` its first
/// port (empty without ports), `{worktree}` its worktree (its folder
/// without one).
pub fn fill(value: &str, run: &str, port: Option<u16>, worktree: &str) -> String {
    value
        .replace("{run}", run)
        .replace("{port}", &port.map(|p| p.to_string()).unwrap_or_default())
        .replace("{worktree}", worktree)
}

/// The file in a run's folder that keeps its launcher's environment.
pub fn env_file(run_dir: &Path) -> PathBuf {
    run_dir.join("env")
}

/// Keeps `vars` as the run's environment, in its folder (0600).
pub fn save(run_dir: &Path, vars: impl IntoIterator<Item = (OsString, OsString)>) -> io::Result<()> {
    let mut bytes = Vec::new();
    for (key, value) in vars {
        // A name with '=' or NUL cannot round-trip; no shell can set one.
        if key.is_empty() || key.as_bytes().contains(&b'=') || key.as_bytes().contains(&0) {
            continue;
        }
        if value.as_bytes().contains(&0) {
            continue;
        }
        bytes.extend_from_slice(key.as_bytes());
        bytes.push(b'=');
        bytes.extend_from_slice(value.as_bytes());
        bytes.push(0);
    }
    let path = env_file(run_dir);
    let tmp = run_dir.join("env.tmp");
    let mut file = home::create_private(&tmp)?;
    file.write_all(&bytes)?;
    // Not synced to disk: the run's row is committed without a sync too
    // (`synchronous = NORMAL`), so a crash loses both or neither matters;
    // the rename still makes a reader see all of it or none.
    std::fs::rename(tmp, path)
}

/// Variable `name` as a run's environment `env` has it (`None`: a run
/// without a kept environment, which gets this process's).
pub fn var(env: Option<&[(OsString, OsString)]>, name: &str) -> Option<OsString> {
    match env {
        Some(env) => env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
        None => std::env::var_os(name),
    }
}

/// The run's kept environment, or `None` for a run launched before Corral
/// kept one (it then gets its starter's environment, as it used to).
pub fn load(run_dir: &Path) -> io::Result<Option<Vec<(OsString, OsString)>>> {
    let bytes = match std::fs::read(env_file(run_dir)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let vars = bytes
        .split(|&b| b == 0)
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=')?;
            Some((OsString::from_vec(entry[..eq].to_vec()), OsString::from_vec(entry[eq + 1..].to_vec())))
        })
        .collect();
    Ok(Some(vars))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keeps_every_byte_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let vars = vec![
            (OsString::from("PATH"), OsString::from("/a:/b")),
            (OsString::from("EMPTY"), OsString::new()),
            (OsString::from("EQ"), OsString::from("a=b=c")),
            (OsString::from("BYTES"), OsString::from_vec(vec![0xff, b'\n', b'x'])),
        ];
        save(dir.path(), vars.clone()).unwrap();
        assert_eq!(load(dir.path()).unwrap().unwrap(), vars);
        let mode = std::fs::metadata(env_file(dir.path())).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_run_without_a_kept_environment_says_so() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
    }
}
