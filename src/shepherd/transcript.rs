//! How much of a run's output is kept: the transcript (the store's events,
//! the one copy) up to `[transcripts] max`, and, only when `[transcripts]
//! raw_logs` asks for them (to diagnose an agent's format), the raw streams
//! in the run's folder up to that size. What either leaves out is counted and said, never silently cut;
//! the run's outcome is read from everything the agent wrote.

use std::fs::File;
use std::io::Write;

use crate::adapter::{EventKind, TranscriptEvent};
use crate::cost::resources::human_bytes;
use crate::store::{stored_bytes, Dropped};

/// An error or a note this small is kept past the cap (how the run ended).
const VITAL_MAX: u64 = 4 << 10;

/// The transcript's budget: what is kept so far, and what the cap left out
/// since the last append (runtime state; the totals live in the store).
pub(super) struct TranscriptBudget {
    /// Most bytes kept (None: no cap).
    max: Option<u64>,
    /// Bytes kept so far, earlier turns included.
    kept: u64,
    /// Left out since the last append.
    dropped: Dropped,
    /// Whether the transcript already says it reached the cap.
    said: bool,
}

impl TranscriptBudget {
    /// A budget of `max` bytes of which `kept` are used; `capped` if an
    /// earlier turn already reached it (and said so).
    pub fn new(max: Option<u64>, kept: u64, capped: bool) -> TranscriptBudget {
        TranscriptBudget { max, kept, dropped: Dropped::default(), said: capped }
    }

    /// Keeps the events that fit, counts the others. An error or a result
    /// is kept (if small): it is it is how the run ended. Once the
    /// cap is first reached, a note in the transcript says so where it
    /// happened.
    pub fn admit(&mut self, events: &mut Vec<TranscriptEvent>) {
        let Some(max) = self.max else { return };
        let mut kept = Vec::with_capacity(events.len());
        for event in events.drain(..) {
            let size = event_bytes(&event);
            let vital = matches!(event.kind, EventKind::Error | EventKind::System) && size <= VITAL_MAX;
            // Once the cap is reached, nothing more is kept (but how the run
            // ended): a later, smaller event that would still fit is not
            // kept after the note that says nothing is.
            if (!self.said && self.kept + size <= max) || vital {
                self.kept += size;
                kept.push(event);
                continue;
            }
            if !self.said {
                self.said = true;
                let note = TranscriptEvent::text(
                    EventKind::System,
                    format!(
                        "the transcript reached its cap of {} (`[transcripts] max` in config.toml): what the agent \
                         writes from here on is counted, not kept; its outcome is still read",
                        human_bytes(max)
                    ),
                );
                self.kept += event_bytes(&note);
                kept.push(note);
            }
            self.dropped.events += 1;
            self.dropped.bytes += size;
        }
        *events = kept;
    }

    /// What was left out since the last call (counted in the store with
    /// the next append).
    pub fn take_dropped(&mut self) -> Dropped {
        std::mem::take(&mut self.dropped)
    }
}

/// An event's bytes as the store counts them.
fn event_bytes(event: &TranscriptEvent) -> u64 {
    stored_bytes(&event.text, event.json.as_ref().map(|v| v.to_string()).as_deref())
}

/// One raw stream's file in the run's folder, kept to its first bytes;
/// none at all unless `[transcripts] raw_logs` asks for it.
pub(super) struct RawLog {
    file: Option<File>,
    /// Bytes it may still take.
    room: u64,
    /// Bytes not written for want of room.
    over: u64,
}

impl RawLog {
    /// A log in `file` (appended to) that takes at most `max` bytes.
    pub fn new(file: File, max: u64) -> RawLog {
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        RawLog { file: Some(file), room: max.saturating_sub(written), over: 0 }
    }

    /// No log: the stream is only in the transcript.
    pub fn none() -> RawLog {
        RawLog { file: None, room: 0, over: 0 }
    }

    /// Writes what fits of `bytes`. A failed write is ignored: the
    /// transcript in the store is the record, and supervision goes on.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(file) = &mut self.file else { return };
        let fits = bytes.len().min(self.room as usize);
        if fits > 0 && file.write_all(&bytes[..fits]).is_ok() {
            self.room -= fits as u64;
        }
        self.over += (bytes.len() - fits) as u64;
    }

    /// Ends the log with a line saying how much of the stream it left out,
    /// if any.
    pub fn close(&mut self) {
        let Some(file) = &mut self.file else { return };
        if self.over > 0 {
            let _ = writeln!(
                file,
                "\n[corral: {} more of this stream not kept here; the transcript is in the store: corral tail]",
                human_bytes(self.over)
            );
            self.over = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(text: &str) -> TranscriptEvent {
        TranscriptEvent::text(EventKind::Output, text)
    }

    /// After the note that says nothing more is kept, a smaller event
    /// that would still fit is not kept either (the note stays the end).
    #[test]
    fn nothing_is_kept_after_the_cap_is_said() {
        let mut budget = TranscriptBudget::new(Some(10), 0, false);
        let mut events = vec![output("1234"), output("this one is too long"), output("ab")];
        budget.admit(&mut events);
        let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[1].contains("cap of 10 B"), "{texts:?}");
        let mut later = vec![output("c")];
        budget.admit(&mut later);
        assert!(later.is_empty());
        assert_eq!(budget.take_dropped().events, 3);
    }

    #[test]
    fn keeps_what_fits_counts_the_rest_and_says_so_once() {
        let mut budget = TranscriptBudget::new(Some(10), 0, false);
        let mut events = vec![output("12345"), output("12345"), output("abc"), output("defg")];
        budget.admit(&mut events);
        let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts[..2], ["12345", "12345"]);
        assert!(texts[2].contains("cap of 10 B"), "{texts:?}");
        assert_eq!(events.len(), 3);
        assert_eq!(budget.take_dropped(), Dropped { events: 2, bytes: 7 });

        let mut later = vec![output("x"), TranscriptEvent::text(EventKind::Error, "it failed")];
        budget.admit(&mut later);
        assert_eq!(later.len(), 1, "the error is kept, the note is not repeated");
        assert_eq!(later[0].text, "it failed");
        assert_eq!(budget.take_dropped(), Dropped { events: 1, bytes: 1 });
    }

    #[test]
    fn no_cap_keeps_everything() {
        let mut budget = TranscriptBudget::new(None, u64::MAX / 2, false);
        let mut events = vec![output("a"); 1000];
        budget.admit(&mut events);
        assert_eq!(events.len(), 1000);
        assert_eq!(budget.take_dropped(), Dropped::default());
    }

    #[test]
    fn a_raw_log_keeps_its_first_bytes_and_says_how_many_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout.log");
        let mut log = RawLog::new(crate::home::open_private_append(&path).unwrap(), 8);
        log.write(b"12345");
        log.write(b"6789abc");
        log.close();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("12345678\n[corral: 4 B more"), "{text}");
    }
}
