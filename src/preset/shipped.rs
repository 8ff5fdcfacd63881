//! The presets shipped in `presets/`, embedded into the binary so the CLI and
//! the app work with no files installed.

/// `(path in the repository, text)` of every shipped preset.
pub const SHIPPED: &[(&str, &str)] = &[
    ("presets/lead.md", include_str!("../../presets/lead.md")),
    ("presets/reviewer.md", include_str!("../../presets/reviewer.md")),
    ("presets/scout.md", include_str!("../../presets/scout.md")),
    ("presets/tests.md", include_str!("../../presets/tests.md")),
];

/// The name of the shipped preset at `path`: its file's name without
/// `.md` (a test holds every shipped preset to it).
pub fn name_of(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.strip_suffix(".md").unwrap_or(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preset added to `presets/` but not listed here would silently not ship.
    #[test]
    fn every_file_in_presets_is_embedded_and_valid() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/presets");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| format!("presets/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = SHIPPED.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(on_disk, embedded);
        for (path, text) in SHIPPED {
            let preset = crate::preset::parse_preset(text, path, crate::preset::PresetSource::Shipped)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            // A launch parses only the shipped preset named as its file.
            assert_eq!(preset.name, name_of(path), "{path}");
        }
    }
}
