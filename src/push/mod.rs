//! Answers from the phone, with no port opened: what needs the user (a
//! budget reached, runs paused at a usage limit) is pushed to an ntfy
//! topic (ntfy.sh or a self-hosted server) and/or a webhook, with buttons
//! ("Allow $2 more", "Stop"). A button makes the phone publish a signed
//! answer (see `token`) on the reply topic (`<topic>-answers`), which the
//! tray, or `corral push listen` on a headless box, follows: an outgoing
//! connection, nothing listening. An answer acts once, wherever the user
//! gives it first; pushes carry no task text or transcript unless
//! `[push] details = true`.
//!
//! `outbox` decides what to push, and each push is kept in the store under
//! its key, so two senders (two trays, a tray and `push listen`) send it
//! once and a server that is down loses nothing; `listen` follows the
//! answers; `ntfy` speaks the server's protocol.

pub mod listen;
mod ntfy;
pub mod outbox;
pub mod token;

pub use ntfy::{Answering, Channel, PushError};
