//! A block of ports per run: three agents' dev servers on one machine
//! each get their own (`CORRAL_PORT`, the first of `ports: N`), so none
//! fails with `EADDRINUSE` because another run took `:4001`. A block is
//! chosen in the run's insert (see `store::runs`) from [`RANGE`], clear of
//! every active run's block and of every port something listens on now.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// Where blocks are taken from: above the usual development ports (3000,
/// 4000, 5173, 8080), below the kernel's ephemeral range (32768 up).
pub const RANGE: std::ops::Range<u32> = 20_000..30_000;

/// Most ports one run may ask for.
pub const MOST: u16 = 1_000;

/// The environment variable with a run's first port.
pub const PORT_ENV: &str = "CORRAL_PORT";

/// The environment variable with how many ports its block has.
pub const PORTS_ENV: &str = "CORRAL_PORTS";

/// A run's ports: `first` to `first + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBlock {
    /// Its first port: `CORRAL_PORT`.
    pub first: u16,
    /// How many.
    pub count: u16,
}

impl PortBlock {
    /// `20000–20009`, or `20000` for one.
    pub fn words(&self) -> String {
        match self.count {
            1 => self.first.to_string(),
            n => format!("{}–{}", self.first, u32::from(self.first) + u32::from(n) - 1),
        }
    }

    /// True if it shares a port with `other`.
    pub fn overlaps(&self, other: &PortBlock) -> bool {
        let end = |b: &PortBlock| u32::from(b.first) + u32::from(b.count);
        u32::from(self.first) < end(other) && u32::from(other.first) < end(self)
    }
}

/// The first block of `count` ports in [`RANGE`] that overlaps none of
/// `taken` and holds no port of `listening`.
pub fn free_block(count: u16, taken: &[PortBlock], listening: &HashSet<u16>) -> Option<PortBlock> {
    let mut first = RANGE.start;
    while first + u32::from(count) <= RANGE.end {
        let block = PortBlock { first: first as u16, count };
        if let Some(clash) =
            taken.iter().filter(|t| t.overlaps(&block)).map(|t| u32::from(t.first) + u32::from(t.count)).max()
        {
            first = clash;
            continue;
        }
        match (first..first + u32::from(count)).find(|p| listening.contains(&(*p as u16))) {
            Some(busy) => first = busy + 1,
            None => return Some(block),
        }
    }
    None
}

/// The ports something listens on (TCP) or is bound to (UDP) on this
/// machine now; a TCP socket bound and not listening yet is not listed
/// (`/proc/net/tcp` does not show it).
pub fn listening() -> HashSet<u16> {
    crate::process::listening_ports()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_keeps_clear_of_taken_blocks_and_listening_ports() {
        let none = HashSet::new();
        assert_eq!(free_block(10, &[], &none), Some(PortBlock { first: 20_000, count: 10 }));
        let taken = [PortBlock { first: 20_000, count: 10 }, PortBlock { first: 20_010, count: 5 }];
        assert_eq!(free_block(10, &taken, &none), Some(PortBlock { first: 20_015, count: 10 }));
        let busy: HashSet<u16> = [20_017].into();
        assert_eq!(free_block(10, &taken, &busy), Some(PortBlock { first: 20_018, count: 10 }));
        assert_eq!(free_block(10, &[PortBlock { first: 20_000, count: 9_995 }], &none), None);
        assert_eq!(PortBlock { first: 20_000, count: 10 }.words(), "20000–20009");
    }
}
