//! The shepherd's line splitter: every byte is either in a line or counted
//! as dropped, and no kept line exceeds the budget.
#![no_main]

use corral::shepherd::LineSplitter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let budget = 1 + data.first().copied().unwrap_or(0) as usize;
    let mut splitter = LineSplitter::new(budget);
    let (mut kept, mut dropped, mut lines) = (0u64, 0u64, 0u64);
    for chunk in data.chunks(7) {
        splitter.feed(chunk, |line, cut| {
            assert!(line.len() <= budget);
            kept += line.len() as u64;
            dropped += cut;
            lines += 1;
        });
    }
    splitter.finish(|line, cut| {
        kept += line.len() as u64;
        dropped += cut;
        lines += 1;
    });
    let newlines = data.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(kept + dropped + newlines, data.len() as u64);
    assert!(lines >= newlines);
});
