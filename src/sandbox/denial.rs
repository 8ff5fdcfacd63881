//! What the sandbox refused, recognised in what the agent's tools said: a
//! write outside what it may write ("Read-only file system"), a read of a
//! denied place ("Permission denied" on a path the sandbox masks), a host
//! it may not reach. Bubblewrap keeps no log of its own; the tools' errors
//! name the path or host, and the sandbox's rules say whether the refusal
//! was the sandbox's.

use std::path::{Path, PathBuf};

use super::{expand, Read, Sandbox};

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// A write to this path (a file written or made).
    Write(PathBuf),
    /// A folder made at this path (`mkdir`, as the tool said).
    Mkdir(PathBuf),
    /// A read of this path.
    Read(PathBuf),
    /// A connection to this host.
    Connect(String),
}

impl Denial {
    /// How it is shown, with what widens the sandbox for the run (whose
    /// user's home is `home`), exactly what allowing it would.
    pub fn describe(&self, run_id: &str, home: &Path) -> String {
        match self {
            Denial::Write(path) | Denial::Mkdir(path) => match self.allowance(home) {
                Some(Allowance::Write { path: allowed, make }) => format!(
                    "sandbox refused writing {}: to allow it and go on, {}corral allow {run_id} --write {}",
                    path.display(),
                    match make {
                        Some(Made::Folder) => format!("mkdir {} && ", quoted(&allowed.to_string_lossy())),
                        Some(Made::File) => format!("touch {} && ", quoted(&allowed.to_string_lossy())),
                        None => String::new(),
                    },
                    quoted(&allowed.to_string_lossy())
                ),
                _ if never_by_click(path, home) => format!(
                    "sandbox refused writing {}: a place your shell, desktop or tools read settings or programs \
                     from, never widened by one click (what the agent printed may be its own words); if you mean \
                     it, `corral allow {run_id} --write` the exact path yourself",
                    path.display()
                ),
                _ => format!(
                    "sandbox refused writing {}: no folder of it can be allowed (it is /, your home or above it, or \
                     its folder does not exist); make the folder yourself and `corral allow {run_id} --write` it",
                    path.display()
                ),
            },
            Denial::Read(path) => format!("sandbox refused reading {} (a denied place)", path.display()),
            Denial::Connect(host) => {
                format!(
                    "sandbox refused connecting to {host}: to allow it and go on, corral allow {run_id} --host {}",
                    quoted(host)
                )
            }
        }
    }

    /// As the run's list of refusals keeps it (`denied`).
    pub fn entry(&self) -> String {
        match self {
            Denial::Write(path) => format!("sandbox: write {}", path.display()),
            Denial::Mkdir(path) => format!("sandbox: mkdir {}", path.display()),
            Denial::Read(path) => format!("sandbox: read {}", path.display()),
            Denial::Connect(host) => format!("sandbox: connect {host}"),
        }
    }
}

/// True if `path` (as it resolves) is where the user's shell, desktop,
/// tools or git read settings or programs from, so a write there runs
/// outside the sandbox later: a hidden entry of the home `home` and all in
/// it (`~/.bashrc`, `~/.ssh/`, `~/.config/autostart/`, `~/.local/bin/`,
/// `~/.cache/`), any `.git` folder (another repository's hooks), any `bin`
/// or `sbin` folder (`~/bin` is put on `PATH` once it exists), and any
/// folder on `PATH` or holding one. A refusal is read from what the agent
/// printed, which the agent chooses: "Allow and continue" never widens a
/// sandbox there, nor makes a file there.
pub fn never_by_click(path: &Path, home: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (path, home) = (resolved(path), resolved(home));
    let hidden_in_home = path
        .strip_prefix(&home)
        .ok()
        .and_then(|rest| rest.components().next())
        .is_some_and(|c| c.as_os_str().as_bytes().starts_with(b"."));
    let named = path.components().any(|c| matches!(c.as_os_str().as_bytes(), b".git" | b"bin" | b"sbin"));
    let on_path = std::env::var_os("PATH").is_some_and(|dirs| {
        std::env::split_paths(&dirs)
            .filter(|d| d.is_absolute())
            .map(|d| resolved(&d))
            .any(|d| path.starts_with(&d) || d.starts_with(&path))
    });
    hidden_in_home || named || on_path || linked_from_home(&path, &home)
}

