//! Finding presets: every source in precedence order, later overriding
//! earlier by name.
//!
//! Order, lowest first: shipped, `~/.claude/agents`, `~/.pi/agent/subagents`,
//! Corral's global folder, then the nearest `.claude/agents`,
//! `.pi/subagents` and `.corral/presets` walking up from the working folder.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::{parse_preset, Effective, Preset, PresetError, PresetProblem, PresetSet, PresetSource, SHIPPED};
use crate::home::Home;

/// The folders discovery starts from; separate from the environment so tests
/// and the app can say exactly where to look.
#[derive(Debug, Clone)]
pub struct Roots {
    /// The user's home folder (`~`), if known.
    pub user_home: Option<PathBuf>,
    /// Corral's global presets folder.
    pub global: PathBuf,
    /// The working folder project presets are searched from.
    pub cwd: Option<PathBuf>,
}

impl Roots {
    /// Roots from the environment: `$HOME`, Corral's home, and `cwd`.
    pub fn new(home: &Home, cwd: Option<&Path>) -> Roots {
        Roots {
            user_home: directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf()),
            global: home.presets_dir(),
            cwd: cwd.map(Path::to_path_buf),
        }
    }

    /// Every folder to read, lowest precedence first, with its source.
    fn folders(&self) -> Vec<(PresetSource, PathBuf)> {
        let mut folders = Vec::new();
        if let Some(home) = &self.user_home {
            folders.push((PresetSource::ClaudeUser, home.join(".claude/agents")));
            folders.push((PresetSource::PiUser, home.join(".pi/agent/subagents")));
        }
        folders.push((PresetSource::Global, self.global.clone()));
        if let Some(cwd) = &self.cwd {
            for (source, rel) in [
                (PresetSource::ClaudeProject, ".claude/agents"),
                (PresetSource::PiProject, ".pi/subagents"),
                (PresetSource::CorralProject, ".corral/presets"),
            ] {
                if let Some(dir) = nearest(cwd, rel, self.user_home.as_deref()) {
                    folders.push((source, dir));
                }
            }
        }
        folders
    }
}

/// The nearest `start/../rel` that is a folder. The user's home folder is
/// not a project: its `.claude/agents` is already the user source.
fn nearest(start: &Path, rel: &str, user_home: Option<&Path>) -> Option<PathBuf> {
    start
        .ancestors()
        .filter(|dir| Some(*dir) != user_home)
        .map(|dir| dir.join(rel))
        .find(|candidate| candidate.is_dir())
}

/// Reads every source and returns the presets in effect and the problems.
pub fn discover(roots: &Roots) -> PresetSet {
    discover_where(roots, |_| true)
}

/// As [`discover`], for a launch of preset `name`: of the shipped presets
/// only the one of that name is parsed (a shipped preset's name is its
/// file's: see `shipped`), as what a launch reads of the others is
/// nothing. The preset of that name, what it overrides and every file's
/// problem are as [`discover`] finds them.
pub fn discover_named(roots: &Roots, name: &str) -> PresetSet {
    discover_where(roots, |shipped| super::shipped::name_of(shipped) == name)
}

/// Every source, the shipped presets whose path `shipped` keeps.
fn discover_where(roots: &Roots, shipped: impl Fn(&str) -> bool) -> PresetSet {
    let mut set = PresetSet::default();
    let mut by_name: BTreeMap<String, Effective> = BTreeMap::new();
    let mut accept = |set: &mut PresetSet, found: Result<Preset, PresetProblem>| match found {
        Ok(preset) => {
            let name = preset.name.clone();
            let overrides = match by_name.remove(&name) {
                Some(mut lower) => {
                    lower.overrides.push(lower.preset.path.clone());
                    lower.overrides
                }
                None => Vec::new(),
            };
            by_name.insert(name, Effective { preset, overrides, unavailable: None });
        }
        Err(problem) => set.problems.push(problem),
    };

    for (file, text) in SHIPPED.iter().filter(|(file, _)| shipped(file)) {
        let path = format!("builtin:{file}");
        let found = parse_preset(text, &path, PresetSource::Shipped).map_err(|e| PresetProblem {
            path,
            source: PresetSource::Shipped,
            reason: e.to_string(),
        });
        accept(&mut set, found);
    }
    for (source, dir) in roots.folders() {
        let files = match markdown_files(&dir) {
            Ok(files) => files,
            Err(e) => {
                let reason = format!("cannot list the folder: {e}");
                set.problems.push(PresetProblem { path: dir.display().to_string(), source, reason });
                continue;
            }
        };
        set.searched.push(dir.clone());
        if files.is_empty() {
            continue;
        }
        // Another user's folder (or one they can write) is not read at all.
        if let Err(not_yours) = crate::trust::ownership::check(&dir) {
            let reason = format!("not loaded: {not_yours}");
            set.problems.push(PresetProblem { path: dir.display().to_string(), source, reason });
            continue;
        }
        for file in files {
            accept(&mut set, read_preset(&file, source));
        }
    }
    set.presets = by_name.into_values().collect();
    set
}

/// Reads and parses one file.
fn read_preset(file: &Path, source: PresetSource) -> Result<Preset, PresetProblem> {
    let path = file.display().to_string();
    if let Err(not_yours) = crate::trust::ownership::check(file) {
        return Err(PresetProblem { path, source, reason: format!("not loaded: {not_yours}") });
    }
    let parsed = fs::read(file)
        .map_err(|e| PresetError::Unreadable(e.to_string()))
        .and_then(|bytes| String::from_utf8(bytes).map_err(|_| PresetError::Unreadable("not UTF-8 text".into())))
        .and_then(|text| parse_preset(&text, &path, source));
    parsed.map_err(|e| PresetProblem { path, source, reason: e.to_string() })
}

/// The `*.md` files of a folder, sorted; a missing folder has none.
fn markdown_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md") && path.is_file())
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a launch finds of a preset is what a listing finds: the preset
    /// in effect, what it overrides, and a broken file's problem.
    #[test]
    fn a_launchs_discovery_finds_its_preset_as_the_whole_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let global = dir.path().join("presets");
        fs::create_dir_all(&global).unwrap();
        fs::write(global.join("scout.md"), "---\nname: scout\ndescription: mine\nagent: pi\n---\n").unwrap();
        fs::write(global.join("mine.md"), "---\nname: mine\ndescription: d\nagent: codex\n---\n").unwrap();
        fs::write(global.join("broken.md"), "---\nname: [\n---\n").unwrap();
        let roots = Roots { user_home: None, global, cwd: None };
        let whole = discover(&roots);
        let shipped = SHIPPED.iter().map(|(path, _)| super::super::shipped::name_of(path));
        for name in shipped.chain(["mine", "broken", "nosuch"]) {
            let named = discover_named(&roots, name);
            let found = |set: &PresetSet| {
                let effective = set.presets.iter().find(|e| e.preset.name == name);
                let error = set.get(name).err().map(|e| e.to_string());
                (effective.map(|e| (e.preset.path.clone(), e.overrides.clone())), error)
            };
            assert_eq!(found(&named), found(&whole), "{name}");
        }
        let scout = discover_named(&roots, "scout");
        assert_eq!(scout.get("scout").unwrap().description, "mine");
    }
}
