//! "Needs you", pinned at the top of the menu: each thing that waits for
//! the user's word (the one list of `corral::attention`), its reason as a
//! chip, and its actions in a submenu, carried out as `corral` would.

use corral::attention::{Needs, Subject};

use crate::panel::menu::Line;
use crate::window::{self, Route};

/// Ids of an item's action: `needs:` then its `corral` arguments.
pub const PREFIX: &str = "needs:";
/// The line saying how many more items the window holds.
pub const MORE_ID: &str = "needs-more";
/// Between the arguments of an action's id.
const SEP: char = '\u{1f}';
/// The longest line of an item: cut at a word, never mid-word.
const WIDTH: usize = 64;
/// The most items the menu holds: the rest are said as "and N more" and
/// are in the window, so the menu stays small however long the list.
const SHOWN: usize = 10;

/// The section: nothing when nothing needs the user. Its count is the
/// whole list's, what the store leaves out of it too.
pub fn lines(all: &Needs) -> Vec<Line> {
    let (needs, total) = (&all.items, all.total());
    if total == 0 {
        return Vec::new();
    }
    let mut lines = vec![Line::Item { id: "needs".into(), label: format!("Needs you ({total})"), enabled: false }];
    for (n, item) in needs.iter().enumerate().take(SHOWN) {
        let mut actions: Vec<Line> = item
            .actions
            .iter()
            .map(|a| {
                let argv = a.argv.join(&SEP.to_string());
                Line::Item { id: format!("{PREFIX}{argv}"), label: a.label.clone(), enabled: true }
            })
            .collect();
        if let Subject::Run { id, .. } = &item.subject {
            actions.push(Line::Item {
                id: format!("{}{id}", super::recent::PREFIX),
                label: "Open transcript".into(),
                enabled: true,
            });
        }
        let label = format!("⚠ {} · {}", item.chip, cut(&item.words, WIDTH));
        lines.push(Line::Submenu { id: format!("needs-item:{n}"), label, lines: actions });
    }
    let shown = needs.len().min(SHOWN) as u64;
    if total > shown {
        let more = total - shown;
        lines.push(Line::Item { id: MORE_ID.into(), label: format!("…and {more} more: open Corral"), enabled: true });
    }
    lines.push(Line::Separator);
    lines
}

/// An action chosen: `corral ARGS` carried out in the background (the CLI
/// beside the tray), the window opened on what it shows (`show`).
pub fn clicked(argv: &str) {
    let argv: Vec<String> = argv.split(SEP).map(str::to_string).collect();
    if argv.first().map(String::as_str) == Some("show") {
        if let Some(run) = argv.get(1) {
            window::open(&Route::Run(run.clone()));
        }
        return;
    }
    let program = match corral::upkeep::queue::ShepherdCommand::lightest() {
        Ok(command) => command.program,
        Err(e) => return crate::notify::problem(&format!("Cannot find corral to carry this out: {e}")),
    };
    let carried = std::thread::Builder::new().name("corral-action".into()).spawn(move || {
        // Only while the list still offers it: a second click, or a click
        // on a menu drawn before the item was answered, does nothing.
        let offered = corral::Home::from_env()
            .map_err(|e| e.to_string())
            .and_then(|home| corral::Store::open(&home).map_err(|e| e.to_string()))
            .and_then(|store| corral::attention::still_offered(&store, &argv).map_err(|e| e.to_string()));
        match offered {
            Ok(true) => {}
            Ok(false) => return tracing::info!("corral {}: no longer offered (answered meanwhile)", argv.join(" ")),
            Err(e) => return crate::notify::problem(&format!("Cannot read what needs you: {e}")),
        }
        let out = std::process::Command::new(&program).args(&argv).stdin(std::process::Stdio::null()).output();
        // What was asked to be seen is shown, never dropped.
        let shows = argv.len() == 3 && argv[0] == "schedule" && argv[1] == "show";
        match out {
            Ok(out) if out.status.success() && shows => {
                let text = String::from_utf8_lossy(&out.stdout);
                let last: Vec<&str> = text.lines().take(12).collect();
                crate::notify::shown(&format!("Schedule {}", argv[2]), &last.join("\n"));
            }
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
                crate::notify::problem(&format!("corral {}: {said}", argv.join(" ")));
            }
            Err(e) => crate::notify::problem(&format!("Cannot run {}: {e}", program.display())),
        }
    });
    if let Err(e) = carried {
        tracing::warn!("cannot carry out an action: {e}");
    }
}

/// `text` cut to at most `width` characters at a word, with `…`.
fn cut(text: &str, width: usize) -> String {
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= width {
        return text;
    }
    let mut out = String::new();
    for word in text.split(' ') {
        if out.chars().count() + word.chars().count() + 1 > width - 1 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        out = text.chars().take(width - 1).collect();
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However long the list, the menu holds ten items and says the rest.
    #[test]
    fn the_menu_stays_small_however_long_the_list() {
        use corral::attention::{Action, Item, Reason};
        let item = |n: usize| Item {
            subject: Subject::Run { id: format!("run{n}"), preset: "p".into(), task: "t".into() },
            reason: Reason::Failed { error: "boom".into() },
            chip: "failed",
            words: format!("p (run{n}) failed: boom"),
            actions: vec![Action { label: "Open".into(), argv: vec!["show".into(), format!("run{n}")] }],
            since: None,
        };
        // 200 listed, 300 more the store left out: counted whole.
        let needs = Needs { items: (0..200).map(item).collect(), beyond: 300 };
        let lines = lines(&needs);
        assert_eq!(lines.len(), 1 + SHOWN + 1 + 1, "{lines:?}");
        assert!(matches!(&lines[0], Line::Item { label, .. } if label == "Needs you (500)"), "{:?}", lines[0]);
        assert!(lines.iter().any(|l| matches!(l, Line::Item { label, .. } if label == "…and 490 more: open Corral")));
    }

    #[test]
    fn a_long_reason_is_cut_at_a_word() {
        let said = cut("fixer (k3x9abcd) failed: 529: Overloaded while it was working into their documents", 40);
        assert!(said.chars().count() <= 40 && said.ends_with('…'), "{said}");
        assert!(!said.contains("documen…"), "cut mid-word: {said}");
        assert_eq!(cut("short", 40), "short");
    }
}
