//! `corral tail RUN [--follow]`: a run's transcript as text; with --follow,
//! new events as they are committed, until the run ends.

use std::io::Write;

use corral::adapter::EventKind;
use corral::store::StoredEvent;
use corral::watch::Watcher;
use corral::Store;

/// Events read from the store per query.
const PAGE: usize = 1000;

pub fn run(
    store: &mut Store,
    id: &str,
    follow: bool,
    shepherd: &corral::queue::ShepherdCommand,
    out: &mut impl Write,
) -> anyhow::Result<i32> {
    let id = store.find_run(id)?.id;
    let mut watcher = Watcher::new(store)?;
    let mut after = 0;
    loop {
        // Read the status before the events: a run seen terminal here has
        // committed its last event before, so the drain below gets it all.
        let ended = store.run(&id)?.status.is_terminal() && !store.reopens_soon(&id)?;
        loop {
            let events = store.events_after(&id, after, PAGE)?;
            for event in &events {
                print_event(event, out)?;
            }
            out.flush()?;
            match events.last() {
                Some(last) => after = last.seq,
                None => break,
            }
        }
        if !follow || ended {
            break;
        }
        let recheck = std::time::Instant::now() + corral::heal::HEAL_EVERY;
        watcher.changed_before(store, Some(recheck))?;
        corral::heal::heal(store, shepherd)?;
    }
    if follow {
        let run = store.run(&id)?;
        let reason = run.stop_reason.map(|r| format!(" ({r})")).unwrap_or_default();
        writeln!(out, "── {} {}{reason}", run.id, run.status)?;
        if let Some(error) = &run.error {
            writeln!(out, "── {error}")?;
        }
    }
    Ok(0)
}

fn print_event(event: &StoredEvent, out: &mut impl Write) -> std::io::Result<()> {
    match event.kind {
        EventKind::Output | EventKind::Text => {
            out.write_all(event.text.as_bytes())?;
            if !event.text.ends_with('\n') {
                writeln!(out)?;
            }
            Ok(())
        }
        kind => writeln!(out, "[{kind}] {}", event.text.trim_end()),
    }
}