/// Whether a link where the user's tools read settings (the home's own
/// entries, `~/.config`, `~/.local/bin`, `~/.local/share`) leads into
/// `path` or holds it: `~/.bashrc` → `~/dotfiles/bashrc` makes
/// `~/dotfiles` the shell's settings, whatever its name.
fn linked_from_home(path: &Path, home: &Path) -> bool {
    let folders = [home.to_path_buf(), home.join(".config"), home.join(".local/bin"), home.join(".local/share")];
    folders.iter().flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten()).any(|entry| {
        entry.file_type().is_ok_and(|t| t.is_symlink())
            && std::fs::canonicalize(entry.path())
                .is_ok_and(|target| target.starts_with(path) || path.starts_with(&target))
    })
}

/// `path` with every link on the way resolved, as far as it exists (the
/// rest as written); a path that climbs (`..`) past what exists is kept
/// as written, and judged so.
fn resolved(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            if rest.iter().any(|c: &&std::ffi::OsStr| *c == "..") {
                return path.to_path_buf();
            }
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A name no file can have: what holds it is no refusal to allow.
fn has_nul(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().contains(&0)
}

/// `word` as one shell word: a path or host is the agent's to choose, and
/// the command a denial suggests is pasted into the user's shell.
fn quoted(word: &str) -> String {
    // (A word holding a NUL is never a path here: see `has_nul`.)
    shlex::try_quote(word).map(|q| q.into_owned()).unwrap_or_default()
}

/// Whether an entry of a run's `denied` list is the sandbox's.
pub fn is_entry(entry: &str) -> bool {
    entry.starts_with("sandbox: ")
}

impl Denial {
    /// The refusal an entry of a run's `denied` list ([`Denial::entry`])
    /// names, if it is the sandbox's.
    pub fn from_entry(entry: &str) -> Option<Denial> {
        let rest = entry.strip_prefix("sandbox: ")?;
        let (kind, value) = rest.split_once(' ')?;
        match kind {
            "write" => Some(Denial::Write(value.into())),
            "mkdir" => Some(Denial::Mkdir(value.into())),
            "read" => Some(Denial::Read(value.into())),
            "connect" => Some(Denial::Connect(value.into())),
            _ => None,
        }
    }

    /// What "allow and continue" widens the sandbox by for it: for a
    /// refused write, the file's folder (a tool that writes a file also
    /// makes its temporary files beside it), or where that is `/`, the
    /// user's home or above it, the refused path itself (made first if
    /// missing, as what was refused: a folder for a `mkdir`, an empty file
    /// for a write: see [`Allowance::make`]); a refused host. Never a denied
    /// read (those are the user's secrets: only their sandbox's `read:`
    /// lets one be read), never `/` or a folder holding the user's home
    /// (`home`), never a path whose folder does not exist, and nothing of
    /// where the user's tools read settings or programs from ([`never_by_click`]).
    pub fn allowance(&self, home: &Path) -> Option<Allowance> {
        match self {
            Denial::Write(path) | Denial::Mkdir(path) if never_by_click(path, home) => None,
            Denial::Write(path) | Denial::Mkdir(path) => {
                // Judged, and named, where links on the way lead.
                let (path, home) = (&resolved(path), resolved(home));
                let too_wide = |p: &Path| p.parent().is_none() || home.starts_with(p);
                let folder = path.parent().filter(|f| f.is_dir() && !too_wide(f) && !never_by_click(f, &home));
                match folder {
                    Some(folder) => Some(Allowance::Write { path: folder.to_path_buf(), make: None }),
                    None if too_wide(path) => None,
                    None if path.exists() => Some(Allowance::Write { path: path.to_path_buf(), make: None }),
                    None if path.parent().is_some_and(Path::is_dir) => {
                        let made = if matches!(self, Denial::Mkdir(_)) { Made::Folder } else { Made::File };
                        Some(Allowance::Write { path: path.to_path_buf(), make: Some(made) })
                    }
                    None => None,
                }
            }
            // Only what the proxy refused is recorded as a host (never the
            // agent's words, which could name `*.com`): a literal name.
            Denial::Connect(host) if host.contains('*') => None,
            Denial::Connect(host) => Some(Allowance::Host(host.clone())),
            Denial::Read(_) => None,
        }
    }
}

/// What allowing one refusal widens a sandbox by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowance {
    /// A path written; `make`: the refused path itself, made first (it did
    /// not exist).
    Write { path: PathBuf, make: Option<Made> },
    /// A host reached.
    Host(String),
}

