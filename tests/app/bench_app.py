#!/usr/bin/env python3
"""Measures the app (prints figures, asserts nothing): start to tray
visible, store change to tray label, idle CPU with 10 runs in the store,
CPU while 10 runs stream (tray only, the window on a finished run, the
window on a streaming run), memory with the window closed and open, and
with a store of 2,000 finished runs: the notifications at start and the
window's memory. Run by scripts/bench-app.sh."""

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from desktop import Session, close_x_window, tray_label, wait_until, x_windows  # noqa: E402
import json  # noqa: E402

from test_app import APP, CLI, Env  # noqa: E402


def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def private_kb(pid):
    """Memory only this process uses (private pages), not shared libraries."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def cpu_ticks(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    found = []
    for child in out:
        found.append(int(child))
        found.extend(children(int(child)))
    return found


def name(pid):
    return Path(f"/proc/{pid}/comm").read_text().strip()


def cpu_of_app(app, seconds):
    """Share of a core the app and its WebKit processes used over `seconds`."""
    ticks = os.sysconf("SC_CLK_TCK")
    pids = [app.pid, *children(app.pid)]
    before = sum(cpu_ticks(p) for p in pids)
    time.sleep(seconds)
    after = sum(cpu_ticks(p) for p in pids if Path(f"/proc/{p}").exists())
    return (after - before) / ticks / seconds * 100


def open_window(env, *args):
    """A second start: the running instance shows its window (on a run)."""
    subprocess.run([str(APP), *args], env=env.env, timeout=20)
    wait_until("the window", lambda: x_windows("Corral"), every=0.01)


def memory(app):
    main = rss_kb(app.pid)
    print(f"  (app private memory, shared libraries excluded: {private_kb(app.pid) / 1024:.1f} MB)")
    kids = {pid: (name(pid), rss_kb(pid)) for pid in children(app.pid)}
    webkit = sum(kb for n, kb in kids.values() if n.startswith("WebKit"))
    return main, webkit, sorted(n for n, _ in kids.values())


def main():
    session = Session()
    env = Env()
    for i in range(10):
        run = env.launch("quick", f"run {i}")
    wait_until("10 runs", lambda: env.show(run)["exited_at"] is not None)

    started = time.monotonic()
    app = env.start_app()
    item = wait_until("the tray", session.tray, every=0.005)
    wait_until("its label", lambda: tray_label(item) == "0 running / 10 total", every=0.005)
    print(f"app start -> tray visible with its label: {(time.monotonic() - started) * 1000:.0f} ms")

    db = sqlite3.connect(env.home / "corral.db")
    delays = []
    for i in range(20):
        dismissed = i % 2 == 0
        t0 = time.monotonic()
        with db:
            db.execute("UPDATE runs SET dismissed_at = ? WHERE id = ?", ("2026-01-01T00:00:00.000Z" if dismissed else None, run))
        want = "0 running / 9 total" if dismissed else "0 running / 10 total"
        wait_until("the label", lambda: tray_label(item) == want, every=0.002)
        delays.append((time.monotonic() - t0) * 1000)
    delays.sort()
    print(f"store change -> tray label: p50 {delays[10]:.0f} ms, max {delays[-1]:.0f} ms (n=20; includes a gdbus call per poll)")

    ticks = os.sysconf("SC_CLK_TCK")
    before = cpu_ticks(app.pid)
    time.sleep(60)
    used = (cpu_ticks(app.pid) - before) / ticks
    print(f"idle CPU over 60 s with 10 runs in the store: {used / 60 * 100:.2f}% ({used * 1000:.0f} ms of CPU)")

    # Ten runs streaming about 100 lines a second each: the tray must not
    # care (it looks only when a status changes).
    env.preset("stream", ["sh", "-c", "while :; do echo line; sleep 0.01; done"], "Streams lines forever")
    streams = [env.launch("stream", f"stream {i}") for i in range(10)]
    wait_until("10 running", lambda: tray_label(item) == "10 running / 20 total", every=0.05)
    before = cpu_ticks(app.pid)
    time.sleep(10)
    used = (cpu_ticks(app.pid) - before) / ticks
    print(f"tray only, 10 runs streaming ~100 lines/s each: app CPU over 10 s {used / 10 * 100:.1f}% of a core")
    # The window on a run that does not change, while the others stream:
    # told only what changed, it has nothing to redraw.
    # A window just opened works for a few seconds (WebKit starting, the
    # first fetches): the figures are of the window settled.
    open_window(env, "--open", run)
    time.sleep(10)
    print(f"window on a finished run, 10 runs streaming: app + WebKit CPU over 10 s {cpu_of_app(app, 10):.1f}% of a core")
    open_window(env, "--open", streams[0])
    time.sleep(5)
    print(f"window following one of the 10 streaming runs: app + WebKit CPU over 10 s {cpu_of_app(app, 10):.1f}% of a core")
    env.cli("abort", *streams)

    def close():
        for window in x_windows("Corral"):
            close_x_window(window)
        return not x_windows("Corral")

    wait_until("the window closed", close, every=0.3)
    time.sleep(2)

    main_kb, webkit_kb, procs = memory(app)
    print(f"memory, window closed: app {main_kb / 1024:.1f} MB, WebKit {webkit_kb / 1024:.1f} MB ({', '.join(procs) or 'no child process'})")
    t0 = time.monotonic()
    subprocess.run([str(APP), "--open", run], env=env.env, timeout=20)
    wait_until("the window", lambda: x_windows("Corral"), every=0.01)
    print(f"second launch with --open -> window mapped: {(time.monotonic() - t0) * 1000:.0f} ms")
    time.sleep(3)
    main_kb, webkit_kb, procs = memory(app)
    print(f"memory, window open: app {main_kb / 1024:.1f} MB, WebKit {webkit_kb / 1024:.1f} MB ({', '.join(procs)})")
    open_window(env)
    time.sleep(3)
    main_kb, webkit_kb, _ = memory(app)
    print(f"memory, window open on the runs list (20 runs): {(main_kb + webkit_kb) / 1024:.1f} MB in all")

    wait_until("closed", close, every=0.3)
    time.sleep(3)
    main_kb, webkit_kb, procs = memory(app)
    print(f"memory, window closed again: app {main_kb / 1024:.1f} MB, WebKit {webkit_kb / 1024:.1f} MB ({', '.join(procs) or 'no child process'})")
    app.kill()
    app.wait()
    month(session)


def month(session):
    """A month of use: 2,000 runs that ended while the app was away."""
    env = Env()
    script = f'for i in $(seq 2000); do "{CLI}" launch quick "run $i" >/dev/null || exit 1; done'
    subprocess.run(["sh", "-c", script], cwd=env.project, env=env.env, check=True, timeout=900)
    ended = lambda: all(r["exited_at"] for r in json.loads(env.cli("ls", "--json")))
    wait_until("2,000 runs ended", ended, timeout=300, every=1)
    before = len(session.notifications.shown)
    known = len(session.watcher.items)
    app = env.start_app()
    item = wait_until("the new tray", lambda: len(session.watcher.items) > known and session.tray(), every=0.05)
    wait_until("its label", lambda: tray_label(item) == "0 running / 2000 total", every=0.05)
    time.sleep(10)
    shown = session.notifications.shown[before:]
    print(f"start with 2,000 unannounced endings -> notifications within 10 s: {len(shown)} ({shown[0]['summary'] if shown else '-'})")
    open_window(env)
    time.sleep(3)
    main_kb, webkit_kb, _ = memory(app)
    print(f"memory, window open on the runs list (2,000 runs, first page of 200): {(main_kb + webkit_kb) / 1024:.1f} MB in all")
    app.kill()
    app.wait()


if __name__ == "__main__":
    main()
