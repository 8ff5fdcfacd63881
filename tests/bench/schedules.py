#!/usr/bin/env python3
"""Schedules: how soon a due slot becomes a running agent, what 1,000
schedules cost a sleeping firer, and a precheck's 100 items to 100 runs.

    tests/bench/schedules.py target/release/corral [SLOTS [TRAY]]

With TRAY (the `corral-tray` program, run under a display and a D-Bus
session: `xvfb-run -a dbus-run-session -- tests/bench/schedules.py
target/release/corral 30 target/release/corral-tray`) the tray is the
firer of parts 1 and 2, as on a desktop; without, `corral schedule run`.

1. Due → fired and due → agent started, p50/p99 over SLOTS slots (default
   30) of a schedule due every second, fired by the firer.
2. 1,000 schedules due once a day: the CPU time, voluntary wakeups (of
   every thread) and resident memory of the firer over 10 s after 2 s of
   settling (it sleeps until the next due time; nothing polls).
3. A precheck that prints 100 lines, `--each`: the `corral schedule fire`
   that runs it and launches the 100 runs, wall time, median of 3.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

corral = os.path.abspath(sys.argv[1])
slots = int(sys.argv[2]) if len(sys.argv) > 2 else 30
tray = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None


def start_firer(env):
    """The firer: the tray (a process of many threads), or `schedule run`."""
    command = [tray] if tray else [corral, "schedule", "run"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/tmp")


def installation():
    home = Path(tempfile.mkdtemp(prefix="corral-sched-"))
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "noop.md").write_text(
        "---\nname: noop\ndescription: exits at once\nagent: command\ncommand: [\"true\"]\n---\n")
    (home / "config.toml").write_text("max_parallel = 200\nexit_grace = \"100ms\"\nstop_grace = \"100ms\"\n")
    return home, {**os.environ, "CORRAL_HOME": str(home)}


def cli(env, *args):
    out = subprocess.run([corral, *args], env=env, capture_output=True, text=True, cwd="/tmp")
    if out.returncode != 0:
        raise SystemExit(f"corral {args} failed: {out.stderr}")
    return out.stdout


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def proc_stat(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    status = Path(f"/proc/{pid}/status").read_text()
    # Every thread's: the tray's firer is one thread among GTK's.
    wakeups = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        task_status = (task / "status").read_text()
        wakeups += int(next(l for l in task_status.splitlines() if l.startswith("voluntary_ctxt_switches")).split()[1])
    rss = int(next(l for l in status.splitlines() if l.startswith("VmRSS")).split()[1])
    return ticks / os.sysconf("SC_CLK_TCK"), wakeups, rss


# 1. Due → fired → agent started.
home, env = installation()
cli(env, "schedule", "add", "tick", "--preset", "noop", "--every", "1s", "--overlap", "allow", "tick")
firer = start_firer(env)
deadline = time.monotonic() + slots + 30
while time.monotonic() < deadline:
    fires = json.loads(cli(env, "schedule", "show", "tick", "-n", "1000", "--json"))["fires"]
    if len(fires) >= slots:
        break
    time.sleep(0.5)
firer.terminate()
firer.wait()
time.sleep(1)
fires = json.loads(cli(env, "schedule", "show", "tick", "-n", "1000", "--json"))["fires"][:slots]
fired = [(at(f["fired_at"]) - at(f["due_at"])) * 1000 for f in fires]
started = []
for f in fires:
    run = json.loads(cli(env, "show", f["runs"][0]["id"], "--json"))
    if run.get("started_at"):
        started.append((at(run["started_at"]) - at(f["due_at"])) * 1000)
print(f"due -> fired ({len(fired)} slots, ms): p50 {pct(fired, 50):.1f}  p99 {pct(fired, 99):.1f}  max {max(fired):.1f}")
print(f"due -> agent started ({len(started)} slots, ms): p50 {pct(started, 50):.1f}  p99 {pct(started, 99):.1f}  "
      f"max {max(started):.1f}")

# 2. 1,000 schedules, asleep.
home, env = installation()
for i in range(1000):
    cli(env, "schedule", "add", f"s{i}", "--preset", "noop", "--every", "1d", "work")
firer = start_firer(env)
time.sleep(2)
cpu0, wake0, _ = proc_stat(firer.pid)
time.sleep(10)
cpu1, wake1, rss = proc_stat(firer.pid)
firer.terminate()
firer.wait()
print(f"firer: {'the tray' if tray else 'corral schedule run'}")
print(f"1,000 schedules, firer asleep for 10 s: {(cpu1 - cpu0) * 1000:.0f} ms CPU, {wake1 - wake0} wakeups, "
      f"RSS {rss / 1024:.1f} MiB")

# 3. A precheck's 100 items → 100 runs.
walls = []
for trial in range(3):
    home, env = installation()
    cli(env, "schedule", "add", "items", "--preset", "noop", "--every", "1h", "--precheck", "seq 100", "--each",
        "item {item}")
    env_fire = {**env, "CORRAL_SCHEDULE_CLOCK_OFFSET": "3601"}
    start = time.monotonic()
    out = subprocess.run([corral, "schedule", "fire", "items", "--json"], env=env_fire, capture_output=True,
                         text=True, cwd="/tmp")
    walls.append((time.monotonic() - start) * 1000)
    fire = json.loads(out.stdout)
    assert len(fire["runs"]) == 100, fire.get("detail")
    time.sleep(3)
print(f"precheck of 100 items -> 100 runs launched (ms, 3 trials): median {statistics.median(walls):.0f}  "
      f"min {min(walls):.0f}  max {max(walls):.0f}")
