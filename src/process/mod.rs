//! Everything that touches the operating system's processes: spawning
//! detached, process groups, signals, reaping, and reading `/proc`.
//!
//! Nothing outside this module calls `libc` or `nix`. `unix.rs` holds what
//! any Unix has; `linux.rs` what needs Linux (subreaper, PDEATHSIG, `/proc`).

pub mod cgroup;
mod fd_pass;
mod fork;
mod likeness;
mod linux;
mod start;
mod told;
mod unfollowed;
mod unix;

pub use fd_pass::{peer_pid, recv_fd, recv_fds, send_fd, send_fds};
pub use fork::{fork_detached, Forked, Middle};
pub use likeness::{become_like, Unlike};
pub use linux::{
    age, ancestry, children_cpu_seconds, children_of, descendants, disk_free, env_var_of, exe_of, group_members,
    group_of, has_any_env_var, has_env_var, has_unreaped_child, is_alive, listening_ports, processes_with_env,
    session_of, set_child_subreaper, start_time, state_of, switches, try_user_namespace, waits_for_a_child, ProcessId,
};
pub use start::{prepare_run_command, start_agent, AgentStart, StartedAgent};
pub use told::{Bell, FolderWatch, PidFd, Waker};
pub use unfollowed::{hand_to, is_a_link, names_in, open_beneath, open_regular, pin, read_regular, Handed};
pub use unix::{
    adopt_inherited, close_all_but, connect_now, die_with_parent, exec, keep_across_exec, make_nonblocking,
    monotonic_now, read_available, reap_any, redirect_output, return_free_memory, signal_group, spawn_detached,
    terminal_width, wait_readable, FileLock, Readiness, Reaped, Sig, SignalPipe,
};
