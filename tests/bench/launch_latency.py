#!/usr/bin/env python3
"""`corral launch` -> the agent running: how long, p50/p90/p99.

Usage: tests/bench/launch_latency.py [CORRAL] [N]

The agent is `/bin/date +%s.%N`: the first thing it does is print the
time, which the transcript keeps. The clock starts just before `corral
launch` is started (so the launcher's own start counts) and stops at the
time `date` printed. Launches are 100 ms apart, as a person's are (a
burst of launches shares the kernel's cgroup bookkeeping and is faster).
Printed for both ways a run is held: its own cgroup, and the process tree
(`cgroups = false`); and sandboxed by bubblewrap (`[sandbox]`): any
network, a network of its own, and a host allowlist (the shepherd's proxy).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORRAL = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "release" / "corral")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100


def measure(root, config):
    home = root / "home"
    project = root / "project"
    (project / ".corral" / "presets").mkdir(parents=True)
    home.mkdir()
    (home / "config.toml").write_text(config + os.environ.get("CORRAL_BENCH_CONFIG", ""))
    (project / ".corral" / "presets" / "now.md").write_text(
        '---\nname: now\ndescription: prints the time\nagent: command\ncommand: ["/bin/date", "+%s.%N"]\n---\n')
    env = dict(os.environ, CORRAL_HOME=str(home))
    # A project's command presets run once trusted.
    subprocess.run([CORRAL, "presets", "trust"], cwd=project, env=env, capture_output=True, check=True)
    delays = []
    for _ in range(N):
        time.sleep(0.1)
        before = time.time()
        out = subprocess.run([CORRAL, "launch", "now", "x", "--json"], cwd=project, env=env,
                             capture_output=True, text=True, check=True)
        run = json.loads(out.stdout)["id"]
        subprocess.run([CORRAL, "wait", run], env=env, capture_output=True, check=True)
        text = subprocess.run([CORRAL, "tail", run, "-n", "all"], env=env, capture_output=True, text=True).stdout
        printed = float(next(w for w in text.split() if w.count(".") == 1 and w.replace(".", "", 1).isdigit()))
        delays.append((printed - before) * 1000)
    try:  # its launch template, if the launches started one
        os.kill(int((home / "corral.template.lock").read_text().split()[0]), 15)
    except (OSError, ValueError, IndexError):
        pass
    delays.sort()
    pick = lambda q: delays[min(len(delays) - 1, int(len(delays) * q))]
    return statistics.median(delays), pick(0.9), pick(0.99)


def main():
    print(f"corral launch -> agent running, {N} launches 100 ms apart ({CORRAL})")
    sandbox = '[sandbox]\nwrite = ["worktree"]\n'
    for name, config in [("own cgroup", ""), ("process tree", "cgroups = false\n"),
                         ("sandboxed", sandbox + 'network = "all"\n'),
                         ("sandbox+netns", sandbox + 'network = "none"\n'),
                         ("sandbox+proxy", sandbox + 'network = ["127.0.0.1"]\n')]:
        with tempfile.TemporaryDirectory() as tmp:
            p50, p90, p99 = measure(Path(tmp), config)
        print(f"  {name:14} p50 {p50:6.2f} ms   p90 {p90:6.2f} ms   p99 {p99:6.2f} ms")


if __name__ == "__main__":
    main()
