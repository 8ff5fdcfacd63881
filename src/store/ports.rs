//! The port blocks of runs (`runs.ports_first`, `ports_count`): a free
//! block for a new run, chosen inside its insert's IMMEDIATE write so two
//! launches at once never share a port.

use std::collections::HashSet;

use crate::ports::PortBlock;
use crate::run::RunStatus;

/// The first block of `count` ports no active run holds and nothing in
/// `listening` uses.
pub(super) fn free_block(
    tx: &rusqlite::Transaction<'_>,
    count: u16,
    listening: &HashSet<u16>,
) -> rusqlite::Result<Option<PortBlock>> {
    let sql = format!(
        "SELECT ports_first, ports_count FROM runs WHERE ports_first IS NOT NULL AND status IN {}",
        RunStatus::active_sql()
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let taken = stmt
        .query_map([], |r| Ok(PortBlock { first: r.get::<_, i64>(0)? as u16, count: r.get::<_, i64>(1)? as u16 }))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(crate::ports::free_block(count, &taken, listening))
}
