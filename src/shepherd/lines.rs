//! Splitting the agent's stdout into lines within a fixed memory budget.
//!
//! Lines end at LF only: pi's JSON strings may contain U+2028/U+2029 and a
//! CR is just a byte. A line longer than the budget keeps its first
//! `max_line` bytes and counts the rest, so a 50 MB line costs at most the
//! budget, and the adapter still sees the line's start (where every JSON
//! agent stream puts its event `type`).

/// Accumulates bytes and hands out complete lines.
pub struct LineSplitter {
    buf: Vec<u8>,
    dropped: u64,
    max_line: usize,
}

impl LineSplitter {
    /// A splitter keeping at most `max_line` bytes of any one line.
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter { buf: Vec::new(), dropped: 0, max_line }
    }

    /// Feeds `chunk`, calling `on_line(bytes, dropped)` for each line it
    /// completes.
    pub fn feed(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(&[u8], u64)) {
        while let Some(lf) = chunk.iter().position(|&b| b == b'\n') {
            self.keep(&chunk[..lf]);
            on_line(&self.buf, self.dropped);
            self.buf.clear();
            self.dropped = 0;
            chunk = &chunk[lf + 1..];
        }
        self.keep(chunk);
    }

    /// Hands out the last line if the stream ended without a LF.
    pub fn finish(&mut self, mut on_line: impl FnMut(&[u8], u64)) {
        if !self.buf.is_empty() || self.dropped > 0 {
            on_line(&self.buf, self.dropped);
            self.buf.clear();
            self.dropped = 0;
        }
    }

    fn keep(&mut self, part: &[u8]) {
        let room = self.max_line.saturating_sub(self.buf.len());
        let take = room.min(part.len());
        self.buf.extend_from_slice(&part[..take]);
        self.dropped += (part.len() - take) as u64;
        if self.buf.capacity() > self.max_line * 2 {
            self.buf.shrink_to(self.max_line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<(Vec<u8>, u64)> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            s.feed(chunk, |l, d| out.push((l.to_vec(), d)));
        }
        s.finish(|l, d| out.push((l.to_vec(), d)));
        out
    }

    #[test]
    fn splits_on_lf_only_across_chunks() {
        let out = split(&[b"a\r\nb\xe2\x80", b"\xa8c\nlast"], 100);
        assert_eq!(out, vec![(b"a\r".to_vec(), 0), ("b\u{2028}c".as_bytes().to_vec(), 0), (b"last".to_vec(), 0)]);
    }

    #[test]
    fn bounds_long_lines_and_counts_the_rest() {
        let big = vec![b'x'; 10_000];
        let out = split(&[b"{\"type\":\"end\"", &big, b"\nnext\n"], 64);
        assert_eq!(out[0].0.len(), 64);
        assert!(out[0].0.starts_with(b"{\"type\":\"end\""));
        assert_eq!(out[0].1, 13 + 10_000 - 64);
        assert_eq!(out[1], (b"next".to_vec(), 0));
    }
}
