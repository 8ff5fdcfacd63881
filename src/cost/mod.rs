//! What a run costs and may cost: money (`budget`, and `price` for agents
//! that report tokens but no cost), a plan's or provider's usage limit
//! (`usage_limit`), and the machine's CPU and memory (`resources`).

pub mod budget;
pub mod price;
pub mod resources;
pub mod usage_limit;
