//! The port blocks of runs (`runs.ports_first`, `ports_count`): a free
//! block for a new run, chosen inside its insert's IMMEDIATE write so two
//! launches at once never share a port.

use std::collections::HashSet;

use crate::run::ports::PortBlock;
use crate::run::RunStatus;

/// The first block of `count` ports no run holds and nothing in
/// `listening` uses.
pub(super) fn free_block(
    tx: &rusqlite::Transaction<'_>,
    count: u16,
    listening: &HashSet<u16>,
) -> rusqlite::Result<Option<PortBlock>> {
    Ok(crate::run::ports::free_block(count, &taken(tx, "")?, listening))
}

/// The blocks runs but `except` hold: active runs, and ended ones whose
/// teardown has not run yet (it gets their port).
fn taken(tx: &rusqlite::Transaction<'_>, except: &str) -> rusqlite::Result<Vec<PortBlock>> {
    let sql = format!(
        "SELECT ports_first, ports_count FROM runs WHERE ports_first IS NOT NULL AND id <> ?1
           AND (status IN {} OR (torn_down_at IS NULL AND json_array_length(preset_json, '$.teardown') > 0))",
        RunStatus::active_sql()
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let blocks = stmt
        .query_map([except], |r| {
            Ok(PortBlock { first: r.get::<_, i64>(0)? as u16, count: r.get::<_, i64>(1)? as u16 })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(blocks)
}

/// Run `id`, reopened (a reply to a run that ended): its block again if
/// no active run took it meanwhile, else a free one (its block was free
/// while it had ended).
pub(super) fn renew(tx: &rusqlite::Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    let held: (Option<i64>, Option<i64>) =
        tx.query_row("SELECT ports_first, ports_count FROM runs WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (Some(first), Some(count)) = held else { return Ok(()) };
    let own = PortBlock { first: first as u16, count: count as u16 };
    let taken = taken(tx, id)?;
    if !taken.iter().any(|t| t.overlaps(&own)) {
        return Ok(());
    }
    if let Some(block) = crate::run::ports::free_block(own.count, &taken, &crate::run::ports::listening()) {
        tx.execute("UPDATE runs SET ports_first = ?2 WHERE id = ?1", rusqlite::params![id, block.first])?;
    }
    Ok(())
}
