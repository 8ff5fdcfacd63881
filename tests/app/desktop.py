"""A desktop session for testing the real Corral app headless.

Run inside `xvfb-run dbus-run-session`. It serves, on the session bus:
- org.kde.StatusNotifierWatcher, so the app's tray registers as a
  StatusNotifierItem whose label and menu can be read over D-Bus;
- org.freedesktop.Notifications, which records every notification and can
  invoke a notification's action (the click a user would make).
"""

import re
import subprocess
import threading
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

WATCHER = "org.kde.StatusNotifierWatcher"
NOTIFICATIONS = "org.freedesktop.Notifications"


class Watcher(dbus.service.Object):
    def __init__(self, bus):
        self.items = []
        super().__init__(dbus.service.BusName(WATCHER, bus), "/StatusNotifierWatcher")

    @dbus.service.method(WATCHER, in_signature="s", out_signature="", sender_keyword="sender")
    def RegisterStatusNotifierItem(self, service, sender=None):
        path = service if service.startswith("/") else "/StatusNotifierItem"
        name = sender if service.startswith("/") else service
        self.items.append((name, path))
        self.StatusNotifierItemRegistered(f"{name}{path}")

    @dbus.service.method(WATCHER, in_signature="s", out_signature="")
    def RegisterStatusNotifierHost(self, service):
        pass

    @dbus.service.signal(WATCHER, signature="s")
    def StatusNotifierItemRegistered(self, item):
        pass

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="ss", out_signature="v")
    def Get(self, interface, prop):
        return self.GetAll(interface)[prop]

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return {
            "RegisteredStatusNotifierItems": dbus.Array([n + p for n, p in self.items], signature="s"),
            "IsStatusNotifierHostRegistered": True,
            "ProtocolVersion": dbus.Int32(0),
        }


