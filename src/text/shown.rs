//! What an agent wrote, as a terminal may show it: a task, a final text or
//! a folder is written by a run's agent, which can launch runs, so it must
//! not be able to forge what the user sees. One rule for every printer (the
//! CLI's tables and lines, and `corral-wake`).

use std::borrow::Cow;

/// `text` as a terminal may show it: control characters (an escape
/// sequence that would move the cursor, recolour or rewrite the screen, or
/// write the clipboard with OSC 52), and the marks that reorder text, are
/// written as escapes (`\x1b`, `\u{202e}`); new lines and tabs stay. A
/// task, a final text or a folder is written by a run's agent, which can
/// launch runs: it must not be able to forge what the user sees.
pub fn printable(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !hidden(c) => shown.push(c),
            c if (c as u32) < 0x80 => shown.push_str(&format!("\\x{:02x}", c as u32)),
            c => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(shown)
}

/// A name an agent chose (a file, a preset) on one line: [`printable`],
/// with new lines and tabs written as escapes too, so it cannot forge a
/// line of its own.
pub fn name(text: &str) -> String {
    printable(text).replace('\n', "\\n").replace('\t', "\\t")
}
