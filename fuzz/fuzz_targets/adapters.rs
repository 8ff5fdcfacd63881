//! Every adapter's stream parser on arbitrary bytes: split on LF as the
//! shepherd does, read line by line, then settle or end. Must never panic
//! and must stay within bounded memory.
#![no_main]

use corral::adapter::{for_agent, AgentKind, ProcessEnd, StreamLine};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for agent in AgentKind::ALL {
        let mut adapter = for_agent(*agent);
        let mut events = Vec::new();
        for line in data.split(|&b| b == b'\n') {
            let _ = adapter.read_line(StreamLine { bytes: line, dropped: 0 }, &mut events);
            // An oversized line arrives cut: exercise that path too.
            if line.len() > 8 {
                let _ = adapter.read_line(StreamLine { bytes: &line[..8], dropped: line.len() as u64 }, &mut events);
            }
            let _ = adapter.busy();
            if adapter.settling().is_some() && line.len() % 3 == 0 {
                let _ = adapter.settle();
            }
            if events.len() > 10_000 {
                events.clear();
            }
        }
        adapter.flush(&mut events);
        let _ = adapter.verdict_on_exit(ProcessEnd::Exited(data.len() as i32 % 3), "stderr tail");
        let _ = adapter.report();
    }
});
