//! Plain-text tables for human output: columns sized to their content,
//! long cells cut with an ellipsis; colour, where wanted, is painted on
//! after the sizing (see `colour`). Every cell is shown [`printable`]: what
//! runs and agents wrote never reaches the terminal as control sequences.

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

pub use corral::text::shown::{name, printable};

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
