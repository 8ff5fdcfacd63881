#!/usr/bin/env python3
"""Told, never polling: what waiting costs and how fast the news arrives.

    tests/bench/told.py target/release/corral [WAITERS]
    TOLD_ONLY=crowd tests/bench/told.py target/release/corral   (part 2 only:
        40 and WAITERS waiters, beside the floor of as many bare `cat`s)

1. Idle: wakeups per second (voluntary context switches, from /proc) and
   CPU of one `corral wait` on a running run that prints nothing, and of
   100 at once, measured over 10 s after 2 s of settling.
2. A run's end → every one of WAITERS `corral wait` processes (default
   1,000) woken and exited: p50/p99 from the agent's exit (the fifo it
   blocks on is written) to each waiter's exit, beside the same with one
   waiter (the shepherd's own path to the commit: its settle for
   launchers, the commit), and the spread from the first exit to the last.
3. A shepherd SIGKILLed → its run shown `lost` to a `corral wait`
   following it: p50/p99 over 20 kills.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

corral = os.path.abspath(sys.argv[1])
waiters = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
home = Path(tempfile.mkdtemp(prefix="corral-told-"))
(home / "presets").mkdir(parents=True)
(home / "presets" / "hold.md").write_text(
    "---\nname: hold\ndescription: blocks on a fifo\nagent: command\ncommand: [sh, -c, 'read x < \"$CORRAL_TASK\"']\n---\n")
(home / "config.toml").write_text("max_parallel = 64\nstop_grace = \"100ms\"\nexit_grace = \"100ms\"\n"
                                  + os.environ.get("CORRAL_BENCH_CONFIG", ""))
env = {**os.environ, "CORRAL_HOME": str(home)}


def cli(*args):
    return subprocess.run([corral, *args], env=env, capture_output=True, text=True)


def launch_held():
    fifo = Path(tempfile.mktemp(prefix="corral-fifo-", dir=home))
    os.mkfifo(fifo)
    run_id = cli("launch", "hold", str(fifo)).stdout.strip()
    while json.loads(cli("show", run_id, "--json").stdout)["status"] != "running":
        time.sleep(0.01)
    return run_id, fifo


def release(fifo):
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, b"go\n")
    os.close(fd)


def counters(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    switches = int(next(l.split()[1] for l in status.splitlines() if l.startswith("voluntary_ctxt_switches")))
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(stat[11]) + int(stat[12])
    return switches, ticks


def idle(count):
    run_id, fifo = launch_held()
    procs = [subprocess.Popen([corral, "wait", run_id], env=env, stdout=subprocess.DEVNULL) for _ in range(count)]
    time.sleep(2)
    before = [counters(p.pid) for p in procs]
    time.sleep(10)
    after = [counters(p.pid) for p in procs]
    wakeups = [(a[0] - b[0]) / 10 for a, b in zip(after, before)]
    cpu = [(a[1] - b[1]) / os.sysconf("SC_CLK_TCK") / 10 * 100 for a, b in zip(after, before)]
    release(fifo)
    for p in procs:
        p.wait()
    print(f"| {count} `corral wait` on a silent run | {statistics.median(wakeups):.1f} wakeups/s each (max {max(wakeups):.1f}) "
          f"| {sum(cpu):.2f}% of a core in all |", flush=True)


def parse_at(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=__import__("datetime").timezone.utc).timestamp()


def exit_latencies(procs, released):
    """Milliseconds from `released` to each of `procs` (by pid) exiting, sorted."""
    exits = []
    while len(exits) < len(procs):
        pid, _ = os.wait()
        if pid in procs:
            exits.append(time.monotonic())
    return sorted((t - released) * 1000 for t in exits)


def end_to_waiters(count):
    run_id, fifo = launch_held()
    procs = {}
    for _ in range(count):
        p = subprocess.Popen([corral, "wait", run_id], env=env, stdout=subprocess.DEVNULL)
        procs[p.pid] = p
    # Every waiter blocked (its connection open, its first heal done).
    time.sleep(max(5, count / 50))
    released, released_wall = time.monotonic(), time.time()
    release(fifo)
    lat = exit_latencies(procs, released)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    shown = json.loads(cli("show", run_id, "--json").stdout)
    committed = (parse_at(shown["completed_at"]) - released_wall) * 1000
    print(f"|   (its end committed {committed:.1f} ms after the agent exited) | |", flush=True)
    print(f"| the agent exits → {count} waiter(s) exited | p50 {statistics.median(lat):.1f} ms, p99 {p99:.1f} ms, "
          f"max {lat[-1]:.1f} ms; first → last exit {lat[-1] - lat[0]:.1f} ms |", flush=True)


def floor(count):
    """As many bare `cat`s woken by one end-of-file: what exiting costs."""
    read_end, write_end = os.pipe()
    procs = {}
    for _ in range(count):
        p = subprocess.Popen(["cat"], stdin=read_end, stdout=subprocess.DEVNULL)
        procs[p.pid] = p
    os.close(read_end)
    time.sleep(max(2, count / 100))
    released = time.monotonic()
    os.close(write_end)
    lat = exit_latencies(procs, released)
    print(f"| floor: one end-of-file → {count} bare `cat`s exited | p50 {statistics.median(lat):.1f} ms, "
          f"max {lat[-1]:.1f} ms |", flush=True)


def kill_to_lost(rounds):
    lat = []
    for _ in range(rounds):
        run_id, fifo = launch_held()
        shepherd = json.loads(cli("show", run_id, "--json").stdout)["shepherd_pid"]
        waiter = subprocess.Popen([corral, "wait", run_id], env=env, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        killed = time.monotonic()
        os.kill(shepherd, signal.SIGKILL)
        waiter.wait()
        lat.append((time.monotonic() - killed) * 1000)
        assert json.loads(cli("show", run_id, "--json").stdout)["status"] == "lost"
    lat.sort()
    print(f"| shepherd SIGKILLed → `corral wait` sees `lost` ({rounds} kills) | p50 {statistics.median(lat):.1f} ms, "
          f"p99 {lat[-1]:.1f} ms |", flush=True)


def end_template():
    try:  # its launch template, if the launches started one
        os.kill(int((home / "corral.template.lock").read_text().split()[0]), 15)
    except (OSError, ValueError, IndexError):
        pass


print("| what | figure |")
print("|---|---|")
if os.environ.get("TOLD_ONLY") == "crowd":
    for count in (40, waiters):
        floor(count)
        end_to_waiters(count)
    end_template()
    subprocess.run(["rm", "-rf", str(home)])
    sys.exit(0)
idle(1)
idle(100)
for _ in range(3):
    end_to_waiters(1)
end_to_waiters(waiters)
kill_to_lost(20)
end_template()
subprocess.run(["rm", "-rf", str(home)])
