//! How Corral writes fixed things as text, one way everywhere: timestamps
//! and durations (`time`), and the words of fixed choices such as a status
//! or an agent (`word`), and what agents wrote as a terminal may show it
//! (`shown`).

pub mod shown;
pub mod time;
pub mod word;
