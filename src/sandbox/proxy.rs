//! The sandbox's one way out when it may reach only some hosts: an HTTP
//! proxy in the shepherd (CONNECT for HTTPS, absolute URLs for plain HTTP)
//! that lets through the hosts allowed and refuses the rest, saying so.
//!
//! The sandbox has a network of its own with only loopback. As it starts,
//! [`enter`] (run by bubblewrap inside it, before the agent) listens on its
//! loopback, hands that listening socket to the shepherd over the run's
//! `net.sock`, points the agent's `HTTP(S)_PROXY` at it and becomes the
//! agent: nothing of Corral's stays in the sandbox, and the shepherd
//! accepts the agent's connections on a socket of the sandbox's network
//! and makes the allowed ones from its own.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The socket in the run's folder the sandbox hands its listener over.
pub fn socket_in(run_dir: &Path) -> PathBuf {
    run_dir.join("net.sock")
}

/// How long a host may take to accept a connection.
const CONNECT_WITHIN: Duration = Duration::from_secs(15);

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// How long an agent's connection may take to send its request head.
const HEAD_WITHIN: Duration = Duration::from_secs(30);

/// The most connections served at once for one run: each holds a thread of
/// the shepherd's, which an agent, hostile or looping, must not spend
/// (more are answered 503 at once, without a thread).
pub const MAX_AT_ONCE: usize = 64;

/// The shepherd's proxy for one run.
pub struct Proxy {
    shared: Arc<Shared>,
    wake: UnixStream,
    socket: PathBuf,
}

struct Shared {
    allowed: RwLock<Vec<String>>,
    /// Connections being served now (at most [`MAX_AT_ONCE`]).
    serving: AtomicUsize,
    /// The sandbox's listener being served: one, its latest turn's (an
    /// earlier turn's, its sandbox gone, is shut so its thread ends).
    listening: Mutex<Option<OwnedFd>>,
    /// Hosts refused and not yet shown.
    refused: Mutex<Vec<String>>,
    wake: UnixStream,
}

impl Proxy {
    /// Listens on `socket` for the sandbox's listeners (one per turn), and
    /// lets `hosts` through (`*.example.com`: its subdomains).
    pub fn start(socket: PathBuf, hosts: Vec<String>) -> io::Result<Proxy> {
        let _ = std::fs::remove_file(&socket);
        let handoff = UnixListener::bind(&socket)?;
        let (wake, wake_write) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        wake_write.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            allowed: RwLock::new(hosts),
            serving: AtomicUsize::new(0),
            listening: Mutex::new(None),
            refused: Mutex::new(Vec::new()),
            wake: wake_write,
        });
        let for_thread = Arc::clone(&shared);
        std::thread::Builder::new().name("proxy-handoff".into()).spawn(move || {
            for stream in handoff.incoming().flatten() {
                let Ok(Some(fd)) = crate::process::recv_fd(&stream) else { continue };
                let Ok(kept) = fd.try_clone() else { continue };
                let listener = TcpListener::from(fd);
                let shared = Arc::clone(&for_thread);
                if std::thread::Builder::new().name("proxy".into()).spawn(move || serve(listener, shared)).is_ok() {
                    let earlier = for_thread.listening.lock().unwrap_or_else(|e| e.into_inner()).replace(kept);
                    if let Some(earlier) = earlier {
                        // Wakes its thread's accept with an error: it ends.
                        let _ = nix::sys::socket::shutdown(earlier.as_raw_fd(), nix::sys::socket::Shutdown::Both);
                    }
                }
            }
        })?;
        Ok(Proxy { shared, wake, socket })
    }

    /// Lets `host` through from now on (`corral allow --host`).
    pub fn allow(&self, host: &str) {
        let mut allowed = self.shared.allowed.write().unwrap_or_else(|e| e.into_inner());
        if !allowed.iter().any(|h| h == host) {
            allowed.push(host.to_string());
        }
    }

    /// Readable when a host was refused.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// The hosts refused since the last call, each once.
    pub fn take_refused(&self) -> Vec<String> {
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        std::mem::take(&mut *self.shared.refused.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The ports an allowlist entry without one lets through: the web's.
const WEB_PORTS: [u16; 2] = [443, 80];

/// An allowlist entry as its host (or `*.domain`) and port: `host:8443`,
/// `[::1]:8080`; `None` for an entry without one (the web's ports).
pub fn entry_parts(entry: &str) -> (&str, Option<u16>) {
    if let Some(v6) = entry.strip_prefix('[') {
        return match v6.split_once("]:") {
            Some((host, port)) => (host, port.parse().ok()),
            None => (v6.trim_end_matches(']'), None),
        };
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// Whether `host` on `port` is one of `allowed`: an entry's host (a
/// `*.example.com` covers its subdomains, not itself) on its port, or on
/// 443 or 80 where it names none. A local gateway's `127.0.0.1:4000`
/// opens that port alone; `github.com` is not `github.com:22`.
pub fn allows(allowed: &[String], host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    allowed.iter().any(|a| {
        let (name, on) = entry_parts(a);
        let port_ok = match on {
            Some(on) => on == port,
            None => WEB_PORTS.contains(&port),
        };
        port_ok
            && match name.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => name.eq_ignore_ascii_case(&host),
            }
    })
}

/// How a refused `host` on `port` is said, as an entry that would allow it.
fn entry_for(host: &str, port: u16) -> String {
    match (WEB_PORTS.contains(&port), host.contains(':')) {
        (true, _) => host.to_string(),
        (false, true) => format!("[{host}]:{port}"),
        (false, false) => format!("{host}:{port}"),
    }
}

/// Accepts the agent's connections until its listener is shut (a later
/// turn's replaced it) or fails.
fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::ConnectionAborted => {
                continue
            }
            Err(_) => return,
        };
        let Some(slot) = Serving::take(&shared) else {
            let _ = client.set_write_timeout(Some(Duration::from_secs(1)));
            let busy = format!("more than {MAX_AT_ONCE} connections at once through the sandbox's proxy");
            let _ = answer(&client, "503 Service Unavailable", &busy);
            continue;
        };
        let shared = Arc::clone(&shared);
        let _ = std::thread::Builder::new().name("proxy-conn".into()).spawn(move || {
            let _slot = slot;
            let _ = handle(client, &shared);
        });
    }
}

