#!/usr/bin/env python3
"""Renders the tray menu the app exports over dbusmenu as a desktop panel
would show it (a GTK menu under the tray's label), and saves a screenshot.
Usage: render_menu.py TITLE OUT.png ENTRY...  (an entry "-" is a separator)."""

import subprocess
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

title, out, entries = sys.argv[1], sys.argv[2], sys.argv[3:]
window = Gtk.Window(title="tray")
window.set_decorated(False)
window.move(860, 0)
bar = Gtk.MenuBar()
top = Gtk.MenuItem(label=title)
menu = Gtk.Menu()
for entry in entries:
    menu.append(Gtk.SeparatorMenuItem() if entry == "-" else Gtk.MenuItem(label=entry))
top.set_submenu(menu)
bar.append(top)
window.add(bar)
window.show_all()


def shoot():
    subprocess.run(["import", "-window", "root", "-crop", "400x190+860+0", out], check=True)
    Gtk.main_quit()
    return False


def open_menu():
    bar.select_item(top)
    top.activate()
    GLib.timeout_add(700, shoot)
    return False


GLib.timeout_add(500, open_menu)
Gtk.main()
