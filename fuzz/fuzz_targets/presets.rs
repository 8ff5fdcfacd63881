//! Preset parsing on arbitrary text: an error or a preset, never a panic.
#![no_main]

use corral::preset::{parse_preset, PresetSource};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for source in PresetSource::ALL {
            let _ = parse_preset(text, "fuzz.md", *source);
        }
    }
});
