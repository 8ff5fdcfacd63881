#!/usr/bin/env python3
"""End-to-end tests of the real Corral app, headless.

Run by scripts/test-app.sh inside `xvfb-run dbus-run-session`, with the
app and CLI built. The app runs with an isolated CORRAL_HOME; runs are
launched with the real CLI; the tray is read and clicked over D-Bus
(StatusNotifierItem + dbusmenu); notifications are received and clicked by
the test's notification server; the window is driven through WebDriver
(tauri-driver). The tray (`corral-tray`) and the window (`corral-app`) are
two programs: the tray starts the window on demand. Screenshots go to
target/app-test/.
"""

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from desktop import (  # noqa: E402
    Session, click_menu, close_x_window, gdbus, tray_label, tray_menu, wait_until, webkit_processes, x_windows,
)

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
PROFILE = os.environ.get("CORRAL_PROFILE", "debug")
APP = TARGET / PROFILE / "corral-app"
TRAY = TARGET / PROFILE / "corral-tray"
CLI = TARGET / PROFILE / "corral"
FAKES = ROOT / "tests" / "fake-agents"
ARTIFACTS = TARGET / "app-test"
TIMINGS = {}
XSS = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <b>bold?</b>'


class Env:
    """An isolated installation: CORRAL_HOME, HOME, a project folder."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="corral-app-test-"))
        self.home = self.root / "corral-home"
        self.project = self.root / "project"
        (self.root / "home").mkdir()
        (self.project / ".corral" / "presets").mkdir(parents=True)
        (self.home / "presets").mkdir(parents=True)
        self.env = dict(os.environ, CORRAL_HOME=str(self.home), HOME=str(self.root / "home"))
        self.env.pop("CORRAL_RUN_ID", None)
        self.env.pop("XDG_CONFIG_HOME", None)  # autostart entries go under HOME
        (self.home / "config.toml").write_text('max_parallel = 32\nexit_grace = "200ms"\nstop_grace = "500ms"\n')
        self.preset("slow", [str(FAKES / "slow"), "{task}"], "Waits for the file named by its task")
        self.preset("quick", [str(FAKES / "child"), "quick-answer"], "Answers at once")
        self.preset("xss", ["printf", "%s\\n", XSS], "Prints HTML that must stay text")
        self.preset("echo", ["echo", "{task}"], "Echoes its task", folder=self.home / "presets")
        pi = self.root / "bin"
        pi.mkdir()
        (pi / "pi").symlink_to(FAKES / "flood")
        (pi / "corral").symlink_to(CLI)
        self.env["PATH"] = f"{pi}:{self.env['PATH']}"
        (self.project / ".corral" / "presets" / "flood.md").write_text(
            "---\nname: flood\ndescription: floods tool results\nagent: pi\n---\n")

    def preset(self, name, argv, description, folder=None):
        folder = folder or self.project / ".corral" / "presets"
        text = f"---\nname: {name}\ndescription: {description}\nagent: command\ncommand: {json.dumps(argv)}\n---\n"
        (folder / f"{name}.md").write_text(text)
        # A project's command presets run once trusted.
        self.cli("presets", "trust", str(self.project))

    def cli(self, *args):
        out = subprocess.run([str(CLI), *args], cwd=self.project, env=self.env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError(f"corral {args} failed: {out.stderr}")
        return out.stdout.strip()

    def launch(self, preset, task):
        return self.cli("launch", preset, task)

    def launch_with(self, preset, task, **extra_env):
        out = subprocess.run([str(CLI), "launch", preset, task], cwd=self.project, env={**self.env, **extra_env},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def abort_active(self):
        """Aborts the installation's active runs, so no test leaves any behind."""
        runs = json.loads(self.cli("ls", "--all", "--json"))
        active = [r["id"] for r in runs if r["status"] in ("queued", "starting", "running", "waiting")]
        if active:
            self.cli("abort", *active)

    def show(self, run_id):
        return json.loads(self.cli("show", run_id, "--json"))

    def start_tray(self, *args):
        return subprocess.Popen([str(TRAY), *args], env=self.env, stdout=subprocess.DEVNULL, stderr=open(self.root / "app.log", "a"))


