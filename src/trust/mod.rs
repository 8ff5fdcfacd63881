//! Which project presets may run: a repository the user just cloned can
//! hold presets (`.corral/presets/`, `.claude/agents/`, `.pi/subagents/`),
//! and one that runs a command, a `setup` or arguments of its own is code
//! from whoever wrote the repository. It runs only once the user has
//! trusted it (`corral presets trust DIR`), recorded with the file's content
//! hash and asked again when the file changes, as direnv's `allow` does.
//! Trust is the user's word: it is never given from inside a run, where an
//! agent could give it.
//!
//! A project preset that replaces a shipped, user or global one of the same
//! name is said (`presets`, and at launch), whether or not it needs trust.
//!
//! Beside it, the other half of whose words Corral will act on: a file
//! another local user could have written is never read (`ownership`).

pub mod ownership;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::adapter::AgentKind;
use crate::preset::{Effective, Preset, PresetSource};
use crate::store::{Store, StoreError};

/// A project preset that would run code the user has not trusted.
#[derive(Debug, thiserror::Error)]
#[error(
    "preset '{name}' comes from the project ({path}) and {why}: that is code from whoever wrote the repository, \
     so it runs only once you trust it. Read it, then run `corral presets trust {folder}`{changed}"
)]
pub struct Untrusted {
    /// The preset.
    pub name: String,
    /// Its file.
    pub path: String,
    /// What it would run.
    pub why: &'static str,
    /// The project folder to trust.
    pub folder: String,
    /// Said when the file changed since it was trusted.
    pub changed: &'static str,
}

/// Why trusting failed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A preset file could not be read.
    #[error("cannot read the preset {path}: {source}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    /// Asked from inside a run.
    #[error("trust is given by you, not from inside run {0}: run `corral presets trust` in your own terminal")]
    InsideRun(String),
}

/// True for the sources a cloned repository brings.
pub fn is_project(source: PresetSource) -> bool {
    matches!(source, PresetSource::ClaudeProject | PresetSource::PiProject | PresetSource::CorralProject)
}

/// What a project preset would run of its own, if anything: what makes
/// it need the user's trust.
/// `default` is the sandbox a preset without `sandbox:` gets here
/// (config.toml's `[sandbox]`): a project preset's own sandbox that is not
/// a narrowing of it is the repository widening what its runs may touch.
pub fn runs_code(preset: &Preset, default: Option<&crate::sandbox::Sandbox>) -> Option<&'static str> {
    if !is_project(preset.source) {
        return None;
    }
    if preset.agent == AgentKind::Command {
        Some("runs a command (agent: command)")
    } else if !preset.setup.is_empty() {
        Some("runs a `setup` command")
    } else if !preset.teardown.is_empty() {
        Some("runs a `teardown` command")
    } else if !preset.env.is_empty() {
        // `PATH: {worktree}/bin`, `LD_PRELOAD`, `NODE_OPTIONS`: the
        // repository's own code in place of the agent.
        Some("sets its runs' environment (env:)")
    } else if !preset.args.is_empty() {
        Some("passes arguments of its own to the agent (args)")
    } else if preset.sandbox == Some(crate::sandbox::Asked::None) {
        // A sandboxed run writing its project could plant one, for your
        // next launch to run unsandboxed.
        Some("runs unsandboxed whatever [sandbox] says (sandbox: none)")
    } else if widens(preset, default) {
        // A builder could plant `{write: [/], network: all}` as easily.
        Some("asks for a sandbox wider than your own default ([sandbox] in config.toml)")
    } else if preset.mcp == Some(crate::preset::McpScope::All) {
        Some("lets its agent act on every run (mcp: all)")
    } else if preset.pr == Some(crate::preset::PrPolicy::Allow) {
        // Pushing is publishing: the repository's own file may not grant it.
        Some("lets its agent push and open pull requests (pr: allow)")
    } else {
        None
    }
}

/// Whether `preset`'s own `sandbox:` lets its runs touch more than
/// `default` would (none: any sandbox is narrower than none).
fn widens(preset: &Preset, default: Option<&crate::sandbox::Sandbox>) -> bool {
    use crate::sandbox::Asked;
    let Some(default) = default else { return false };
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
    match &preset.sandbox {
        None => false,
        Some(Asked::None) => true,
        // The default's rules, run unsandboxed where no engine works.
        Some(Asked::Optional) => !default.optional,
        Some(Asked::Rules(rules)) => !rules.narrows(default, &home),
    }
}

/// The project folder a preset file belongs to: above its presets folder.
pub fn project_folder(preset_path: &Path) -> PathBuf {
    // `.corral/presets/x.md`, `.claude/agents/x.md`, `.pi/subagents/x.md`.
    preset_path.ancestors().nth(3).map_or_else(|| preset_path.to_path_buf(), Path::to_path_buf)
}

/// The file's canonical path and content hash.
fn fingerprint(path: &Path) -> Result<(String, String), std::io::Error> {
    let canonical = std::fs::canonicalize(path)?;
    let bytes = std::fs::read(&canonical)?;
    let hash = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    Ok((canonical.to_string_lossy().into_owned(), hash))
}

/// `Ok` if `preset` may run: it runs no code of its own, or the user
/// trusted its file as it is now.
pub fn check(store: &Store, preset: &Preset, default: Option<&crate::sandbox::Sandbox>) -> Result<(), CheckError> {
    let Some(why) = runs_code(preset, default) else { return Ok(()) };
    let path = Path::new(&preset.path);
    let untrusted = |changed| Untrusted {
        name: preset.name.clone(),
        path: preset.path.clone(),
        why,
        folder: project_folder(path).display().to_string(),
        changed,
    };
    let Ok((canonical, hash)) = fingerprint(path) else { return Err(untrusted("").into()) };
    match store.trusted_preset(&canonical)? {
        Some(trusted) if trusted == hash => Ok(()),
        Some(_) => Err(untrusted(" (it changed since you trusted it)").into()),
        None => Err(untrusted("").into()),
    }
}

/// Why a preset may not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Not trusted.
    #[error(transparent)]
    Untrusted(#[from] Untrusted),
}

/// Trusts every project preset in effect in `presets` (those of one
/// folder) that runs code of its own, as its file is now. Returns their
/// files. Refused inside a run.
pub fn trust(
    store: &mut Store,
    presets: &[Effective],
    default: Option<&crate::sandbox::Sandbox>,
) -> Result<Vec<String>, TrustError> {
    if let Some(run) = crate::run::caller::caller_run(store)? {
        return Err(TrustError::InsideRun(run));
    }
    let mut trusted = Vec::new();
    for e in presets.iter().filter(|e| runs_code(&e.preset, default).is_some()) {
        let path = Path::new(&e.preset.path);
        let (canonical, hash) =
            fingerprint(path).map_err(|source| TrustError::Unreadable { path: path.to_path_buf(), source })?;
        store.trust_preset(&canonical, &hash)?;
        trusted.push(e.preset.path.clone());
    }
    Ok(trusted)
}

/// What a project preset that replaces another of the same name replaces,
/// said: `None` for any other.
pub fn shadows(e: &Effective) -> Option<String> {
    if !is_project(e.preset.source) || e.overrides.is_empty() {
        return None;
    }
    Some(format!(
        "preset '{}' is the project's ({}), not {}",
        e.preset.name,
        e.preset.path,
        e.overrides.iter().map(|o| format!("the one in {o}")).collect::<Vec<_>>().join(" nor ")
    ))
}
