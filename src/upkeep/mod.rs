//! Upkeep: what keeps the store true and moving whoever looks. Every
//! process that opens the store heals it (`heal`): a run whose shepherd
//! died is ended truthfully (`reconcile`), free slots take queued runs
//! (`queue`), a merge cut short is finished (`merge_set`), a waker stands
//! for a usage limit's reset (`limit_waker`); and ended runs go by
//! themselves as `[retention]` says (`retention`).

pub mod heal;
pub mod limit_waker;
pub mod merge_set;
pub mod queue;
pub mod reconcile;
pub mod retention;
