//! Whether a process that waits on runs really blocks its run's agent.
//!
//! A run gives its slot up while its agent is blocked in a wait, never
//! because some process of it waits: a `corral wait CHILD &` in the
//! background (a shell job, Claude Code's Bash tool with
//! `run_in_background`) while the agent works on holds the slot. The kernel
//! says who is blocked: each process between the waiter and the agent must
//! sleep in `wait(2)` for a child and have no other child at work (only
//! other waiters, or processes themselves so blocked). The agent is then
//! blocked itself when it too sleeps in `wait(2)` (a shell, a script);
//! an agent that runs tools from an event loop (Claude Code, Codex, Gemini
//! CLI, opencode, pi) is blocked while its stream says the tool call that
//! runs the wait is open (see `WaitBlocks::WhileToolOpen`). An MCP server's
//! `wait_agents` is such a tool call by construction.
//!
//! Where the kernel does not show what a process sleeps in (no `wchan`),
//! a wait blocks as it always did: better a slot given than a deadlock.

use crate::process::{self, ProcessId};
use crate::run::Run;
use crate::store::{Store, StoreError, WaitBlocks};

/// How the waiting process serves the run's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiter {
    /// A command the agent (or a shell of it) started: `corral wait`,
    /// `corral launch --wait`, `corral reply --wait`.
    Command,
    /// A tool call of the agent's (the MCP server's `wait_agents`).
    ToolCall,
}

/// How deep a tree of waiting processes is followed.
const MAX_DEPTH: usize = 16;

/// Whether process `me`, waiting on behalf of `run`, blocks its agent.
pub fn judge(store: &Store, run: &Run, me: i32, waiter: Waiter) -> Result<WaitBlocks, StoreError> {
    let Some(agent) = run.agent_pid.zip(run.agent_start).map(|(pid, start)| ProcessId { pid, start }) else {
        return Ok(WaitBlocks::No);
    };
    if me == agent.pid {
        return Ok(WaitBlocks::Always);
    }
    // From the waiter up to the agent, nearest first.
    let chain = process::ancestry(me);
    let Some(at) = chain.iter().position(|p| *p == agent) else { return Ok(WaitBlocks::No) };
    if waiter == Waiter::ToolCall {
        return Ok(WaitBlocks::WhileToolOpen);
    }
    let mut waiting = store.waiting_pids(&run.id)?;
    waiting.push(me);
    for pair in chain[..=at].windows(2) {
        let (below, above) = (pair[0].pid, pair[1].pid);
        let is_agent = above == agent.pid;
        match blocked_on(above, below, &waiting) {
            None => return Ok(WaitBlocks::Always),
            Some(true) if is_agent => return Ok(WaitBlocks::Always),
            Some(true) => {}
            Some(false) if is_agent => return Ok(WaitBlocks::WhileToolOpen),
            Some(false) => return Ok(WaitBlocks::No),
        }
    }
    Ok(WaitBlocks::No)
}

/// True if `pid` sleeps in `wait(2)` and every child of it but `below` is
/// a waiter or so blocked itself; `None` if the kernel does not say. What
/// is read of it is one moment: a shell that woke between the looks (its
/// `sleep` ended, reaped, the next not forked yet) is not blocked.
fn blocked_on(pid: i32, below: i32, waiting: &[i32]) -> Option<bool> {
    let before = process::switches(pid);
    let blocked = blocked_now(pid, below, waiting)?;
    Some(blocked && before.is_some() && process::switches(pid) == before)
}

fn blocked_now(pid: i32, below: i32, waiting: &[i32]) -> Option<bool> {
    if !process::waits_for_a_child(pid)? {
        return Some(false);
    }
    // A child that ended and is not reaped yet is about to wake it: a shell
    // between two commands of its loop, not a shell blocked on the waiter
    // (on a loaded machine that moment can last long enough to be seen
    // twice).
    if process::has_unreaped_child(pid) {
        return Some(false);
    }
    Some(process::children_of(pid).into_iter().all(|c| c == below || only_waits(c, waiting, 0)))
}

/// True if process `pid` is a waiter, or sleeps in `wait(2)` with only such
/// processes below it.
fn only_waits(pid: i32, waiting: &[i32], depth: usize) -> bool {
    if waiting.contains(&pid) {
        return true;
    }
    let before = process::switches(pid);
    depth < MAX_DEPTH
        && process::waits_for_a_child(pid) == Some(true)
        && process::children_of(pid).into_iter().all(|c| only_waits(c, waiting, depth + 1))
        && before.is_some()
        && process::switches(pid) == before
}