class WebDriver:
    """The few W3C WebDriver calls the tests need, against tauri-driver."""

    ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

    def __init__(self, env, args):
        self.driver = subprocess.Popen(["tauri-driver", "--port", "4444"], env=env.env,
                                       stdout=subprocess.DEVNULL, stderr=open(env.root / "driver.log", "a"))
        wait_until("tauri-driver", lambda: self._ready(), timeout=20)
        caps = {"capabilities": {"alwaysMatch": {"tauri:options": {"application": str(APP), "args": args}}}}
        self.session = self.request("POST", "/session", caps)["sessionId"]

    def _ready(self):
        try:
            self.request("GET", "/status")
            return True
        except Exception:
            return False

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        # tauri-driver sometimes drops a connection under rapid polling;
        # the request never reached the app then, so it is sent again.
        for attempt in range(5):
            req = urllib.request.Request(f"http://127.0.0.1:4444{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=5 if path.endswith("/screenshot") else 60) as resp:
                    return json.loads(resp.read() or b"{}").get("value")
            except (ConnectionResetError, http.client.RemoteDisconnected):
                if attempt == 4:
                    raise
                time.sleep(0.2)

    def s(self, path):
        return f"/session/{self.session}{path}"

    def js(self, script, *args):
        return self.request("POST", self.s("/execute/sync"), {"script": script, "args": list(args)})

    def find(self, css):
        return self.request("POST", self.s("/element"), {"using": "css selector", "value": css})[self.ELEMENT]

    def text(self, css):
        return self.on_element(css, "GET", "text")

    def click(self, css):
        self.on_element(css, "POST", "click", {})

    def on_element(self, css, method, what, body=None):
        # The live view may re-render between find and use (a store change
        # draws it again): retry on a stale or vanished element.
        for attempt in range(10):
            try:
                return self.request(method, self.s(f"/element/{self.find(css)}/{what}"), body)
            except urllib.error.HTTPError:
                if attempt == 9:
                    raise
                time.sleep(0.1)

    def type(self, css, text):
        self.request("POST", self.s(f"/element/{self.find(css)}/value"), {"text": text})

    def screenshot(self, path):
        try:
            path.write_bytes(base64.b64decode(self.request("GET", self.s("/screenshot"))))
        except Exception as e:  # an artifact for the docs, not an assertion
            print(f"screenshot {path.name} not taken: {e!r}", flush=True)

    def close_window(self):
        self.request("DELETE", self.s("/window"))

    def quit(self):
        try:
            self.request("DELETE", self.s(""))
        except Exception:
            pass
        self.driver.terminate()
        self.driver.wait(10)
        # Its native driver (WebKitWebDriver, on the next port) may outlive
        # it a moment: the next session could not listen there.
        subprocess.run(["pkill", "-x", "WebKitWebDriver"], check=False)
        wait_until("the native WebDriver's port free", lambda: port_free(4445))


def _try(fn):
    try:
        return fn()
    except AssertionError:
        return False


def notes_for(session, run_id_text):
    return [n for n in session.notifications.shown if run_id_text in n["summary"] or run_id_text in n["body"]]


def kill_app():
    """Ends the tray and the window, as a crash would."""
    for program in ("corral-tray", "corral-app"):
        subprocess.run(["pkill", "-KILL", "-x", program], check=False)
    wait_until("the app to be gone", lambda: not running("corral-tray") and not running("corral-app"))


def port_free(port):
    """True if nothing listens on 127.0.0.1:PORT."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def running(program):
    return subprocess.run(["pgrep", "-x", program], capture_output=True).returncode == 0


def maps_webkit(pid):
    """True if the process has WebKit's library mapped."""
    return "libwebkit2gtk" in Path(f"/proc/{pid}/maps").read_text()


def test_tray_and_notifications(session, env):
    """Tray label follows the store; one notification per finished run,
    including one that finished while the app was down; the tray holds no
    WebKit; a notification's click starts the window, whose closing ends it
    and WebKit with it while the tray lives on; one tray per home; Clear
    finished. An autostart entry an older Corral wrote for `corral-app`
    (the tray then) now starts the tray."""
    entry = env.root / "home" / ".config" / "autostart" / "corral.desktop"
    entry.parent.mkdir(parents=True)
    entry.write_text('[Desktop Entry]\nType=Application\nName=Corral\nExec="/usr/local/bin/corral-app"\n')
    app = env.start_tray()
    item = wait_until("the tray to register", session.tray)
    wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
    assert f'Exec="{TRAY}"' in entry.read_text(), entry.read_text()
    # Panels that draw no label (KDE, Xfce) show the item's title: Corral's
    # name, not its program's file name.
    title = gdbus(item[0], item[1], "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierItem", "Title")
    assert "'Corral'" in title, title

    gate = env.root / "release-1"
    first = env.launch("slow", str(gate))
    wait_until("1 running", lambda: tray_label(item) == "1 running / 1 total")
    _, entries = tray_menu(item)
    labels = [label for _, label in entries]
    assert "1 running / 1 total" in labels, labels
    assert any(label.startswith("▶ slow") for label in labels), labels
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _, nested = tray_menu(item, depth=True)
    shown = [(label + "  ▸" if label == "Launch" else label) or "-" for _, label, level in nested if level == 1]
    subprocess.run(["/usr/bin/python3", str(Path(__file__).parent / "render_menu.py"), tray_label(item),
                    str(ARTIFACTS / "tray-menu.png"), *shown], check=True, timeout=30)
    gate.write_text("")
    wait_until("0 running", lambda: tray_label(item) == "0 running / 1 total")
    wait_until("a notification", lambda: len(session.notifications.shown) == 1)
    note = session.notifications.shown[0]
    assert note["summary"].startswith("✓ slow completed in "), note
    # A command is summed up by its last line (the fake says "finished").
    assert note["body"] == "finished", note
    assert "default" in note["actions"] and "open" in note["actions"], note

    # The app is killed; a run finishes meanwhile; the restarted app shows
    # the truth and announces that run once, and nothing twice.
    app.kill()
    app.wait()
    second = env.launch("quick", "while the app was down")
    wait_until("the run to end", lambda: env.show(second)["exited_at"] is not None)
    session.watcher.items.clear()
    app = env.start_tray()
    item = wait_until("the tray to register again", session.tray)
    wait_until("the restarted tray", lambda: tray_label(item) == "0 running / 2 total")
    wait_until("the missed notification", lambda: len(session.notifications.shown) == 2)
    time.sleep(0.5)  # nothing more may arrive (asserted just below)
    assert len(session.notifications.shown) == 2, session.notifications.shown
    assert session.notifications.shown[1]["summary"].startswith("✓ quick completed"), session.notifications.shown
    assert env.show(first)["notified_at"] and env.show(second)["notified_at"]

    # The tray is light: no WebKit mapped, none running. Clicking the
    # notification starts the window on that run; closing the window ends
    # its program and WebKit's processes, and the tray lives on.
    assert not maps_webkit(app.pid), "the tray links no WebKit"
    assert not webkit_processes(), "no window, no WebKit"
    assert not running("corral-app")
    missed = session.notifications.shown[1]["id"]

    def clicked():
        session.click_notification(missed, "open")
        return wait_until("the window", lambda: x_windows("Corral"), timeout=0.5)

    wait_until("the click to open the window", lambda: _try(clicked), every=0)
    wait_until("WebKit to start", lambda: webkit_processes("WebKitWebProcess"))
    # The tray's own GTK settings (no GL, no accessibility bridge) are not
    # handed to the window, which has widgets to read aloud.
    window_pid = subprocess.run(["pgrep", "-x", "corral-app"], capture_output=True, text=True).stdout.split()[0]
    environ = Path(f"/proc/{window_pid}/environ").read_bytes().split(b"\0")
    assert not any(v.startswith((b"NO_AT_BRIDGE=", b"GDK_GL=")) for v in environ), "the window got the tray's settings"

    def close():
        for window in x_windows("Corral"):
            close_x_window(window)  # as a window manager does, until it goes
        return not x_windows("Corral")

    wait_until("the window to close", close, every=0.3)
    wait_until("the window's program to end", lambda: not running("corral-app"))
    wait_until("WebKit's processes to end", lambda: not webkit_processes())
    assert app.poll() is None, "the tray lives on"
    assert tray_label(item) == "0 running / 2 total"

    # One tray per home: the desktop entry's `corral-tray --window` opens
    # the window and leaves; a plain second start just leaves.
    registered = len(session.watcher.items)
    again = subprocess.run([str(TRAY)], env=env.env, capture_output=True, text=True, timeout=20)
    assert again.returncode == 0 and "already running" in again.stderr, again
    subprocess.run([str(TRAY), "--window"], env=env.env, timeout=20, check=True)
    wait_until("the window from the desktop entry", lambda: x_windows("Corral"))
    wait_until("the window to close", close, every=0.3)
    wait_until("the window's program to end", lambda: not running("corral-app"))
    assert len(session.watcher.items) == registered, "no second tray"

    menu_path, entries = tray_menu(item)
    clear = next(i for i, label in entries if label == "Clear finished")
    click_menu(item, menu_path, clear)
    wait_until("cleared", lambda: tray_label(item) == "0 running / 0 total")
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_app_killed_with_20_active_runs(session, env):
    """kill -9 of the app while 20 runs are active: all 20 finish and are
    recorded; the restarted app shows the truth and announces each once."""
    app = env.start_tray()
    item = wait_until("the tray", session.tray)
    gate = env.root / "release"
    runs = [env.launch("slow", str(gate)) for _ in range(20)]
    wait_until("20 running", lambda: tray_label(item) == "20 running / 20 total")
    app.kill()  # SIGKILL
    app.wait()
    before = len(session.notifications.shown)
    gate.write_text("")
    wait_until("all 20 to finish", lambda: all(env.show(r)["exited_at"] for r in runs), timeout=60)
    assert all(env.show(r)["status"] == "completed" for r in runs)
    session.watcher.items.clear()
    app = env.start_tray()
    item = wait_until("the tray again", session.tray)
    wait_until("the truth", lambda: tray_label(item) == "0 running / 20 total")
    wait_until("the announcement", lambda: len(session.notifications.shown) > before)
    time.sleep(1)  # nothing else may arrive (asserted just below)
    new = session.notifications.shown[before:]
    assert len(new) == 1, new
    assert new[0]["summary"] == "20 runs finished while Corral was closed", new
    assert all(env.show(r)["notified_at"] for r in runs), "each is announced once, and marked so"
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_watcher_survives_a_broken_config(session, env):
    """A typo in config.toml (or any store error) never freezes the tray: the
    problem is shown at the top of the menu while it lasts, and the tray
    follows the store again once it is fixed."""
    app = env.start_tray()
    item = wait_until("the tray", session.tray)
    wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
    config = env.home / "config.toml"
    good = config.read_text()
    config.write_text(good + "max_paralel = 3\n")

    def problem_shown():
        _, entries = tray_menu(item)
        return any(label.startswith("⚠") and "config.toml" in label for _, label in entries)

    wait_until("the problem in the menu", problem_shown)
    config.write_text(good)
    wait_until("the problem gone", lambda: not problem_shown())
    gate = env.root / "release"
    env.launch("slow", str(gate))
    wait_until("the tray to follow again", lambda: tray_label(item) == "1 running / 1 total")
    gate.write_text("")
    wait_until("0 running", lambda: tray_label(item) == "0 running / 1 total")
    assert app.poll() is None, "the app lives on"
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_the_tray_fires_schedules(session, env):
    """With the tray running, a schedule's slots are fired by it: no
    `corral schedule run` needed on a desktop."""
    env.cli("schedule", "add", "tick", "--preset", "echo", "--every", "1s", "--overlap", "allow", "scheduled")
    app = env.start_tray()

    def fired_by_tray():
        shown = json.loads(env.cli("schedule", "show", "tick", "--json"))
        return [f for f in shown["fires"] if f["firer"] == "tray" and f["outcome"] == "launched"]

    fires = wait_until("a fire by the tray", fired_by_tray, timeout=20)
    run_id = fires[0]["runs"][0]["id"]
    wait_until("its run to end", lambda: env.show(run_id)["status"] == "completed")
    # The menu says when it fires next.
    item = wait_until("the tray", session.tray)

    def next_fire_said():
        _, entries = tray_menu(item)
        return any(label.startswith("Next: tick ") for _, label in entries)

    wait_until("the next fire in the menu", next_fire_said)
    env.cli("schedule", "rm", "tick")
    # A schedule added while nothing runs shows at once (no run moves).
    env.cli("schedule", "add", "later", "--preset", "echo", "--every", "1d", "scheduled")

    def later_said():
        _, entries = tray_menu(item)
        labels = [label for _, label in entries]
        return any(l.startswith("Next: later ") for l in labels) and not any(l.startswith("Next: tick") for l in labels)

    wait_until("the new schedule in the menu", later_said)
    env.cli("schedule", "rm", "later")
    # The runs it fires are shepherded by the `corral` CLI beside the tray,
    # which links no GTK (they were shepherded by the tray itself).
    gate = env.root / "release-scheduled"
    env.cli("schedule", "add", "held", "--preset", "slow", "--every", "1s", str(gate))

    def held_fired_by_tray():
        shown = json.loads(env.cli("schedule", "show", "held", "--json"))
        return [f for f in shown["fires"] if f["firer"] == "tray" and f["outcome"] == "launched"]

    held = wait_until("a held run fired by the tray", held_fired_by_tray, timeout=20)[-1]["runs"][0]["id"]
    wait_until("the held run to run", lambda: env.show(held)["status"] == "running")
    shepherd = env.show(held)["shepherd_pid"]
    assert os.path.basename(os.readlink(f"/proc/{shepherd}/exe")) == "corral", os.readlink(f"/proc/{shepherd}/exe")
    env.cli("schedule", "rm", "held")
    gate.write_text("")
    wait_until("the held run to end", lambda: env.show(held)["status"] == "completed")
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_the_schedules_view(session, env):
    """The window's Schedules: each schedule with its next fire and its
    fires; Run now launches, Pause pauses (the card says so), and a fire's
    run opens from its line."""
    env.cli("schedule", "add", "nightly", "--preset", "echo", "--cron", "0 3 * * *", "scheduled work")
    driver = WebDriver(env, [])
    try:
        driver.js("location.hash = '#/schedules'")
        wait_until("the schedule's card", lambda: driver.find("[data-schedule='nightly']"))
        assert "next " in driver.text("[data-schedule='nightly'] [data-next]")
        driver.click("[data-schedule='nightly'] [data-action='run-now']")
        wait_until("the fire in the card", lambda: "launched" in driver.text("[data-schedule='nightly'] .fires"))
        fire = json.loads(env.cli("schedule", "show", "nightly", "--json"))["fires"][0]
        assert fire["firer"] == "run-now" and fire["outcome"] == "launched", fire
        run_id = fire["runs"][0]["id"]
        wait_until("its run done in the card", lambda: "completed" in driver.text("[data-schedule='nightly'] .fires"))
        driver.click("[data-schedule='nightly'] [data-action='pause']")
        wait_until("paused", lambda: "paused" in driver.text("[data-schedule='nightly'] [data-next]"))
        assert json.loads(env.cli("schedule", "show", "nightly", "--json"))["paused_why"] == "by request"
        driver.screenshot(ARTIFACTS / "window-schedules.png")
        driver.click(f"[data-schedule='nightly'] a[href='#/run/{run_id}']")
        wait_until("the run opened", lambda: run_id in driver.js("return location.hash"))
    finally:
        driver.quit()


def test_doctor_reads_the_desktop(session, env):
    """`corral doctor` asks the session bus what the tray needs: a
    notification server with actions (a click opens the run) and a
    StatusNotifierItem host; it says how long it took and exits 0."""
    out = subprocess.run([str(CLI), "doctor", "--json"], cwd=env.project, env=env.env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    desktop = {f["check"]: f for f in report["findings"] if f["area"] == "desktop"}
    assert desktop["notifications"]["level"] == "ok", desktop
    assert "corral-test 1 (corral); a click on one opens the run" in desktop["notifications"]["detail"], desktop
    assert desktop["tray"]["level"] == "ok", desktop
    TIMINGS["doctor, whole report (ms)"] = report["took_ms"]
    # Without a notification server: said, with what to start.
    quiet = {**env.env, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}
    out = subprocess.run([str(CLI), "doctor", "--json"], cwd=env.project, env=quiet, capture_output=True,
                         text=True, timeout=60)
    report = json.loads(out.stdout)
    bus = [f for f in report["findings"] if f["area"] == "desktop"]
    assert bus and bus[0]["level"] == "warn" and "session bus" in bus[0]["detail"], bus


def test_one_notification_per_piece_of_work(session, env):
    """A parent with three children is announced once, for the whole tree;
    thirty endings at once are a summary, not thirty notifications."""
    env.preset("tree", ["sh", "-c", "for i in 1 2 3; do corral launch quick child-$i >/dev/null; done"],
               "Launches three children")
    app = env.start_tray()
    item = wait_until("the tray", session.tray)
    wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
    before = len(session.notifications.shown)
    parent = env.launch("tree", "go")
    wait_until("the tree to end", lambda: env.show(parent)["exited_at"] is not None)
    assert len(env.show(parent)["children"]) == 3
    wait_until("the announcement", lambda: len(session.notifications.shown) > before)
    time.sleep(3)  # nothing more may arrive (asserted just below)
    tree = session.notifications.shown[before:]
    assert len(tree) == 1, tree
    assert tree[0]["summary"].startswith("✓ tree completed") and "3 children: 3 completed" in tree[0]["summary"], tree

    before = len(session.notifications.shown)
    runs = [env.launch("quick", f"burst {i}") for i in range(30)]
    wait_until("the burst to end", lambda: all(env.show(r)["exited_at"] for r in runs), timeout=60)
    def announced():
        burst = session.notifications.shown[before:]
        return sum(int(n["summary"].split()[0]) if n["summary"][0].isdigit() else 1 for n in burst)

    wait_until("every ending announced", lambda: announced() == 30, timeout=70)
    burst = session.notifications.shown[before:]
    assert 1 <= len(burst) <= 3, burst
    TIMINGS["notifications for a tree of 1 + 3 runs"] = len(tree)
    TIMINGS["notifications for a burst of 30 endings"] = len(burst)

    # Do not disturb: nothing while it is on; what ended meanwhile is one
    # summary when it goes off.
    def toggle_quiet():
        menu_path, entries = tray_menu(item)
        quiet = next(i for i, label in entries if label == "Do not disturb")
        click_menu(item, menu_path, quiet)

    toggle_quiet()
    before = len(session.notifications.shown)
    quiet_runs = [env.launch("quick", f"quiet {i}") for i in range(2)]
    wait_until("the quiet runs to end", lambda: all(env.show(r)["exited_at"] for r in quiet_runs))
    time.sleep(3)  # nothing may arrive while quiet (asserted just below)
    assert len(session.notifications.shown) == before, session.notifications.shown[before:]
    toggle_quiet()
    wait_until("the summary on resuming", lambda: len(session.notifications.shown) > before)
    time.sleep(1)  # nothing more may arrive (asserted just below)
    resumed = session.notifications.shown[before:]
    assert len(resumed) == 1 and resumed[0]["summary"] == "2 runs finished: 2 completed", resumed
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_a_budget_reached_is_asked_on_the_desktop(session, env):
    """A run that reaches its budget is frozen and asked about with real
    buttons: "Allow $1.00 more" goes on; answered elsewhere (the CLI), the
    ask is taken back."""
    spend_bin = env.root / "spend-bin"
    spend_bin.mkdir()
    (spend_bin / "pi").symlink_to(FAKES / "spender")
    (env.project / ".corral" / "presets" / "spend.md").write_text(
        "---\nname: spend\ndescription: spends a dollar a second\nagent: pi\nbudget: {usd: 1}\n---\n")
    app = env.start_tray()
    wait_until("the tray", session.tray)
    before = len(session.notifications.shown)
    run = env.launch_with("spend", "spend", PATH=f"{spend_bin}:{env.env['PATH']}", SPEND_EVERY="0.1")

    def ask_after(count):
        asks = [n for n in session.notifications.shown[count:] if "budget reached" in n["summary"]]
        return asks[0] if asks else None

    ask = wait_until("the ask", lambda: ask_after(before))
    assert env.show(run)["status"] == "paused", env.show(run)
    assert ask["summary"] == "⏸ spend paused: budget reached", ask
    assert "Budget of $1.00 reached" in ask["body"] and "1 run waits" in ask["body"], ask
    actions = dict(zip(ask["actions"][::2], ask["actions"][1::2]))
    assert actions["allow"] == "Allow $1.00 more" and actions["stop"] == "Stop", actions

    # The button: one dollar more, and it goes on to the next dollar.
    count = len(session.notifications.shown)
    session.click_notification(ask["id"], "allow")
    wait_until("the first ask taken back once answered", lambda: ask["id"] in session.notifications.closed)
    second = wait_until("paused again at $2, and asked again", lambda: ask_after(count))
    shown = env.show(run)
    assert shown["status"] == "paused" and shown["budget"]["usd"] == 2.0, shown

    # Answered in the window: its buttons, and the desktop's ask goes away.
    count = len(session.notifications.shown)
    driver = WebDriver(env, ["--open", run])
    try:
        wait_until("the window's ask", lambda: "budget of $2.00 reached" in driver.text("#budget-ask"))
        # The budget it was launched with, again: not as much as it grew
        # to. The view is drawn again as the store changes: each look
        # finds the button anew.
        wait_until("the window's button", lambda: driver.text("#allow-budget") == "Allow $1.00 more")
        driver.click("#allow-budget")
        wait_until("the second ask taken back", lambda: second["id"] in session.notifications.closed)
        third = wait_until("paused again at $3", lambda: ask_after(count))
    finally:
        driver.quit()
    assert env.show(run)["budget"]["usd"] == 3.0

    # Answered at a terminal: the same.
    env.cli("resume", run, "--budget", "usd=100")
    wait_until("the third ask taken back", lambda: third["id"] in session.notifications.closed)
    wait_until("the run to end", lambda: env.show(run)["exited_at"] is not None, timeout=30)
    assert env.show(run)["status"] == "completed"
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_needs_you_at_a_glance(session, env):
    """One list of what needs you behind the tray and the window: a run
    paused at its budget and a failure are pinned at the top of the tray's
    menu and of the runs list, each with its reason and its actions; the
    title says the paused run apart; answered from the window, it leaves
    both, and the icon's red goes once nothing needs you."""
    spend_bin = env.root / "spend-bin"
    spend_bin.mkdir()
    (spend_bin / "pi").symlink_to(FAKES / "spender")
    (env.project / ".corral" / "presets" / "spend.md").write_text(
        "---\nname: spend\ndescription: spends\nagent: pi\nbudget: {usd: 1}\n---\n")
    env.preset("broken", ["sh", "-c", "echo overloaded >&2; exit 3"], "Fails")
    # A window an earlier test left would take this one's start for its own.
    kill_app()
    app = env.start_tray()
    item = wait_until("the tray", session.tray)
    run = env.launch_with("spend", "spend", PATH=f"{spend_bin}:{env.env['PATH']}", SPEND_EVERY="0.1")
    failed = env.launch("broken", "x")
    wait_until("the paused run said apart", lambda: tray_label(item) == "0 running · 1 paused / 2 total")
    wait_until("the failure", lambda: env.show(failed)["exited_at"] is not None)

    def needs_section():
        _, nested = tray_menu(item, depth=True)
        return [label for _, label, level in nested if level == 1 and label.startswith(("Needs you", "⚠"))]

    section = wait_until("Needs you in the tray", lambda: len(needs_section()) == 3 and needs_section())
    assert section[0] == "Needs you (2)", section
    assert any(line.startswith("⚠ budget · spend (") for line in section), section
    assert any(line.startswith("⚠ failed · broken (") for line in section), section

    driver = WebDriver(env, [])
    try:
        wait_until("Needs you in the window", lambda: "Needs you (2)" in driver.text("#needs-you"))
        assert "null" not in driver.text("#needs-you"), driver.text("#needs-you")
        # Each with its task: failures of one preset read apart.
        assert f"— x" in driver.text(f"#needs-you [data-id='{failed}']"), driver.text("#needs-you")
        assert "budget of $1.00 reached" in driver.text(f"#needs-you [data-id='{run}']")
        wait_until("the counts", lambda: driver.text("#counts") == "0 running · 1 paused / 2 total")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.screenshot(ARTIFACTS / "needs-you.png")
        overflow = driver.js("return document.documentElement.scrollWidth > document.documentElement.clientWidth;")
        assert not overflow, "the runs list runs off the window's right edge"
        driver.click(f"#needs-you [data-id='{run}'] button")
        wait_until("more allowed", lambda: env.show(run)["budget"]["usd"] == 2.0)
        env.cli("abort", run)
        wait_until("the budget gone from the window", lambda: run not in driver.text("#needs-you") if
                   driver.js("return !document.querySelector('#needs-you').hidden;") else True)
    finally:
        driver.quit()
    env.cli("show", failed)
    wait_until("nothing needs you in the tray", lambda: needs_section() == [])
    app.kill()
    app.wait()
    kill_app()
    session.watcher.items.clear()


def test_the_runs_list_is_live(session, env):
    """While the runs list is on screen, a run at work's tokens follow what
    it spends and its age and duration tick, with no status change."""
    spend_bin = env.root / "spend-bin"
    spend_bin.mkdir()
    (spend_bin / "pi").symlink_to(FAKES / "spender")
    (env.project / ".corral" / "presets" / "spend.md").write_text(
        "---\nname: spend\ndescription: spends slowly\nagent: pi\n---\n")
    kill_app()
    run = env.launch_with("spend", "spend", PATH=f"{spend_bin}:{env.env['PATH']}", SPEND_EVERY="0.4",
                          SPEND_MESSAGES="60")
    driver = WebDriver(env, [])
    try:
        row = f"#runs tr[data-id='{run}']"
        first = wait_until("the run's tokens", lambda: driver.text(f"{row} td:nth-child(7)") not in ("", "-") and
                           driver.text(f"{row} td:nth-child(7)"))
        wait_until("its tokens follow what it spends", lambda: driver.text(f"{row} td:nth-child(7)") != first, timeout=15)
        duration = driver.text(f"{row} .dur")
        wait_until("its duration ticks", lambda: driver.text(f"{row} .dur") != duration, timeout=5)
    finally:
        driver.quit()
        env.cli("abort", run)
        kill_app()


def overflows(driver):
    """What runs off the window's right edge at its size, if anything."""
    return driver.js("""
        const width = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth > width) return 'the page';
        const out = [...document.querySelectorAll('#view *')].find(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > width + 1 && getComputedStyle(e).position !== 'absolute';
        });
        return out ? (out.id || out.className || out.tagName) : null;""")


def test_a_run_page_at_a_glance(session, env):
    """A run's page says at once what it is and why: status with its
    reason, the error in words, a budget meter, children with their
    status (a failed one first), the transcript right under it with usage
    folded into its message, the details folded; the Timeline draws spend
    per day and the period chosen; the launch form takes a budget; at the
    window's default size nothing runs off its right edge."""
    kill_app()
    bin_dir = env.root / "page-bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(FAKES / "replay")
    usage = '"usage":{"input":1800,"output":220,"cacheRead":0,"cacheWrite":0,"totalTokens":2020,"cost":{"total":0.01}}'
    overloaded = json.dumps('529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    stream = env.root / "overloaded.jsonl"
    stream.write_text("\n".join([
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-11-25T10:00:00.000Z","cwd":"/tmp"}',
        '{"type":"agent_start"}',
        '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"looking into it\\nsecond line"}],"model":"m",' + usage + ',"stopReason":"toolUse"}}',
        '{"type":"message_end","message":{"role":"assistant","content":[],"model":"m",' + usage + ',"stopReason":"error","errorMessage":' + overloaded + '}}',
        '{"type":"agent_end","messages":[]}',
    ]) + "\n")
    (env.project / ".corral" / "presets" / "overloaded.md").write_text(
        "---\nname: overloaded\ndescription: fails as an overloaded API\nagent: pi\nbudget: {usd: 1}\n---\n")
    env.preset("broken", ["sh", "-c", "echo overloaded >&2; exit 3"], "Fails")
    absent = next(a for a in ("gemini", "opencode", "codex", "claude") if not shutil.which(a, path=env.env["PATH"]))
    (env.project / ".corral" / "presets" / "absent.md").write_text(
        f"---\nname: absent\ndescription: an agent not installed here\nagent: {absent}\n---\n")
    failed = env.launch_with("overloaded", "try", PATH=f"{bin_dir}:{env.env['PATH']}", FAKE_STREAM=str(stream))
    wait_until("the failure", lambda: env.show(failed)["exited_at"] is not None)
    assert env.show(failed)["status"] == "failed", env.show(failed)
    gate = env.root / "parent-gate"
    parent = env.launch("slow", str(gate))
    child_ok = env.cli("launch", "quick", "fine", "--parent", parent)
    child_bad = env.cli("launch", "broken", "not fine", "--parent", parent)
    for child in (child_ok, child_bad):
        wait_until("the children", lambda: env.show(child)["exited_at"] is not None)

    driver = WebDriver(env, ["--open", failed])
    try:
        # Status, its reason and the error in words, before anything else.
        # "failed" once (the status), then why: its stop reason.
        wait_until("the reason", lambda: driver.text("#run-reason") == "api error")
        assert driver.text("#run-error").startswith("529: Overloaded"), driver.text("#run-error")
        assert '{"type"' not in driver.js("return document.querySelector('#run-error .notice-words').textContent")
        # A budget as a meter: a cent of a dollar.
        assert "$0.02 · 4040 tokens of $1.00" in driver.text("#budget-meter"), driver.text("#budget-meter")
        # The transcript right under the header; usage folded into the
        # message it follows, a long text saying how much more it has.
        order = driver.js("return [...document.querySelectorAll('#view h2, #run-details')].map(e => e.id || e.textContent)")
        assert order.index("Transcript") < order.index("Reply") < order.index("run-details"), order
        wait_until("the rows", lambda: driver.js("return document.querySelectorAll('#transcript .ev').length") >= 2)
        kinds = driver.js("return [...document.querySelectorAll('#transcript .ev .kind')].map(e => e.textContent)")
        assert "usage" not in kinds, kinds
        first = driver.js("return document.querySelector('#transcript .ev.k-text').textContent")
        assert "looking into it" in first and "+1 line" in first and "1k in · 220 out" in first, first
        driver.click("#transcript .ev.k-text")
        wait_until("the row whole", lambda: driver.text("#event-text") == "looking into it\nsecond line")
        # The details are folded.
        assert driver.js("return document.querySelector('#run-details').open") is False
        assert not overflows(driver), overflows(driver)
        driver.screenshot(ARTIFACTS / "run-page-failed.png")

        # A parent: its children with their status, the failed one first.
        driver.js("location.hash = arguments[0]", f"#/run/{parent}")
        wait_until("the children", lambda: driver.js("return document.querySelectorAll('#children .child').length") == 2)
        statuses = driver.js("return [...document.querySelectorAll('#children .child')].map(c => [c.dataset.id, c.dataset.status])")
        assert statuses == [[child_bad, "failed"], [child_ok, "completed"]], statuses
        # Its duration ticks while it runs; a command says no tokens or cost.
        figures = driver.text("#run-figures")
        assert "tokens" not in figures and "-" not in figures, figures
        wait_until("its duration ticks", lambda: driver.text("#run-figures") != figures, timeout=5)
        driver.screenshot(ARTIFACTS / "run-page-parent.png")
        gate.write_text("")
        # A run that completed the ordinary way carries no reason beside
        # its status ("exit code" read like an error).
        driver.js("location.hash = arguments[0]", f"#/run/{child_ok}")
        wait_until("the child's page", lambda: child_ok in (driver.js("return document.querySelector('.run-title')?.textContent") or ""))
        assert driver.js("return document.querySelector('#run-reason')?.textContent ?? null") is None

        # The Timeline: spend per day per preset, and the period whole.
        driver.js("location.hash = '#/timeline'")
        wait_until("the spend chart", lambda: driver.js("return document.querySelectorAll('#spend rect.spend-bar').length") >= 1)
        presets = driver.js("return [...document.querySelectorAll('#spend rect.spend-bar')].map(r => r.dataset.preset)")
        assert "overloaded" in presets, presets
        # Days and times written one way, as `corral` writes them: "29 Nov", 24-hour.
        said = driver.js("return [...document.querySelectorAll('#spend .spend-axis, .tl-axis span')].map(t => t.textContent).join(' | ')")
        assert time.strftime("%-d %b") in said and "/" not in said and "AM" not in said and "PM" not in said, said
        # "Last 6 hours" spans six hours: a run of seconds is a sliver.
        width = driver.js(f"return parseFloat(document.querySelector(\"[data-id='{failed}'] .tl-bar\").style.width)")
        assert width < 1, f"a run of seconds is {width}% of six hours"
        assert not overflows(driver), overflows(driver)
        driver.screenshot(ARTIFACTS / "window-timeline.png")

        # Presets: nothing but presets (DOM's "null" never written); one
        # whose agent is not installed says so, and offers no launch.
        driver.js("location.hash = '#/presets'")
        wait_until("the presets", lambda: driver.find("[data-preset=slow]"))
        assert "null" not in driver.text("#presets-body"), driver.text("#presets-body")
        card = "[data-preset=absent]"
        assert "cannot start here" in driver.text(card), driver.text(card)
        assert driver.js(f"return document.querySelectorAll('{card} a').length") == 0, "a Launch… that opens another preset"
        assert not overflows(driver), overflows(driver)

        # Schedules' times in the one format, and nothing off the edge.
        driver.js("location.hash = '#/schedules'")
        wait_until("the schedules", lambda: driver.find("#schedules-body"))
        assert not overflows(driver), overflows(driver)

        # The launch form: whole at the default size, a folder already
        # chosen, and a budget of its own.
        driver.js("location.hash = '#/launch?preset=quick'")
        wait_until("the form", lambda: driver.js("return document.querySelector('#launch-preset').value") == "quick")
        assert driver.js("return document.querySelector('#launch-cwd').value") == str(env.project)
        assert driver.js("const r = document.querySelector('#launch-pick').getBoundingClientRect(); return r.right <= innerWidth")
        assert not overflows(driver), overflows(driver)
        driver.screenshot(ARTIFACTS / "window-launch.png")
        driver.type("#launch-task", "with a budget")
        driver.type("#launch-budget", "0.5")
        driver.click("#launch-submit")
        launched = wait_until("the new run", lambda: (h := driver.js("return location.hash")).startswith("#/run/") and h[6:])
        assert env.show(launched)["budget"] == {"usd": 0.5}, env.show(launched)
        # The form opened afresh offers the preset launched last (not the
        # alphabetically first, nor one that cannot start), and Ctrl+Enter
        # in the task launches.
        driver.js("location.hash = '#/launch'")
        wait_until("the last preset", lambda: driver.js("return document.querySelector('#launch-preset')?.value") == "quick")
        driver.type("#launch-task", "by the keyboard\ue009\ue007\ue000")
        keyed = wait_until("the keyed run", lambda: (h := driver.js("return location.hash")) != f"#/run/{launched}"
                           and h.startswith("#/run/") and h[6:])
        assert env.show(keyed)["task"] == "by the keyboard", env.show(keyed)
    finally:
        driver.quit()
        gate.write_text("")
        kill_app()


def test_a_refused_notification_is_shown_later_once(session, env):
    """At login the notification server may not be up yet: an announcement
    it refuses is given back to the store and shown once it takes them,
    never lost and never twice."""
    app = env.start_tray()
    item = wait_until("the tray", session.tray)
    wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
    before = len(session.notifications.shown)
    session.notifications.refusing = True
    try:
        run = env.launch("quick", "while the server is down")
        wait_until("a refusal", lambda: session.notifications.refused > 0)
        wait_until("the claim given back, not lost", lambda: env.show(run)["notified_at"] is None)
    finally:
        session.notifications.refusing = False
    note = wait_until("shown later", lambda: next((n for n in session.notifications.shown[before:] if "quick" in n["summary"]), None), timeout=20)
    assert note
    time.sleep(6)  # a retry period: nothing more may come
    assert len([n for n in session.notifications.shown[before:] if "quick" in n["summary"]]) == 1, "shown once"
    app.kill()
    app.wait()
    session.watcher.items.clear()


def test_a_hanging_notification_server_stalls_nothing(session, env):
    """A notification server that takes a notification and never answers
    (D-Bus waits 25 s) holds up only the notifications: the tray's count
    follows the store meanwhile, and what waited is shown once it answers."""
    session.watcher.items.clear()
    app = env.start_tray()
    try:
        item = wait_until("the tray", session.tray)
        wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
        before = len(session.notifications.shown)
        session.notifications.hanging = True
        first = env.launch("quick", "while the server hangs")
        wait_until("the held notification", lambda: session.notifications.held)
        gate = env.root / "release"
        env.launch("slow", str(gate))
        wait_until("the count meanwhile", lambda: tray_label(item) == "1 running / 2 total", timeout=5)
        gate.write_text("")
        wait_until("the count meanwhile", lambda: tray_label(item) == "0 running / 2 total", timeout=5)
        session.answer_held_notifications()
        wait_until("both announced", lambda: len(session.notifications.shown) - before >= 2)
        assert any("quick" in n["summary"] for n in session.notifications.shown[before:])
        assert env.show(first)["notified_at"], "announced, and marked so"
    finally:
        session.notifications.hanging = False
        session.answer_held_notifications()
        app.kill()
        app.wait()
        session.watcher.items.clear()


def test_a_window_that_cannot_start_is_said(session, env):
    """A tray installed without its window program says so when asked to
    open the window, instead of doing nothing."""
    lonely = env.root / "lonely"
    lonely.mkdir()
    shutil.copy2(TRAY, lonely / "corral-tray")
    env.env["PATH"] = ":".join(p for p in env.env["PATH"].split(":") if not Path(p, "corral-app").exists())
    session.watcher.items.clear()
    tray = subprocess.Popen([str(lonely / "corral-tray")], env=env.env, stdout=subprocess.DEVNULL,
                            stderr=open(env.root / "app.log", "a"))
    try:
        item = wait_until("the tray", session.tray)
        wait_until("an empty tray", lambda: tray_label(item) == "0 running / 0 total")
        before = len(session.notifications.shown)
        menu_path, entries = tray_menu(item)
        click_menu(item, menu_path, next(i for i, label in entries if label == "Open Corral"))
        note = wait_until("the problem said", lambda: next(
            (n for n in session.notifications.shown[before:] if "Cannot open the window" in n["body"]), None))
        assert "corral-app" in note["body"], note
        assert tray.poll() is None, "the tray lives on"
    finally:
        tray.kill()
        tray.wait()
        session.watcher.items.clear()


def test_window(session, env):
    """The window: XSS stays text, the tray's notification click and Launch
    item reach the open window (one window: the tray's start of
    `corral-app` hands over to it), abort works, a second start focuses the
    instance; autostart starts the tray."""
    xss = env.launch("xss", "render me")
    wait_until("the xss run", lambda: env.show(xss)["exited_at"] is not None)
    session.watcher.items.clear()
    tray = env.start_tray()
    driver = WebDriver(env, ["--open", xss])
    try:
        wait_until("the transcript", lambda: XSS in driver.text("#final-text"))
        assert driver.js("return window.__pwned === undefined"), "agent text ran as code"
        assert driver.js("return document.querySelectorAll('#view img, #view script, #view b').length") == 0
        assert XSS in driver.js("return document.querySelector('#transcript').textContent")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.screenshot(ARTIFACTS / "window-xss.png")

        # A finished run's notification, clicked, shows its transcript.
        item = wait_until("the tray", session.tray)
        before = len(session.notifications.shown)
        # To a server that reads markup, an agent's text is escaped: the
        # body says what the run printed, never a tag or a link of its own.
        env.launch("xss", "again")
        marked = wait_until("its notification", lambda: next((n for n in session.notifications.shown[before:] if "xss" in n["summary"]), None))
        assert "&lt;img src=x" in marked["body"] and "<img" not in marked["body"] and "<b>" not in marked["body"], marked
        before = len(session.notifications.shown)
        done = env.launch("quick", "click me")
        note = wait_until("its notification", lambda: next((n for n in session.notifications.shown[before:] if "quick" in n["summary"]), None))
        # Clicked as a user would, though sooner: the app may still be
        # subscribing to the click when it first comes, so click again.
        def clicked():
            session.click_notification(note["id"], "default")
            return wait_until("the window on that run", lambda: driver.js("return location.hash") == f"#/run/{done}", timeout=0.5)

        wait_until("the click to open the run", lambda: _try(clicked), every=0)
        wait_until("its result", lambda: driver.text("#final-text") == "quick-answer")

        # The tray's Launch item opens the form; completing it starts a run.
        menu_path, entries = tray_menu(item)
        launch_item = next(i for i, label in entries if label.startswith("echo (command)"))
        click_menu(item, menu_path, launch_item)
        wait_until("the launch form", lambda: driver.js("return location.hash").startswith("#/launch?preset=echo"))
        wait_until("presets loaded", lambda: driver.js("return document.querySelector('#launch-preset').value") == "echo")
        assert driver.js("return document.querySelector('#launch-worktree').checked") is False, "the preset's choice"
        driver.type("#launch-task", "hello from the form")
        driver.js("document.querySelector('#launch-cwd').value = arguments[0]", str(env.project))
        driver.click("#launch-submit")
        launched = wait_until("the new run", lambda: (h := driver.js("return location.hash")).startswith("#/run/") and h[6:])
        wait_until("it to complete", lambda: env.show(launched)["status"] == "completed")
        assert env.show(launched)["final_text"] == "hello from the form"
        assert env.show(launched)["worktree"] is None

        # A run launched from the window is shepherded by the `corral` CLI
        # beside it (a few MB), not by the window's program (WebKit linked).
        gate = env.root / "form-gate"
        driver.js("location.hash = arguments[0]", f"#/launch?preset=slow&cwd={env.project}")
        wait_until("the slow preset", lambda: driver.js("return document.querySelector('#launch-preset').value") == "slow")
        driver.js("document.querySelector('#launch-task').value = arguments[0]", str(gate))
        driver.click("#launch-submit")
        slow = wait_until("the slow run", lambda: (h := driver.js("return location.hash")).startswith("#/run/") and h[6:] != launched and h[6:])
        shepherd = wait_until("its shepherd", lambda: env.show(slow)["shepherd_pid"])
        assert Path(f"/proc/{shepherd}/comm").read_text().strip() == "corral", "a light shepherd"
        gate.write_text("")
        wait_until("it to complete", lambda: env.show(slow)["status"] == "completed")

        # Abort from the window.
        stuck = env.launch("slow", str(env.root / "never"))
        wait_until("running", lambda: env.show(stuck)["status"] == "running")
        driver.js("location.hash = arguments[0]", f"#/run/{stuck}")
        wait_until("the abort button", lambda: driver.find("#abort"))
        driver.screenshot(ARTIFACTS / "window-running.png")
        # Pause and resume from the window (its commands are granted to it).
        driver.click("#pause")
        wait_until("paused", lambda: env.show(stuck)["status"] == "paused")
        wait_until("the resume button", lambda: driver.find("#resume"))
        driver.click("#resume")
        wait_until("running again", lambda: env.show(stuck)["status"] == "running")
        wait_until("the abort button again", lambda: driver.find("#abort"))
        driver.click("#abort")
        wait_until("aborted", lambda: env.show(stuck)["status"] == "aborted")
        wait_until("the view to say so", lambda: "aborted" in driver.text("#run-head"))

        # A second launch hands its --open to the running instance.
        second = subprocess.run([str(APP), "--open", done], env=env.env, timeout=20, capture_output=True)
        assert second.returncode == 0, second
        wait_until("focus on that run", lambda: driver.js("return location.hash") == f"#/run/{done}")

        # A transcript of 100k events opens fast and scrolls: only the rows
        # in view exist, each at its place.
        big = env.launch_with("flood", "many events", FLOOD_LINES="100000", FLOOD_FORMAT="pi-tools")
        wait_until("100k events", lambda: env.show(big)["status"] == "completed", timeout=120)
        opened = driver.js("""
            const t0 = performance.now();
            location.hash = arguments[0];
            return t0;""", f"#/run/{big}")
        wait_until("the first rows", lambda: driver.js("return document.querySelectorAll('#transcript .ev').length") > 5)
        painted = driver.js("return performance.now()")
        TIMINGS["open 100k-event transcript (ms to first rows)"] = round(painted - opened)
        rows = driver.js("return document.querySelectorAll('#transcript .ev').length")
        assert rows < 200, f"{rows} rows rendered: not virtualized"
        driver.js("const t = document.querySelector('#transcript'); t.scrollTop = 50000 * 28;")
        wait_until("rows at 50000", lambda: driver.js(
            "return [...document.querySelectorAll('#transcript .ev')].some(e => e.dataset.seq === '50001' && e.textContent.includes('result 50001'))"))
        assert driver.js("return document.querySelector('#transcript [data-seq=\"50001\"]').style.top") == f"{50000 * 28}px"
        driver.screenshot(ARTIFACTS / "window-transcript-100k.png")

        driver.js("location.hash = '#/runs'")
        wait_until("the runs list", lambda: driver.find("#runs"))
        driver.screenshot(ARTIFACTS / "window-runs.png")
        driver.js("location.hash = '#/timeline'")
        wait_until("the timeline", lambda: driver.find(".tl-row"))
        driver.screenshot(ARTIFACTS / "window-timeline.png")
        driver.js("location.hash = '#/presets'")
        wait_until("the presets", lambda: driver.find("[data-preset=slow]"))
        driver.screenshot(ARTIFACTS / "window-presets.png")

        # Start at login: an XDG autostart entry, on and off.
        entry = env.root / "home" / ".config" / "autostart" / "corral.desktop"
        wait_until("the settings", lambda: driver.find("#autostart"))
        driver.click("#autostart")
        wait_until("the autostart entry", entry.exists)
        assert f"Exec=\"{TRAY}\"" in entry.read_text(), entry.read_text()
        driver.click("#autostart")
        wait_until("the entry removed", lambda: not entry.exists())
        # This machine, as `corral doctor` sees it: the desktop's checks ok.
        # WebKit's driver scrolls an element at the foot of the page to
        # where the footer covers it ("not interactable"): in view first.
        driver.js("document.querySelector('#doctor button').scrollIntoView({block: 'center'})")
        driver.click("#doctor button")
        wait_until("the report", lambda: driver.js(
            "return document.querySelectorAll('#doctor .finding').length") > 5)
        assert driver.js("return document.querySelector('#doctor [data-check=\"desktop/notifications\"]').className") == "finding ok"
        assert tray.poll() is None, "the tray lives on"
    finally:
        driver.quit()
        tray.kill()
        tray.wait()
        kill_app()


def repository_with_remote(env):
    """The project as a git repository on `main` (README "hello"), pushed to
    a bare repository as `origin`, and `gh` the tests' stand-in (it logs
    what it is asked): `git(ARGS...)` in the project, and the remote."""
    git = lambda *args: subprocess.run(["git", "-C", str(env.project), *args], check=True, capture_output=True)
    git("init", "-q", "-b", "main")
    (env.project / "README").write_text("hello\n")
    git("add", "README")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    git("config", "user.name", "t")
    git("config", "user.email", "t@t")
    remote = env.root / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    git("remote", "add", "origin", str(remote))
    git("push", "-q", "origin", "main")
    (env.root / "bin" / "gh").symlink_to(FAKES / "gh")
    return git, remote


def test_review_and_reply(session, env):
    """A worktree run's changes in the window (1,000 files: the list, one
    file's coloured diff, +N −M in the runs list, Discard that asks first),
    and the conversation: the reply box and Allow and continue. No tray
    runs: the window follows the store on its own."""
    git, remote = repository_with_remote(env)
    gh_log = env.root / "gh.log"
    env.env["FAKE_GH_LOG"] = str(gh_log)
    script = 'for i in $(seq 1 1000); do echo "line $i" > f$i.txt; done; printf \'fn main() { let s = "hi"; }\\n\' > main.rs'
    (env.project / ".corral" / "presets" / "edits.md").write_text(
        f"---\nname: edits\ndescription: changes 1001 files\nagent: command\ncommand: {json.dumps(['sh', '-c', script])}\nworktree: true\n---\n")
    (env.root / "bin" / "claude").symlink_to(FAKES / "conversing")
    (env.project / ".corral" / "presets" / "talk.md").write_text("---\nname: talk\ndescription: converses\nagent: claude\n---\n")
    env.cli("presets", "trust", str(env.project))
    log = str(env.root / "turns.log")

    edits = env.launch("edits", "make many files")
    wait_until("the edits run", lambda: env.show(edits)["exited_at"] is not None, timeout=60)
    assert env.show(edits)["changes"] == {"files": 1001, "added": 1001, "removed": 0}, env.show(edits)
    talk = env.launch_with("talk", "hello", CONVERSE_LOG=log)
    denied = env.launch_with("talk", "run npm test", CONVERSE_LOG=log)
    for run in (talk, denied):
        wait_until("the conversing runs", lambda: env.show(run)["exited_at"] is not None)
    # An older Corral's autostart entry started `corral-app` (the tray
    # then): the window, started by it at login, points it at the tray.
    entry = env.root / "home" / ".config" / "autostart" / "corral.desktop"
    entry.parent.mkdir(parents=True)
    entry.write_text('[Desktop Entry]\nType=Application\nName=Corral\nExec="/usr/local/bin/corral-app"\n')
    driver = WebDriver(env, ["--open", talk])
    try:
        wait_until("the window", lambda: driver.find("#reply-text"))
        assert f'Exec="{TRAY}"' in entry.read_text(), entry.read_text()
        driver.js("location.hash = '#/runs'")
        wait_until("the runs list", lambda: driver.find("#runs"))
        wait_until("+N −M in the list", lambda: "+1001 −0" in driver.text(f"tr[data-id='{edits}'] .changes-cell"))
        # Each run's folder, and for a worktree run its repository, by name.
        assert driver.js(f"return document.querySelector(\"tr[data-id='{edits}'] td:nth-child(3)\").textContent") == "project"
        assert driver.js(f"return document.querySelector(\"tr[data-id='{talk}'] td:nth-child(3)\").textContent") == "project"
        wait_until("the worktrees' disk space", lambda: "1 worktree" in driver.text("#worktrees-usage"))
        opened = driver.js("const t0 = performance.now(); location.hash = arguments[0]; return t0;", f"#/run/{edits}")
        wait_until("the changed files and a diff", lambda: driver.js(
            "return document.querySelectorAll('#changed-files .file').length === 1001 && document.querySelectorAll('#diff .d2h-code-line-ctn').length >= 1"))
        TIMINGS["Changes view on a 1,000-file change (ms to files and first diff)"] = round(driver.js("return performance.now()") - opened)
        driver.js("[...document.querySelectorAll('#changed-files .file')].find(f => f.textContent.startsWith('main.rs')).click()")
        wait_until("main.rs coloured", lambda: driver.js("return document.querySelectorAll('#diff .tk-kw, #diff .tk-str').length") >= 3)
        # As reviewers read a diff: line numbers beside the lines, git's
        # own headers (`diff --git`, `index …`) not shown as lines.
        assert driver.js("return document.querySelectorAll('#diff [class*=linenumber]').length") >= 1
        assert "index " not in driver.text("#diff") and "diff --git" not in driver.text("#diff"), driver.text("#diff")
        driver.screenshot(ARTIFACTS / "window-changes.png")
        driver.click("#discard")
        assert env.show(edits)["worktree"] is not None, "one click only asks"
        driver.click("#discard")
        wait_until("discarded", lambda: env.show(edits)["worktree"] is None)

        # Merged from the window: the panel says what is left (nothing),
        # and Merge cannot be pressed again.
        small_script = "echo changed > README"
        (env.project / ".corral" / "presets" / "small.md").write_text(
            f"---\nname: small\ndescription: changes one file\nagent: command\ncommand: {json.dumps(['sh', '-c', small_script])}\nworktree: true\n---\n")
        env.cli("presets", "trust", str(env.project))
        small = env.launch("small", "one change")
        wait_until("the small run", lambda: env.show(small)["exited_at"] is not None, timeout=60)
        driver.js("location.hash = arguments[0]", f"#/run/{small}")
        wait_until("its one file", lambda: driver.js("return document.querySelectorAll('#changed-files .file').length") == 1)
        # The change within the line is marked.
        wait_until("the line's change marked", lambda: driver.js("return document.querySelectorAll('#diff ins, #diff del').length") >= 1)
        # Open pull request: committed, pushed, opened with gh, and said.
        driver.click("#open-pr")
        wait_until("the pull request said", lambda: "https://github.com/o/r/pull/7" in driver.text("#pr-link"))
        assert "pr\ncreate\n--head\ncorral/" + small in gh_log.read_text(), gh_log.read_text()
        assert subprocess.run(["git", "-C", str(remote), "show", f"corral/{small}:README"], capture_output=True, text=True).stdout == "changed\n"
        driver.click("#merge")
        # Said in words where the changes were, with no hash the user
        # never saw and no Merge to press again; the list marks it merged.
        wait_until("merged, said", lambda: "Merged as " in driver.text("#changes-state"))
        assert "against" not in driver.text("#changes") and "0 files" not in driver.text("#changes"), driver.text("#changes")
        assert not driver.js("return !!document.querySelector('#merge')"), "Merge again after a merge"
        assert (env.project / "README").read_text() == "changed\n"
        driver.js("location.hash = '#/runs'")
        wait_until("merged in the list", lambda: driver.text(f"tr[data-id='{small}'] .changes-cell") == "merged")

        # Several runs reviewed together from the runs list: two change
        # the same line, one a file of its own; the pair is named before
        # anything is merged, and the two that do not clash merge at once.
        for name, script in [("left", "echo left > README"), ("right", "echo right > README"), ("own", "echo own > own.txt")]:
            (env.project / ".corral" / "presets" / f"{name}.md").write_text(
                f"---\nname: {name}\ndescription: edits\nagent: command\ncommand: {json.dumps(['sh', '-c', script])}\nworktree: true\n---\n")
        env.cli("presets", "trust", str(env.project))
        left, right, own = (env.launch(name, "edit") for name in ("left", "right", "own"))
        for run in (left, right, own):
            wait_until("the edit", lambda: env.show(run)["exited_at"] is not None, timeout=60)
        driver.js("location.hash = '#/runs'")
        row_top = lambda run: driver.js(f"return document.querySelector(\"tr[data-id='{run}']\").getBoundingClientRect().top")
        wait_until("the rows", lambda: driver.find(f"tr[data-id='{own}'] .pick"))
        tops = {run: row_top(run) for run in (left, right, own)}
        for run in (left, right, own):
            wait_until("its pick box", lambda: driver.find(f"tr[data-id='{run}'] .pick"))
            # Ticking never moves the rows under the pointer.
            assert row_top(run) == tops[run], f"the list moved under the pointer: {row_top(run)} != {tops[run]}"
            driver.click(f"tr[data-id='{run}'] .pick")
        wait_until("the review button", lambda: driver.text("#review-together") == "Review 3 together")
        driver.click("#review-together")
        wait_until("the pair named", lambda: f"{left} × {right}: README" in driver.text("#review-conflicts"))
        assert driver.js("return document.querySelector('[data-path=\"README\"] .chip')?.textContent") == "conflict"
        assert driver.js("return document.querySelectorAll('[data-path=\"README\"] .review-run').length") == 2
        assert not driver.js("return !!document.querySelector('#merge-all')"), "Merge all offered with a conflict"
        driver.screenshot(ARTIFACTS / "window-review-together.png")
        # The run that clashes with nothing can go alone.
        driver.click(f".merge-one[data-run='{own}']")
        # Merged as the store says it (its file lands a moment before the
        # merge is recorded, and a review drawn between still offers it).
        wait_until("own merged", lambda: (env.project / "own.txt").exists() and (env.show(own).get("worktree") or {}).get("merged"))
        driver.js("location.hash = arguments[0]", f"#/review?runs={own},{left}")
        wait_until("no clash", lambda: driver.find("#merge-all"))
        driver.click("#merge-all")
        wait_until("both merged", lambda: (env.project / "own.txt").exists() and (env.project / "README").read_text() == "left\n")
        # Nothing is left to merge, and no Merge all is live to fail.
        wait_until("said done", lambda: driver.find("#review-done"))
        assert not driver.js("return !!document.querySelector('#merge-all')")

        # Two runs that do not clash go out as one pull request, merged in
        # order on a branch of their own (the merges above published first:
        # a pull request never carries unpushed commits).
        subprocess.run(["git", "-C", str(env.project), "push", "-q", "origin", "HEAD:main"], check=True)
        for name, script in [("north", "echo n > north.txt"), ("south", "echo s > south.txt")]:
            (env.project / ".corral" / "presets" / f"{name}.md").write_text(
                f"---\nname: {name}\ndescription: edits\nagent: command\ncommand: {json.dumps(['sh', '-c', script])}\nworktree: true\n---\n")
        env.cli("presets", "trust", str(env.project))
        north, south = (env.launch(name, "edit") for name in ("north", "south"))
        for run in (north, south):
            wait_until("the edit", lambda: env.show(run)["exited_at"] is not None, timeout=60)
        driver.js("location.hash = arguments[0]", f"#/review?runs={north},{south}")
        wait_until("one pull request offered", lambda: driver.find("#pr-all"))
        driver.click("#pr-all")
        wait_until("one pull request of both", lambda: f"--head\ncorral/together-{north}\n" in gh_log.read_text())
        wait_until("each run says it", lambda: (env.show(south).get("pull_request") or {}).get("number") == 7)

        # The reply box: a follow-up in the agent's own session.
        driver.js("location.hash = arguments[0]", f"#/run/{talk}")
        wait_until("the reply box", lambda: driver.find("#reply-text"))
        driver.type("#reply-text", "and more")
        driver.click("#reply-send")
        wait_until("the follow-up's answer", lambda: env.show(talk)["final_text"] == "Echo: and more")
        wait_until("the reply in the transcript", lambda: "and more" in driver.js("return document.querySelector('#transcript').textContent"))

        # Denied actions, allowed and continued.
        driver.js("location.hash = arguments[0]", f"#/run/{denied}")
        wait_until("the denied note", lambda: "Bash(npm test)" in driver.text("#denied"))
        driver.click("#allow-denied")
        wait_until("the allowed turn", lambda: env.show(denied)["final_text"] == "ran npm test: 3 passed")
        wait_until("the note gone", lambda: not driver.js("return !!document.querySelector('#denied')"))

        # The window is told what changed: its header counts follow the
        # store, and a broken store shows as a banner until it is fixed.
        total = len(json.loads(env.cli("ls", "--json")))
        wait_until("the counts", lambda: driver.text("#counts") == f"0 running / {total} total")
        config = env.home / "config.toml"
        good = config.read_text()
        config.write_text(good + "max_paralel = 3\n")
        wait_until("the banner", lambda: "config.toml" in driver.js("return document.querySelector('#banner').textContent"))
        assert driver.js("return !document.querySelector('#banner').hidden")
        config.write_text(good)
        wait_until("the banner gone", lambda: driver.js("return document.querySelector('#banner').hidden"))
    finally:
        driver.quit()
        kill_app()


def test_the_tray_follows_pull_requests(session, env):
    """A pull request opened from a run (`corral pr`) is followed by the
    tray: what the forge asks of it (changes requested) is in Needs you
    with Send to the run, and said once on the desktop, without anyone
    asking the forge by hand."""
    repository_with_remote(env)
    view = env.root / "view.json"
    view.write_text(json.dumps({"state": "OPEN", "reviewDecision": "CHANGES_REQUESTED", "statusCheckRollup": [],
                                "reviews": [{"author": {"login": "alice"}, "state": "CHANGES_REQUESTED", "body": "Not yet."}]}))
    env.env["FAKE_GH_LOG"] = str(env.root / "gh.log")
    (env.project / ".corral" / "presets" / "small.md").write_text(
        f"---\nname: small\ndescription: changes one file\nagent: command\ncommand: {json.dumps(['sh', '-c', 'echo changed > README'])}\nworktree: true\n---\n")
    env.cli("presets", "trust", str(env.project))
    run = env.launch("small", "one change")
    wait_until("the run", lambda: env.show(run)["exited_at"] is not None, timeout=60)
    assert "pull request #7 opened" in env.cli("pr", run)
    env.env["FAKE_GH_PR"] = str(view)
    kill_app()
    known = len(session.watcher.items)
    before = len(session.notifications.shown)
    tray = env.start_tray()
    # This tray's item, not one an earlier test's tray left registered.
    item = wait_until("the tray", lambda: len(session.watcher.items) > known and session.tray())

    def notes():
        return [n for n in session.notifications.shown[before:] if "pull request #7" in n["summary"]]

    def asked():
        _, nested = tray_menu(item, depth=True)
        return [label for _, label, level in nested if level == 1 and "pull request #7" in label]

    shown = wait_until("the forge's ask in the tray", asked, timeout=30)
    assert "changes requested" in shown[0], shown
    # And on the desktop, once, with what the reviewer said and how to send it.
    note = wait_until("the forge's ask as a notification", notes)[0]
    assert note["summary"] == f"⇅ small ({run}): pull request #7: changes requested", note
    assert "Not yet." in note["body"] and f"corral pr {run} --send" in note["body"], note
    # An `&` in a label is shown as written (a folder `R&D`), never taken
    # for an access key's mark.
    amp = env.launch("quick", "the R&D notes")
    wait_until("its end", lambda: env.show(amp)["exited_at"] is not None)
    wait_until("the & as written", lambda: any("the R&D notes" in label for _, label in tray_menu(item)[1]))
    assert not any("the RD notes" in label or "R_D" in label for _, label in tray_menu(item)[1]), tray_menu(item)[1]
    assert len(notes()) == 1, "said once, though the tray looked again"
    tray.kill()
    tray.wait()


def main():
    if not APP.exists() or not TRAY.exists() or not CLI.exists():
        print(f"build the app, the tray and the CLI first: {APP}, {TRAY}, {CLI}", file=sys.stderr)
        return 2
    session = Session()
    passed = failed = 0
    for test in [test_tray_and_notifications, test_app_killed_with_20_active_runs,
                 test_watcher_survives_a_broken_config, test_the_tray_fires_schedules, test_doctor_reads_the_desktop,
                 test_one_notification_per_piece_of_work, test_a_budget_reached_is_asked_on_the_desktop,
                 test_needs_you_at_a_glance, test_a_run_page_at_a_glance, test_the_runs_list_is_live,
                 test_a_refused_notification_is_shown_later_once, test_a_hanging_notification_server_stalls_nothing,
                 test_a_window_that_cannot_start_is_said, test_window, test_the_schedules_view,
                 test_review_and_reply, test_the_tray_follows_pull_requests]:
        # CORRAL_APP_ONLY=word: only the tests whose name has it (while working on one).
        if os.environ.get("CORRAL_APP_ONLY", "") not in test.__name__:
            continue
        env = Env()
        started = time.monotonic()
        try:
            test(session, env)
            passed += 1
            print(f"PASS {test.__name__} ({time.monotonic() - started:.1f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {test.__name__}", flush=True)
            traceback.print_exc()
            for log in ["app.log", "driver.log"]:
                path = env.root / log
                if path.exists():
                    print(f"--- {log}\n{path.read_text()[-4000:]}")
        finally:
            for program in ("corral-tray", "corral-app"):
                subprocess.run(["pkill", "-KILL", "-x", program], check=False)
            env.abort_active()
    for what, value in TIMINGS.items():
        print(f"measured: {what}: {value}")
    print(f"app: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