/// What a refused path that did not exist is made as before it is allowed:
/// what the tool was refused (a file made a folder would fail the agent's
/// retry with "Is a directory" and leave a stray folder behind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// A refused `mkdir`.
    Folder,
    /// A refused write of a new file: made empty, as `touch` would.
    File,
}

impl Allowance {
    /// Makes the refused path, if it is one to make. One that exists
    /// meanwhile is left as it is.
    pub fn make(&self) -> std::io::Result<()> {
        let made = match self {
            Allowance::Write { path, make: Some(Made::Folder) } => std::fs::create_dir(path),
            Allowance::Write { path, make: Some(Made::File) } => {
                std::fs::OpenOptions::new().write(true).create_new(true).open(path).map(drop)
            }
            _ => return Ok(()),
        };
        match made {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }
}

/// The refusals `text` (a tool's result or output) says were the
/// sandbox's, for a run whose user's home is `home` and whose agent works
/// in `cwd` (a tool names a path as it was given: `reviewed.txt: Read-only
/// file system`).
pub fn in_text(text: &str, sandbox: &Sandbox, home: &Path, cwd: &Path) -> Vec<Denial> {
    let mut found = Vec::new();
    for line in text.lines() {
        if let Some(path) = path_said_with(line, "Read-only file system", cwd).filter(|p| !has_nul(p)) {
            // GNU mkdir's `cannot create directory`, Node's `EROFS: …, mkdir '/x'`.
            let lower = line.to_ascii_lowercase();
            let folder = lower.contains("cannot create directory") || lower.contains(", mkdir ");
            found.push(if folder { Denial::Mkdir(path) } else { Denial::Write(path) });
        }
        if let Some(path) = path_said_with(line, "Permission denied", cwd).filter(|p| !has_nul(p)) {
            if let Read::Deny(places) = &sandbox.read {
                if places.iter().any(|p| path.starts_with(expand(p, home))) {
                    found.push(Denial::Read(path));
                }
            }
        }
    }
    found.dedup();
    found
}

/// The path an error line names beside `error` (any case): after it
/// (`[Errno 30] Read-only file system: '/x'`, zsh's `read-only file
/// system: x`, Node's `EROFS: read-only file
/// system, open '/x'`) or before it (`cannot create /x:
/// Read-only file system`, `touch: cannot touch '/x': …`). A quoted path
/// is taken whole between its quotes, and an unquoted absolute one from
/// its `/` on: a name with spaces (`/home/u/my notes.txt`) is that name,
/// never its last word taken as a file of the project.
fn path_said_with(line: &str, error: &str, cwd: &Path) -> Option<PathBuf> {
    // ASCII lowercase keeps every byte where it was.
    let at = line.to_ascii_lowercase().find(&error.to_ascii_lowercase())?;
    let (before, after) = (&line[..at], &line[at + error.len()..]);
    let place = |word: &str| if word.starts_with('/') { PathBuf::from(word) } else { cwd.join(word) };
    // zsh and Python say the path, as given, right after a colon:
    // `read-only file system: reviewed.txt`, `…: 'out/rel.txt'`.
    if let Some(rest) = after.strip_prefix(':').map(str::trim) {
        let word = match first_quoted(rest) {
            Some(quoted) => Some(quoted),
            None => rest.split_whitespace().next().map(|w| w.trim_matches(|c| matches!(c, ',' | ')' | '('))),
        };
        if let Some(word) = word.filter(|w| !w.is_empty()) {
            return Some(place(word));
        }
    }
    // Node: `…, open '/x'`.
    if let Some(quoted) = first_quoted(after).filter(|q| q.starts_with('/')) {
        return Some(PathBuf::from(quoted));
    }
    if let Some(word) = after.split_whitespace().find(|w| w.starts_with('/')) {
        return Some(PathBuf::from(word.trim_end_matches([',', ')'])));
    }
    // Before it: `cannot create X:`, `bash: line 1: X:`, `cannot touch 'X':`.
    let said = before.trim_end().strip_suffix(':')?.trim_end();
    if let Some(quoted) = last_quoted(said) {
        return (!quoted.is_empty()).then(|| place(quoted));
    }
    if let Some(at) = said.find(" /") {
        // `bash: /x/deploy.sh: line 3: log.txt`: the path is the last said.
        let said = &said[at + 1..];
        return match said.rfind(": ") {
            Some(cut) => Some(place(&said[cut + 2..])),
            None => Some(PathBuf::from(said)),
        };
    }
    if said.starts_with('/') && !said.contains(": ") {
        return Some(PathBuf::from(said));
    }
    let word = said.split_whitespace().last()?;
    let looks_like_a_path = !word.is_empty() && !word.ends_with(':') && word != "1" && !word.contains('=');
    (looks_like_a_path && word.chars().any(|c| c == '.' || c == '/')).then(|| cwd.join(word))
}

/// The quote marks tools put around a path, opening and closing (GNU
/// tools in a UTF-8 locale quote with ‘ ’).
const QUOTES: [(char, char); 4] = [('\'', '\''), ('"', '"'), ('`', '\''), ('‘', '’')];

/// What `text` holds between its first quote mark and that quote's close.
fn first_quoted(text: &str) -> Option<&str> {
    let (at, open) = text.char_indices().find(|(_, c)| QUOTES.iter().any(|(o, _)| o == c))?;
    let close = QUOTES.iter().find(|(o, _)| *o == open)?.1;
    let inner = &text[at + open.len_utf8()..];
    inner.find(close).map(|end| &inner[..end])
}

/// What `text`, ending with a closing quote mark, holds inside that quote.
fn last_quoted(text: &str) -> Option<&str> {
    let close = text.chars().last()?;
    let inner = &text[..text.len() - close.len_utf8()];
    let opens: Vec<char> = QUOTES.iter().filter(|(_, c)| *c == close).map(|(o, _)| *o).collect();
    if opens.is_empty() {
        return None;
    }
    let at = inner.rfind(|c| opens.contains(&c))?;
    let open_len = inner[at..].chars().next()?.len_utf8();
    Some(&inner[at + open_len..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Network;

    fn builder() -> Sandbox {
        Sandbox { network: Network::None, ..Sandbox::profile("builder").unwrap() }
    }

    #[test]
    fn the_tools_words_for_a_refusal_are_read() {
        let home = Path::new("/home/u");
        let said = "sh: 1: cannot create /etc/x: Read-only file system\n\
                    touch: cannot touch '/usr/y': Read-only file system\n\
                    OSError: [Errno 30] Read-only file system: '/opt/z'\n\
                    EROFS: read-only file system, open '/srv/n'\n\
                    cat: /home/u/.ssh/id_ed25519: Permission denied\n\
                    cat: /root/other: Permission denied\n\
                    curl: (6) Could not resolve host: example.com\n\
                    curl: (6) Could not resolve host: *.com\n";
        assert_eq!(
            in_text(said, &builder(), home, Path::new("/w")),
            [
                Denial::Write("/etc/x".into()),
                Denial::Write("/usr/y".into()),
                Denial::Write("/opt/z".into()),
                Denial::Write("/srv/n".into()),
                Denial::Read("/home/u/.ssh/id_ed25519".into()),
            ],
            "a host is offered only from what the proxy refused, never from the agent's words"
        );
        assert_eq!(Denial::Connect("*.com".into()).allowance(home), None);
        let all = Sandbox { network: Network::All, ..builder() };
        let relative = "/bin/bash: line 1: reviewed.txt: Read-only file system";
        assert_eq!(in_text(relative, &all, home, Path::new("/w")), [Denial::Write("/w/reviewed.txt".into())]);
    }

    /// zsh (Claude Code's shell where zsh is installed and SHELL does not
    /// name bash) says the error first and the path after it, as given.
    #[test]
    fn zshs_words_for_a_refusal_are_read() {
        let home = Path::new("/home/u");
        let said = "(eval):1: read-only file system: reviewed.txt
                    zsh:1: read-only file system: /tmp/zz
                    zsh:1: permission denied: /home/u/.ssh/id_ed25519
                    OSError: [Errno 30] Read-only file system: 'out/rel.txt'
";
        assert_eq!(
            in_text(said, &builder(), home, Path::new("/w")),
            [
                Denial::Write("/w/reviewed.txt".into()),
                Denial::Write("/tmp/zz".into()),
                Denial::Read("/home/u/.ssh/id_ed25519".into()),
                Denial::Write("/w/out/rel.txt".into()),
            ]
        );
    }

    /// A name with spaces is that name, whoever quotes it how; never its
    /// last word taken as a file of the project (whose folder, the whole
    /// project, "allow" would then widen a sandbox by).
    #[test]
    fn a_path_with_spaces_is_read_whole() {
        let home = Path::new("/home/u");
        let said = "sh: 1: cannot create /home/u/my notes.txt: Read-only file system\n\
                    touch: cannot touch '/home/u/a b': Read-only file system\n\
                    mkdir: cannot create directory ‘/home/u/c d’: Read-only file system\n\
                    OSError: [Errno 30] Read-only file system: '/home/u/e f'\n\
                    EROFS: read-only file system, open '/home/u/g h'\n\
                    /bin/bash: line 1: /home/u/i j: Read-only file system\n\
                    bash: /home/u/tools/deploy.sh: line 3: log.txt: Read-only file system\n";
        assert_eq!(
            in_text(said, &builder(), home, Path::new("/w")),
            [
                Denial::Write("/home/u/my notes.txt".into()),
                Denial::Write("/home/u/a b".into()),
                Denial::Mkdir("/home/u/c d".into()),
                Denial::Write("/home/u/e f".into()),
                Denial::Write("/home/u/g h".into()),
                Denial::Write("/home/u/i j".into()),
                Denial::Write("/w/log.txt".into()),
            ]
        );
    }

    /// The command a denial suggests is pasted into a shell: a name the
    /// agent chose is one quoted word there, whatever it holds.
    #[test]
    fn the_suggested_command_quotes_what_the_agent_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let evil = home.join("notes;touch${IFS}PWNED;#");
        let said = Denial::Write(evil.clone()).describe("r1", home);
        let quoted = shlex::try_quote(&evil.to_string_lossy()).unwrap().into_owned();
        assert!(said.contains(&format!("touch {quoted} && corral allow r1 --write {quoted}")), "{said}");
        assert_eq!(shlex::split(said.split("go on, ").nth(1).unwrap()).unwrap()[1], evil.to_string_lossy());
        let host = Denial::Connect("a.b;reboot".into()).describe("r1", home);
        assert!(host.ends_with("--host 'a.b;reboot'"), "{host}");
    }

    /// Where the shell, the desktop, tools and git read settings or
    /// programs from is never made or widened by one click, whatever the
    /// agent printed, nor by another name (a home reached through a link);
    /// a folder of the user's work is.
    #[test]
    fn where_programs_and_settings_are_read_is_never_widened_by_a_click() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("real-home");
        for made in [".ssh", ".config/autostart", ".cache/pip", "other/.git/hooks", "bin", "go/bin", "notes"] {
            std::fs::create_dir_all(home.join(made)).unwrap();
        }
        let linked = dir.path().join("home");
        std::os::unix::fs::symlink(&home, &linked).unwrap();
        let refused = [
            ".bash_profile",
            ".ssh/authorized_keys",
            ".config/autostart/x.desktop",
            ".local/bin/git",
            ".cache/pip/wheel",
            "other/.git/hooks/pre-commit",
            "bin/ls",
            "go/bin/tool",
        ];
        for path in refused {
            for (said, judged) in [(&home, &home), (&home, &linked), (&linked, &home)] {
                let denial = Denial::Write(said.join(path));
                assert_eq!(denial.allowance(judged), None, "{path} said under {said:?}, home {judged:?}");
                assert!(denial.describe("r1", judged).contains("never widened by one click"), "{path}");
            }
        }
        // Said through the link, judged by a home given as the link: the
        // home itself is never the folder allowed.
        assert_eq!(
            Denial::Write(home.join("new.txt"))
                .allowance(&linked)
                .map(|a| matches!(a, Allowance::Write { make: Some(Made::File), .. })),
            Some(true)
        );
        let notes = Denial::Write(linked.join("notes/today.md"));
        assert_eq!(notes.allowance(&linked), Some(Allowance::Write { path: home.join("notes"), make: None }));
    }

    /// GNU tools in a UTF-8 locale quote a path with ‘ ’.
    #[test]
    fn a_path_in_typographic_quotes_is_read() {
        let said = "mkdir: cannot create directory ‘/made-up’: Read-only file system";
        assert_eq!(
            in_text(said, &builder(), Path::new("/home/u"), Path::new("/w")),
            [Denial::Mkdir("/made-up".into())]
        );
    }
}