/// One of the [`MAX_AT_ONCE`] connections served at once, given back when
/// dropped.
struct Serving(Arc<Shared>);

impl Serving {
    fn take(shared: &Arc<Shared>) -> Option<Serving> {
        let taken =
            shared.serving.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_AT_ONCE).then_some(n + 1));
        taken.ok().map(|_| Serving(Arc::clone(shared)))
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection of the agent's: its request read, allowed or refused.
fn handle(client: TcpStream, shared: &Shared) -> io::Result<()> {
    // A connection that says nothing gives its place back.
    client.set_read_timeout(Some(HEAD_WITHIN))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if reader.read_until(b'\n', &mut head)? == 0 || head.len() > MAX_HEAD {
            return Ok(());
        }
    }
    client.set_read_timeout(None)?;
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or("");
    let mut words = first.split_whitespace();
    let (method, target, version) =
        (words.next().unwrap_or(""), words.next().unwrap_or(""), words.next().unwrap_or("HTTP/1.1"));
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let (host, port, path) = if connect {
        let (host, port) = split_port(target, 443);
        (host, port, String::new())
    } else {
        let Some(rest) = target.strip_prefix("http://") else {
            return answer(&client, "400 Bad Request", "corral's sandbox proxy takes CONNECT or absolute http:// URLs");
        };
        let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
        let (host, port) = split_port(authority, 80);
        (host, port, path)
    };
    let allowed = allows(&shared.allowed.read().unwrap_or_else(|e| e.into_inner()), &host, port);
    if !allowed {
        let entry = entry_for(&host, port);
        shared.refused.lock().unwrap_or_else(|e| e.into_inner()).push(entry.clone());
        let _ = (&shared.wake).write(b"!");
        let why = format!("{entry} is not in the sandbox's network allowlist: {entry}");
        return answer(&client, "403 Forbidden", &why);
    }
    let upstream = match (host.as_str(), port).to_socket_addrs().and_then(|mut addrs| {
        let addr = addrs.next().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        TcpStream::connect_timeout(&addr, CONNECT_WITHIN)
    }) {
        Ok(upstream) => upstream,
        Err(e) => return answer(&client, "502 Bad Gateway", &format!("cannot reach {host}:{port}: {e}")),
    };
    let mut to_upstream = upstream.try_clone()?;
    if connect {
        (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        // The request as the host expects it: its path, not the full URL.
        let rest = &text[first.len()..];
        to_upstream.write_all(format!("{method} {path} {version}{rest}").as_bytes())?;
    }
    // Whatever the agent sent after its head is already read into `reader`.
    to_upstream.write_all(reader.buffer())?;
    let mut from_client = reader.into_inner();
    let up = std::thread::Builder::new().name("proxy-up".into()).spawn(move || {
        let _ = io::copy(&mut from_client, &mut to_upstream);
        let _ = to_upstream.shutdown(Shutdown::Write);
    })?;
    let _ = io::copy(&mut &upstream, &mut &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

fn split_port(authority: &str, default: u16) -> (String, u16) {
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => match port.parse() {
            Ok(port) => (host.to_ascii_lowercase(), port),
            Err(_) => (authority.to_ascii_lowercase(), default),
        },
        _ => (authority.to_ascii_lowercase(), default),
    }
}

/// Answers the agent and closes: one write, so the answer arrives whole
/// (`write!` on a socket sends each formatted piece on its own).
fn answer(mut client: &TcpStream, status: &str, text: &str) -> io::Result<()> {
    let body = format!("corral: {text}\n");
    let whole = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(whole.as_bytes())
}

/// Inside the sandbox, before its agent: listens on loopback, hands the
/// listener to the shepherd over `socket`, points the proxy variables at it
/// and becomes `program`. Returns only if that fails.
pub fn enter(socket: &Path, program: &OsString, args: &[OsString]) -> io::Error {
    let listener = match TcpListener::bind(("127.0.0.1", 0)) {
        Ok(listener) => listener,
        Err(e) => return io::Error::other(format!("cannot listen on the sandbox's loopback: {e}")),
    };
    let port = match listener.local_addr() {
        Ok(addr) => addr.port(),
        Err(e) => return e,
    };
    let handed = UnixStream::connect(socket).and_then(|stream| crate::process::send_fd(&stream, listener.as_fd()));
    if let Err(e) = handed {
        return io::Error::other(format!("cannot reach the shepherd's proxy at {}: {e}", socket.display()));
    }
    drop(listener);
    let proxy = format!("http://127.0.0.1:{port}");
    let mut command = std::process::Command::new(program);
    command.args(args);
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        command.env(name, &proxy);
    }
    // Loopback here is the sandbox's own: every host goes through the proxy.
    for name in ["NO_PROXY", "no_proxy"] {
        command.env_remove(name);
    }
    command.exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_their_subdomains_are_matched_exactly() {
        let allowed = vec!["api.anthropic.com".to_string(), "*.npmjs.org".to_string()];
        assert!(allows(&allowed, "api.anthropic.com", 443));
        assert!(allows(&allowed, "API.Anthropic.com", 443));
        assert!(allows(&allowed, "registry.npmjs.org", 80));
        assert!(!allows(&allowed, "npmjs.org", 443));
        assert!(!allows(&allowed, "anthropic.com", 443));
        assert!(!allows(&allowed, "api.anthropic.com.evil.io", 443));
        assert_eq!(split_port("example.com:8443", 443), ("example.com".into(), 8443));
        assert_eq!(split_port("example.com", 443), ("example.com".into(), 443));
    }

    #[test]
    fn a_host_is_allowed_on_its_own_port_only() {
        let allowed = vec!["github.com".to_string(), "127.0.0.1:4000".to_string(), "[::1]:5000".to_string()];
        assert!(allows(&allowed, "github.com", 443));
        assert!(!allows(&allowed, "github.com", 22), "CONNECT github.com:22 is not the web");
        assert!(allows(&allowed, "127.0.0.1", 4000));
        assert!(!allows(&allowed, "127.0.0.1", 5432), "a local gateway opens its own port, no other service");
        assert!(!allows(&allowed, "127.0.0.1", 443));
        assert!(allows(&allowed, "::1", 5000));
        assert_eq!(entry_for("github.com", 22), "github.com:22");
        assert_eq!(entry_for("github.com", 443), "github.com");
    }
}