class Notifications(dbus.service.Object):
    def __init__(self, bus):
        self.shown = []
        self.refused = 0
        # While true, Notify fails as a server that is not up yet would.
        self.refusing = False
        # While true, Notify does not answer, as a server that hangs; the
        # calls wait in `held` until `answer_held`.
        self.hanging = False
        self.held = []
        # Ids of the notifications the app took back.
        self.closed = []
        self.next_id = 1
        super().__init__(dbus.service.BusName(NOTIFICATIONS, bus), "/org/freedesktop/Notifications")

    @dbus.service.method(NOTIFICATIONS, in_signature="susssasa{sv}i", out_signature="u",
                         async_callbacks=("reply", "error"))
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout, reply, error):
        if self.refusing:
            self.refused += 1
            error(dbus.exceptions.DBusException("not ready", name="org.freedesktop.DBus.Error.ServiceUnknown"))
            return
        note = {"app": str(app), "summary": str(summary), "body": str(body), "actions": [str(a) for a in actions]}
        if self.hanging:
            self.held.append((note, reply))
            return
        reply(self._show(note))

    def _show(self, note):
        nid = self.next_id
        self.next_id += 1
        self.shown.append({"id": nid, **note})
        return dbus.UInt32(nid)

    def answer_held(self):
        """Answers the calls held while hanging (on the GLib loop)."""
        self.hanging = False
        held, self.held = self.held, []
        for note, reply in held:
            reply(self._show(note))

    @dbus.service.method(NOTIFICATIONS, in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        self.closed.append(int(nid))
        self.NotificationClosed(nid, 3)

    @dbus.service.method(NOTIFICATIONS, in_signature="", out_signature="as")
    def GetCapabilities(self):
        # As dunst and GNOME Shell: bodies are read as markup.
        return ["actions", "body", "body-markup", "persistence"]

    @dbus.service.method(NOTIFICATIONS, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("corral-test", "corral", "1", "1.2")

    @dbus.service.signal(NOTIFICATIONS, signature="us")
    def ActionInvoked(self, nid, action):
        pass

    @dbus.service.signal(NOTIFICATIONS, signature="uu")
    def NotificationClosed(self, nid, reason):
        pass


class Session:
    """The watcher and the notification server, on a GLib loop thread."""

    def __init__(self):
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        self.bus = dbus.SessionBus()
        self.watcher = Watcher(self.bus)
        self.notifications = Notifications(self.bus)
        self.loop = GLib.MainLoop()
        threading.Thread(target=self.loop.run, daemon=True).start()

    def on_loop(self, fn, *args):
        done = threading.Event()
        result = {}

        def run():
            result["value"] = fn(*args)
            done.set()
            return False

        GLib.idle_add(run)
        done.wait(5)
        return result.get("value")

    def answer_held_notifications(self):
        self.on_loop(self.notifications.answer_held)

    def click_notification(self, nid, action="default"):
        self.on_loop(self.notifications.ActionInvoked, dbus.UInt32(nid), action)

    def tray(self):
        items = list(self.watcher.items)
        return items[-1] if items else None


def gdbus(dest, path, method, *args):
    out = subprocess.run(["gdbus", "call", "--session", "--dest", dest, "--object-path", path,
                          "--method", method, "--", *args], capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return out.stdout


def tray_label(item):
    name, path = item
    out = gdbus(name, path, "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierItem", "XAyatanaLabel")
    match = re.search(r"<'(.*)'>", out)
    return match.group(1) if match else out.strip()


def tray_menu(item, depth=False):
    """The menu as [(id, label)] (with depth=True, [(id, label, depth)]:
    1 for the menu's own items), read over com.canonical.dbusmenu."""
    name, path = item
    out = gdbus(name, path, "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierItem", "Menu")
    menu_path = re.search(r"objectpath '([^']+)'", out).group(1)
    layout = gdbus(name, menu_path, "com.canonical.dbusmenu.GetLayout", "0", "-1", "[]")
    entries = []
    # Items look like (12, {'label': <'text'>, ...}, [...]).
    for m in re.finditer(r"\((\d+), \{([^{}]*)\}", layout):
        label = re.search(r"'label': <'((?:[^'\\]|\\.)*)'>", m.group(2))
        text = label.group(1) if label else ""
        level = layout[:m.start()].count("[") - layout[:m.start()].count("]")
        entries.append((int(m.group(1)), text, level) if depth else (int(m.group(1)), text))
    return menu_path, entries


def click_menu(item, menu_path, item_id):
    gdbus(item[0], menu_path, "com.canonical.dbusmenu.Event", str(item_id), "clicked", "<''>", "0")


def wait_until(what, cond, timeout=20.0, every=0.05):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # the condition may fail until the app is up
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def x_windows(title):
    """Mapped X11 windows whose name is `title` and that speak
    WM_PROTOCOLS (the toplevels a window manager would close)."""
    from Xlib import display

    d = display.Display()
    found = []

    def walk(window):
        try:
            name = window.get_wm_name()
            children = window.query_tree().children
            mapped = window.get_attributes().map_state != 0
            speaks = window.get_wm_protocols() is not None and len(window.get_wm_protocols()) > 0
        except Exception:
            return
        if name == title and mapped and speaks:
            found.append(window.id)
        for child in children:
            walk(child)

    walk(d.screen().root)
    d.close()
    return found


def close_x_window(window_id):
    """Asks a window to close as a window manager does (WM_DELETE_WINDOW)."""
    from Xlib import X, display, protocol

    d = display.Display()
    window = d.create_resource_object("window", window_id)
    protocols = d.intern_atom("WM_PROTOCOLS")
    delete = d.intern_atom("WM_DELETE_WINDOW")
    event = protocol.event.ClientMessage(window=window, client_type=protocols, data=(32, [delete, X.CurrentTime, 0, 0, 0]))
    window.send_event(event, event_mask=X.NoEventMask)
    d.flush()
    d.close()


def webkit_processes(kind="WebKit(Web|Network)Process"):
    out = subprocess.run(["pgrep", "-f", kind], capture_output=True, text=True)
    return out.stdout.split()
