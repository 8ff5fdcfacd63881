//! The house's shape, kept: no source file over 600 lines, the crate's root
//! holding only `lib.rs`, `main.rs` and its wings (folders), and no import
//! circle between the core crate's files. ARCHITECTURE.md says which wing
//! holds what; this test keeps the code from drifting away from that.
//!
//! A circle is read from the code's own paths: `crate::a::b`, `super::x`
//! and a `use` of them (braces too), each resolved to the file of the
//! deepest module it names, through a folder's `pub use` to the file that
//! defines the name. A folder's `mod.rs` using its own rooms is no arrow
//! (it is their face); tests inside a file are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The most lines a source file may have.
const MOST_LINES: usize = 600;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_six_hundred_lines() {
    let mut files = Vec::new();
    for dir in ["src", "tray/src", "src-tauri/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 100, "the sources were not found under {}", root().display());
    let over: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, lines)| *lines > MOST_LINES)
        .map(|(f, lines)| format!("{} ({lines} lines)", f.strip_prefix(root()).unwrap().display()))
        .collect();
    assert!(over.is_empty(), "split by concern, each room with a header saying why it is one: {over:?}");
}

#[test]
fn the_crate_root_holds_only_its_wings() {
    let loose: Vec<String> = std::fs::read_dir(root().join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "lib.rs" && name != "main.rs")
        .collect();
    assert!(loose.is_empty(), "put each in the wing it belongs to (ARCHITECTURE.md, \"The wings\"): {loose:?}");
}

/// A module of the core crate, found by its path (`["store", "runs"]`).
struct Module {
    /// Its code without its tests and comments.
    code: String,
}

/// The library's modules by path, from `src/lib.rs` down (the binaries'
/// `cli/` and `bin/` are not the library's).
fn modules() -> BTreeMap<Vec<String>, Module> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let mut path: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if ["cli", "bin"].contains(&path[0].as_str()) || path == ["main.rs"] {
            continue;
        }
        let last = path.pop().unwrap();
        if last != "mod.rs" && last != "lib.rs" {
            path.push(last.trim_end_matches(".rs").to_string());
        }
        let code = without_tests_and_comments(&std::fs::read_to_string(&file).unwrap());
        modules.insert(path, Module { code });
    }
    modules
}

/// `text` without `#[cfg(test)] mod … { … }` blocks and `//` comments.
fn without_tests_and_comments(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            let mut depth = 0i32;
            for inner in lines.by_ref() {
                depth += inner.matches('{').count() as i32 - inner.matches('}').count() as i32;
                if depth <= 0 && inner.contains('}') {
                    break;
                }
            }
            continue;
        }
        let code = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        kept.push_str(code);
        kept.push('\n');
    }
    kept
}

/// The paths a module's code names, whole (`crate::a::B`, `super::c::D`,
/// and in a `pub use` also a room's `runs::X`), with `use` braces opened
/// out: what it uses, and what it hands on (`pub use`) apart.
fn named_paths(code: &str) -> (Vec<String>, Vec<String>) {
    let reexport = Regex::new(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);").unwrap();
    let handed: Vec<String> = reexport.captures_iter(code).flat_map(|c| opened(&c[1])).collect();
    let used = opened(&reexport.replace_all(code, ""));
    (used, handed)
}

/// The paths in `code` (of two segments or more), `use` braces opened out.
fn opened(code: &str) -> Vec<String> {
    static BRACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b(\w+(?:::\w+)*)::\{([^{}]*)\}").unwrap());
    static PATH: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\w+(?:::\w+)+").unwrap());
    let (braces, path) = (&*BRACES, &*PATH);
    let mut paths = Vec::new();
    for caught in braces.captures_iter(code) {
        for item in caught[2].split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let item = item.split(" as ").next().unwrap().trim();
            paths.push(format!("{}::{item}", &caught[1]));
        }
    }
    let rest = braces.replace_all(code, "");
    paths.extend(path.find_iter(&rest).map(|m| m.as_str().to_string()));
    paths
}

