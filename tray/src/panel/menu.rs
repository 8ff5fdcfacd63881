//! The menu as plain lines, compared to what is shown before anything is
//! rebuilt, and built into a native menu only when they differ.

use tray_icon::menu::{CheckMenuItem, IsMenuItem, Menu, MenuItem, PredefinedMenuItem, Submenu};

/// One line of the menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A clickable (or, disabled, informative) item.
    Item {
        id: String,
        label: String,
        enabled: bool,
    },
    /// An item with a check mark.
    Check {
        id: String,
        label: String,
        checked: bool,
    },
    /// A submenu of lines.
    Submenu {
        id: String,
        label: String,
        lines: Vec<Line>,
    },
    Separator,
}

/// A native menu of `lines`.
pub fn build(lines: &[Line]) -> tray_icon::menu::Result<Menu> {
    let menu = Menu::new();
    for line in lines {
        menu.append(item(line)?.as_ref())?;
    }
    Ok(menu)
}

/// `label` as the menu shows it as written: an `&` (a folder `R&D`)
/// would otherwise mark the next letter as the item's access key and be
/// dropped from the label.
fn shown(label: &str) -> String {
    label.replace('&', "&&")
}

fn item(line: &Line) -> tray_icon::menu::Result<Box<dyn IsMenuItem>> {
    Ok(match line {
        Line::Item { id, label, enabled } => Box::new(MenuItem::with_id(id, shown(label), *enabled, None)),
        Line::Check { id, label, checked } => Box::new(CheckMenuItem::with_id(id, shown(label), true, *checked, None)),
        Line::Submenu { id, label, lines } => {
            let submenu = Submenu::with_id(id, shown(label), true);
            for line in lines {
                submenu.append(item(line)?.as_ref())?;
            }
            Box::new(submenu)
        }
        Line::Separator => Box::new(PredefinedMenuItem::separator()),
    })
}
