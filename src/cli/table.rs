//! Plain-text tables for human output: columns sized to their content,
//! long cells cut with an ellipsis; colour, where wanted, is painted on
//! after the sizing (see `colour`). Every cell is shown [`printable`]: what
//! runs and agents wrote never reaches the terminal as control sequences.

use std::borrow::Cow;
use std::io::{self, Write};

/// Paints a cell: (row, column, padded text) to what is written.
type Painter = Box<dyn Fn(usize, usize, &str) -> String>;

/// A table being built.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    /// Paints a cell (column, padded text) after it is sized: colour codes
    /// take no room on a terminal.
    paint: Option<Painter>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&'static str]) -> Table {
        Table { headers: headers.to_vec(), rows: Vec::new(), paint: None }
    }

    /// Paints cells with `paint(row, column, padded text)` as they are
    /// written (rows from 0, the header not included).
    pub fn paint(&mut self, paint: impl Fn(usize, usize, &str) -> String + 'static) {
        self.paint = Some(Box::new(paint));
    }

    /// Adds a row (one cell per header), each cell [`printable`].
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.into_iter().map(|c| printable(&c).into_owned()).collect());
    }

    /// Writes the table; the last column is not padded.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |row: Option<usize>, cells: Vec<&str>, out: &mut dyn Write| -> io::Result<()> {
            let last = cells.len() - 1;
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let padded = if i == last { cell.to_string() } else { format!("{cell:<width$}", width = widths[i]) };
                match (row, &self.paint) {
                    (Some(r), Some(paint)) => text.push_str(&paint(r, i, &padded)),
                    _ => text.push_str(&padded),
                }
                if i != last {
                    text.push_str("  ");
                }
            }
            writeln!(out, "{}", text.trim_end())
        };
        line(None, self.headers.clone(), out)?;
        for (r, row) in self.rows.iter().enumerate() {
            line(Some(r), row.iter().map(String::as_str).collect(), out)?;
        }
        Ok(())
    }
}

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

/// `text` on one line, at most `max` characters, cut with `…`, and
/// [`printable`].
pub fn cell(text: &str, max: usize) -> String {
    let flat: String = printable(text).split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// `-` for nothing.
pub fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_obeyed() {
        assert_eq!(printable("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(printable("\x1b[2J\x1b]52;c;aGk=\x07done"), "\\x1b[2J\\x1b]52;c;aGk=\\x07done");
        assert_eq!(printable("a\u{9b}b\u{202e}c\r"), "a\\u{9b}b\\u{202e}c\\x0d");
    }
}
