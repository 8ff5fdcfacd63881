#!/usr/bin/env python3
"""Budgets: how soon a run that crosses its budget is frozen, how far past
the budget it got, and how soon an answer sets it going again.

    tests/bench/budgets.py target/release/corral [RUNS]

A fake pi prints one assistant message every 50 ms, each reporting 1,100
tokens and $0.25, and notes the moment it wrote each one. Each run gets a
budget of 5,000 tokens: the 5th message crosses it.

1. Crossed → frozen: from the moment the agent wrote the crossing message
   to the run's `paused_at` (recorded once every process is frozen),
   p50/max over RUNS runs (default 10); the store's times have 1 ms
   resolution.
2. Past the budget: tokens spent beyond the budget when frozen, and
   messages the agent got out after the crossing one (0 is the aim).
3. Answer → going again: the wall time of `corral resume RUN --budget +N`,
   which returns once the run is `running` (a whole command: program
   start, store, the shepherd's thaw), p50/max.
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
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10

AGENT = r'''#!/usr/bin/env python3
import json, os, sys, time
sys.stdin.read()
marks = open(os.environ["MARKS"], "a")
print(json.dumps({"type": "session", "version": 3, "id": "bench", "timestamp": "2026-11-25T10:00:00.000Z", "cwd": "/tmp"}), flush=True)
for i in range(1, 41):
    usage = {"input": 1000, "output": 100, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1100, "cost": {"total": 0.25}}
    line = {"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": f"message {i}"}],
            "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse"}}
    print(json.dumps(line), flush=True)
    marks.write(f"{i} {time.time()}\n")
    marks.flush()
    time.sleep(0.05)
print(json.dumps({"type": "agent_end", "messages": []}), flush=True)
'''


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    root = Path(tempfile.mkdtemp(prefix="corral-budget-"))
    home, bin_dir = root / "home", root / "bin"
    (home / "presets").mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "pi").write_text(AGENT)
    (bin_dir / "pi").chmod(0o755)
    (home / "presets" / "spend.md").write_text("---\nname: spend\ndescription: spends\nagent: pi\n---\n")
    (home / "config.toml").write_text("exit_grace = \"100ms\"\nstop_grace = \"300ms\"\n")
    env = {**os.environ, "CORRAL_HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def cli(*args, extra=None):
        out = subprocess.run([corral, *args], env={**env, **(extra or {})}, capture_output=True, text=True, cwd="/tmp")
        if out.returncode != 0:
            raise SystemExit(f"corral {args} failed: {out.stderr}")
        return out.stdout

    def show(run):
        return json.loads(cli("show", run, "--json"))

    frozen, past, after, answered = [], [], [], []
    for n in range(runs):
        marks = root / f"marks-{n}"
        run = cli("launch", "--budget", "5000 tokens", "spend", "spend", extra={"MARKS": str(marks)}).strip()
        deadline = time.monotonic() + 30
        while (shown := show(run))["status"] != "paused":
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run} never paused: {shown}")
            time.sleep(0.02)
        written = {int(i): float(t) for i, t in (l.split() for l in marks.read_text().splitlines())}
        frozen.append((at(shown["paused_at"]) - written[5]) * 1000)
        past.append(shown["usage"]["input_tokens"] + shown["usage"]["output_tokens"] - 5000)
        time.sleep(0.3)  # frozen: nothing more may be written (counted just below)
        after.append(max(int(l.split()[0]) for l in marks.read_text().splitlines()) - 5)
        started = time.monotonic()
        cli("resume", run, "--budget", "+100k tokens")
        answered.append((time.monotonic() - started) * 1000)
        if show(run)["status"] != "running":
            raise SystemExit(f"run {run} is not running after the answer: {show(run)}")
        cli("abort", run)

    def line(name, values, unit):
        print(f"{name}: p50 {statistics.median(values):.1f} {unit}, min {min(values):.1f}, max {max(values):.1f} ({len(values)} runs)")

    line("budget crossed -> run frozen (paused_at)", frozen, "ms")
    print(f"tokens past the budget when frozen: {sorted(set(past))} (the crossing message's own 1,100-token step)")
    print(f"messages written after the crossing one: {sorted(set(after))}")
    line("answer (corral resume --budget) -> running again", answered, "ms")


main()
