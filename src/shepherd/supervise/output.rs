//! The agent's output read into the run: stdout's lines through the
//! adapter (concluding at the terminal event), stderr's as marked events,
//! and the sandbox's refusals beside them, in the order they were written.

use std::time::Instant;

use super::Supervisor;
use crate::adapter::{EventKind, StreamLine};
use crate::process::Readiness;
use crate::shepherd::{OsDoing, ShepherdError};

impl Supervisor {
    /// Reads stdout, at most `budget` bytes, concluding as soon as the
    /// terminal event is read.
    pub(super) fn read_stdout(&mut self, budget: usize) -> Result<(), ShepherdError> {
        let mut read = 0;
        while read < budget && self.streams.stdout_open() {
            let over = self.clock.turn_is_over();
            let Supervisor { streams, session, recorder, .. } = self;
            let readiness = streams
                .read_stdout(|bytes, dropped| {
                    session.read_line(StreamLine { bytes, dropped }, recorder.pending(), over)
                })
                .doing("reading the agent's stdout")?;
            match readiness {
                Readiness::Data(n) => {
                    read += n;
                    self.clock.saw_output(Instant::now());
                    self.after_lines()?;
                }
                Readiness::Empty => return Ok(()),
                Readiness::Closed => return self.after_lines(),
            }
        }
        Ok(())
    }

    /// The stream ended: a last line without LF still counts.
    pub(super) fn finish_stdout(&mut self) -> Result<(), ShepherdError> {
        let over = self.clock.turn_is_over();
        let Supervisor { streams, session, recorder, .. } = self;
        streams
            .finish_stdout(|bytes, dropped| session.read_line(StreamLine { bytes, dropped }, recorder.pending(), over));
        self.after_lines()
    }

    /// Concludes on the terminal event's verdict, or commits a full batch.
    pub(super) fn after_lines(&mut self) -> Result<(), ShepherdError> {
        self.clock.settling(self.session.adapter().settling(), Instant::now());
        if let Some(verdict) = self.session.take_verdict() {
            return self.conclude(verdict);
        }
        if self.recorder.batch_is_full() {
            self.flush_events()?;
        }
        self.keep_budget()
    }

    pub(super) fn read_stderr(&mut self) -> Result<(), ShepherdError> {
        let read = self.streams.read_stderr().doing("reading the agent's stderr")?;
        if read.saw_data {
            self.clock.saw_output(Instant::now());
        }
        self.stderr_events(read.events);
        Ok(())
    }

    /// Whole stderr lines become transcript events (marked stderr), in
    /// order with the stream's.
    pub(super) fn stderr_events(&mut self, events: Vec<String>) {
        if events.is_empty() {
            return;
        }
        // What the agent wrote to stdout before comes first.
        self.session.flush_output(self.recorder.pending());
        let from = self.recorder.pending().len();
        for text in events {
            self.recorder.push(EventKind::Stderr, text);
        }
        self.session.note_denials(self.recorder.pending(), from);
    }

    /// Hosts the sandbox's proxy refused become denials in the transcript.
    pub(super) fn note_refused_hosts(&mut self) -> Result<(), ShepherdError> {
        let hosts = self.session.launch().proxy.as_ref().map(|p| p.take_refused()).unwrap_or_default();
        // Written with the next flush, after what the agent said before.
        self.session.flush_output(self.recorder.pending());
        self.session.refused_hosts(hosts, self.recorder.pending());
        Ok(())
    }
}