/// `path`, as written in the module at `at`, as segments from the crate's
/// root: `crate::`, `super::` (one level up each, from a file or a
/// folder's face alike) and `self::`; a bare path only when its first
/// segment is a room of `at` (else it names another crate).
fn absolute(path: &str, at: &[String], modules: &BTreeMap<Vec<String>, Module>) -> Option<Vec<String>> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<String> = at.to_vec();
    match segments[0] {
        "crate" => {
            base.clear();
            segments.remove(0);
        }
        "self" => {
            segments.remove(0);
        }
        "super" => {
            while segments.first() == Some(&"super") {
                base.pop()?;
                segments.remove(0);
            }
        }
        first => {
            let mut room = at.to_vec();
            room.push(first.to_string());
            if !modules.contains_key(&room) {
                return None;
            }
        }
    }
    base.extend(segments.into_iter().filter(|s| *s != "self").map(str::to_string));
    Some(base)
}

/// The module that defines what `path` names: its deepest module, and
/// through that module's re-exports to the one that defines the name
/// (`crate::Store` is `store`'s, through `lib.rs`).
fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, Module>, reexports: &Reexports) -> Vec<String> {
    let mut depth = path.len();
    // The crate's root (`lib.rs`, the empty path) is the last to try.
    while depth > 0 && !modules.contains_key(&path[..depth]) {
        depth -= 1;
    }
    let module = path[..depth].to_vec();
    if let Some(name) = path.get(depth) {
        if let Some(from) = reexports.get(&(module.clone(), name.clone())) {
            return resolve(from, modules, reexports);
        }
    }
    module
}

type Reexports = BTreeMap<(Vec<String>, String), Vec<String>>;

fn arrows(modules: &BTreeMap<Vec<String>, Module>) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut reexports = Reexports::new();
    let mut uses = BTreeMap::new();
    for (at, module) in modules {
        let (used, handed) = named_paths(&module.code);
        for whole in handed.iter().filter_map(|p| absolute(p, at, modules)) {
            if let Some(name) = whole.last() {
                reexports.insert((at.clone(), name.clone()), whole.clone());
            }
        }
        // Only what names a place from the crate's root or from above: a
        // face naming its own rooms (`migrate::apply`) is no arrow.
        let used: Vec<Vec<String>> = used
            .iter()
            .filter(|p| p.starts_with("crate::") || p.starts_with("super::") || p.starts_with("self::"))
            .filter_map(|p| absolute(p, at, modules))
            .collect();
        uses.insert(at.clone(), used);
    }
    let mut arrows = BTreeMap::new();
    for (at, paths) in uses {
        let targets: BTreeSet<Vec<String>> = paths
            .iter()
            .map(|p| resolve(p, modules, &reexports))
            .filter(|target| target != &at && !target.starts_with(&at))
            .collect();
        arrows.insert(at, targets);
    }
    arrows
}

/// Every circle: strongly connected groups of more than one module.
fn circles(arrows: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> BTreeSet<String> {
    let names: Vec<&Vec<String>> = arrows.keys().collect();
    let index: BTreeMap<&Vec<String>, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let reach = |from: usize| -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(at) = todo.pop() {
            for next in arrows[names[at]].iter().filter_map(|t| index.get(t)) {
                if seen.insert(*next) {
                    todo.push(*next);
                }
            }
        }
        seen
    };
    let reached: Vec<BTreeSet<usize>> = (0..names.len()).map(reach).collect();
    let mut found = BTreeSet::new();
    for a in 0..names.len() {
        let group: Vec<String> = (0..names.len())
            .filter(|&b| reached[a].contains(&b) && reached[b].contains(&a))
            .map(|b| names[b].join("::"))
            .collect();
        if group.len() > 1 {
            found.insert(group.join(" ↔ "));
        }
    }
    found
}

#[test]
fn no_import_circle_between_the_cores_files() {
    let modules = modules();
    assert!(modules.len() > 100, "the core's modules were not found");
    let arrows = arrows(&modules);
    // The reading itself is checked where it is known: the shepherd's
    // loop imports the store, and the store never the shepherd.
    let supervise = vec!["shepherd".to_string(), "supervise".to_string()];
    assert!(
        arrows[&supervise].contains(&vec!["store".to_string()]),
        "the imports were not read: {:?}",
        arrows[&supervise]
    );
    let circles = circles(&arrows);
    assert!(circles.is_empty(), "break each circle (move what both use into a room of its own): {circles:?}");
}
