//! How Corral writes fixed things as text, one way everywhere: timestamps
//! and durations (`time`), and the words of fixed choices such as a status
//! or an agent (`word`).

pub mod time;
pub mod word;
