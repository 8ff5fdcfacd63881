#!/usr/bin/env python3
"""Usage limits: how close to its resume time a run paused at its agent's
usage limit goes on.

    tests/bench/usage_limits.py target/release/corral [RUNS]

A fake Codex (tests/fake-agents/limited) answers its first turn with Codex's
own usage-limit words, "try again at <this minute>", so the limit resets
now and the run's resume time is now plus Corral's 5 s margin. Measured
per run (RUNS, default 5): from `resumes_at` to the transcript's "the usage
limit is over" (the shepherd awake, a slot taken back, the next turn about
to start), and to the run's end (the resumed agent's whole turn).
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
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
fakes = Path(__file__).resolve().parent.parent / "fake-agents"


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    root = Path(tempfile.mkdtemp(prefix="corral-limit-"))
    home, bin_dir = root / "home", root / "bin"
    (home / "presets").mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(fakes / "limited")
    (home / "presets" / "cx.md").write_text("---\nname: cx\ndescription: a limited codex\nagent: codex\n---\n")
    (home / "config.toml").write_text("exit_grace = \"100ms\"\nstop_grace = \"300ms\"\n")
    env = {**os.environ, "CORRAL_HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def cli(*args, extra=None):
        out = subprocess.run([corral, *args], env={**env, **(extra or {})}, capture_output=True, text=True, cwd="/tmp")
        if out.returncode != 0:
            raise SystemExit(f"corral {args} failed: {out.stderr}")
        return out.stdout

    woke, ended = [], []
    for _ in range(runs):
        minute = time.strftime("%-I:%M %p")
        run = cli("launch", "cx", "work", extra={"LIMIT_AT": minute}).strip()
        resumes = None
        deadline = time.monotonic() + 60
        while True:
            shown = json.loads(cli("show", run, "--json"))
            resumes = resumes or shown.get("resumes_at")
            if shown["status"] in ("completed", "failed", "aborted", "lost"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run} never ended: {shown}")
            time.sleep(0.05)
        if shown["status"] != "completed" or not resumes:
            raise SystemExit(f"run {run}: {shown}")
        events = [json.loads(l) for l in cli("tail", "-n", "all", "--json", run).splitlines() if l.strip()]
        over = next(e for e in events if "the usage limit is over" in e.get("text", ""))
        woke.append((at(over["at"]) - at(resumes)) * 1000)
        ended.append((at(shown["completed_at"]) - at(resumes)) * 1000)

    def line(name, values):
        print(f"{name}: p50 {statistics.median(values):.0f} ms, min {min(values):.0f}, max {max(values):.0f} ({len(values)} runs)")

    line("resume time -> shepherd going on (slot taken, next turn starting)", woke)
    line("resume time -> resumed turn completed", ended)


main()
