#!/usr/bin/env python3
"""Store size per 1,000 runs, with the raw streams kept whole beside the
transcript (as before this round: `[transcripts] raw_logs` unbounded) and
as now (the transcript once, raw logs cut at 1 MiB), then the time `corral
prune` takes to remove them all and what it gives back.

    tests/bench/store_size.py target/release/corral [RUNS] [LINES] [now]

Each run is a `command` printing LINES lines of a build log (default 400)
to stdout and 20 to stderr. Prints one table row per mode (`now`: only
the current one, e.g. to time a prune of 10,000 runs)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

corral = os.path.abspath(sys.argv[1])
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
lines = int(sys.argv[3]) if len(sys.argv) > 3 else 400


def size_of(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def measure(mode, raw_logs):
    home = Path(tempfile.mkdtemp(prefix="corral-size-"))
    (home / "presets").mkdir(parents=True)
    script = (f"i=0; while [ $i -lt {lines} ]; do echo \"   Compiling crate-$i v0.1.$i (/src/crate-$i) finished in 0.$i s\"; "
              f"i=$((i+1)); done; i=0; while [ $i -lt 20 ]; do echo \"warning: unused variable $i\" >&2; i=$((i+1)); done")
    (home / "presets" / "build.md").write_text(
        "---\nname: build\ndescription: a build log\nagent: command\n"
        f"command: [sh, -c, {json.dumps(script)}]\n---\n")
    (home / "config.toml").write_text(f"max_parallel = 4\n[transcripts]\nraw_logs = \"{raw_logs}\"\n")
    env = {**os.environ, "CORRAL_HOME": str(home)}
    ids = []
    for i in range(runs):
        out = subprocess.run([corral, "launch", "build", f"build {i}"], env=env, capture_output=True, text=True, check=True)
        ids.append(out.stdout.strip())
    subprocess.run([corral, "wait", *ids[-50:]], env=env, capture_output=True, check=False)
    while True:
        active = json.loads(subprocess.run([corral, "ls", "--all", "--json", "--status", "queued", "--status", "starting",
                                            "--status", "running"], env=env, capture_output=True, text=True).stdout)
        if not active:
            break
        subprocess.run([corral, "wait", *[r["id"] for r in active]], env=env, capture_output=True)
    db = size_of(home) - size_of(home / "runs")
    folders = size_of(home / "runs")
    started = time.monotonic()
    pruned = json.loads(subprocess.run([corral, "prune", "--older-than", "0s", "--json"], env=env, capture_output=True,
                                       text=True, check=True).stdout)
    took = time.monotonic() - started
    after = size_of(home)
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    print(f"| {mode} | {runs} | {mib(db)} | {mib(folders)} | {mib(db + folders)} | {took:.1f} s ({pruned['runs']} runs) | {mib(after)} |", flush=True)
    subprocess.run(["rm", "-rf", str(home)])


print("| transcripts | runs | database | run folders | total | prune all | left after prune |")
print("|---|---|---|---|---|---|---|")
if sys.argv[4:5] != ["now"]:
    measure("raw streams kept whole (before)", "1T")
measure("kept once (now)", "none")
