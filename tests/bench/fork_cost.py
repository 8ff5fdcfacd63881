#!/usr/bin/env python3
"""What a run costs, two builds side by side, beside pueue and the floors.

    tests/bench/fork_cost.py BEFORE_CORRAL AFTER_CORRAL [ROUNDS]

Run by scripts/bench-fork.sh. Each round measures every figure for both
builds, alternating which goes first; the table gives the median of the
rounds with their min and max:

1. 100 short jobs, submit -> all done: pueue's time over Corral's (the
   same work, one run: `pueue_vs_corral.short_jobs`).
2. PSS per running job, shepherds included, 20 jobs (`memory_per_job`).
3. `corral launch` -> the agent running, p50 of 60 launches 100 ms apart,
   in the run's own cgroup (`launch_latency.measure`).
4. 40 and 1,000 `corral wait` woken by one end, p50, beside as many bare
   `cat`s woken by one end-of-file (`told.py`, TOLD_ONLY=crowd).
5. A sandboxed launch (bubblewrap, any network) over an unsandboxed one:
   the difference of their p50s, 60 launches each (`sandbox`).

CORRAL_BENCH_CONFIG="launch_template = true" measures with the launch
template on (every config.toml the benches write ends with it).
FORK_COST_ONLY=pss,launch measures only those figures (of: short, pss,
launch, waiters, sandbox), and needs no pueue without `short`.
"""

import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    argv, sys.argv = sys.argv, [sys.argv[0]]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


vs = load("pueue_vs_corral")
latency = load("launch_latency")


ONLY = set(filter(None, os.environ.get("FORK_COST_ONLY", "short,pss,launch,waiters,sandbox").split(",")))


def short_and_memory(corral_bin, pueue):
    """(pueue / Corral, Corral's s, pueue's s, PSS MB); None where not asked."""
    vs.CORRAL = Path(corral_bin)
    base = Path(tempfile.mkdtemp(prefix="corral-fork-cost-"))
    corral = vs.Corral(base / "corral")
    ratio = corral_short = pueue_short = pss = None
    try:
        if "short" in ONLY:
            corral_short = vs.short_jobs(corral)
            pueue_short = vs.short_jobs(pueue)
            ratio = pueue_short / corral_short
        if "pss" in ONLY:
            pss = vs.memory_per_job(corral)[1] / 1024
    finally:
        corral.close()
        shutil.rmtree(base, ignore_errors=True)
    return ratio, corral_short, pueue_short, pss


def launch_p50(corral_bin, config=""):
    latency.CORRAL = str(corral_bin)
    latency.N = 60
    # The last run's shepherd may still be leaving (its slot handed on)
    # as the folder goes: what it leaves is not an error of the figure.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        p50, _, _ = latency.measure(Path(tmp), config)
    return p50


SANDBOXED = '[sandbox]\nwrite = ["worktree"]\nnetwork = "all"\n'


def waiters(corral_bin, count):
    out = subprocess.run([sys.executable, str(HERE / "told.py"), str(corral_bin), str(count)],
                         env=dict(os.environ, TOLD_ONLY="crowd"), capture_output=True, text=True, check=True).stdout
    floor = waiting = None
    for line in out.splitlines():
        m = re.search(r"p50 ([0-9.]+) ms", line)
        if m and f"→ {count} bare" in line:
            floor = float(m.group(1))
        elif m and f"→ {count} waiter" in line:
            waiting = float(m.group(1))
    return waiting, floor


def main():
    before, after = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    figures = {}

    def add(key, build, value):
        figures.setdefault((key, build), []).append(value)

    pueue = vs.Pueue(Path(tempfile.mkdtemp(prefix="corral-fork-pueue-"))) if "short" in ONLY else None
    try:
        for round_ in range(rounds):
            builds = [("before", before), ("after", after)]
            if round_ % 2:
                builds.reverse()
            for name, binary in builds:
                said = []
                if ONLY & {"short", "pss"}:
                    ratio, corral_s, pueue_s, pss = short_and_memory(binary, pueue)
                    if ratio is not None:
                        add("ratio", name, ratio)
                        add("corral_s", name, corral_s)
                        add("pueue_s", name, pueue_s)
                        said.append(f"{ratio:.2f}x")
                    if pss is not None:
                        add("pss", name, pss)
                        said.append(f"{pss:.2f} MB")
                if "launch" in ONLY:
                    add("launch", name, launch_p50(binary))
                    said.append(f"launch {figures[('launch', name)][-1]:.2f} ms")
                if "sandbox" in ONLY:
                    add("sandbox", name, launch_p50(binary, SANDBOXED) - launch_p50(binary))
                    said.append(f"sandboxed +{figures[('sandbox', name)][-1]:.2f} ms")
                if "waiters" in ONLY:
                    w40, f40 = waiters(binary, 40)
                    add("w40", name, w40)
                    add("f40", name, f40)
                    said.append(f"40 waiters {w40:.1f} ms (floor {f40:.1f})")
                print(f"round {round_ + 1}, {name}: {', '.join(said)}", flush=True)
            for name, binary in builds if "waiters" in ONLY else []:
                w1000, f1000 = waiters(binary, 1000)
                add("w1000", name, w1000)
                add("f1000", name, f1000)
                print(f"round {round_ + 1}, {name}: 1,000 waiters {w1000:.1f} ms (floor {f1000:.1f})", flush=True)
    finally:
        if pueue:
            pueue.close()

    def cell(key, build, fmt):
        values = figures[(key, build)]
        return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"

    floors = lambda key: f"{min(figures[(key, 'before')] + figures[(key, 'after')]):.1f}–" \
                         f"{max(figures[(key, 'before')] + figures[(key, 'after')]):.1f} ms"
    print()
    print(f"| figure ({rounds} rounds: median (min–max)) | before | after | floor |")
    print("|---|---|---|---|")
    if "short" in ONLY:
        print(f"| 100 short jobs, pueue time / Corral time | {cell('ratio', 'before', '{:.2f}×')} | {cell('ratio', 'after', '{:.2f}×')} | |")
        print(f"|   Corral's time | {cell('corral_s', 'before', '{:.2f} s')} | {cell('corral_s', 'after', '{:.2f} s')} | |")
        print(f"|   pueue's time | {cell('pueue_s', 'before', '{:.2f} s')} | {cell('pueue_s', 'after', '{:.2f} s')} | |")
    if "pss" in ONLY:
        print(f"| PSS per running job, 20 jobs | {cell('pss', 'before', '{:.2f} MB')} | {cell('pss', 'after', '{:.2f} MB')} | |")
    if "launch" in ONLY:
        print(f"| `corral launch` → agent running, p50 of 60 | {cell('launch', 'before', '{:.2f} ms')} | {cell('launch', 'after', '{:.2f} ms')} | |")
    if "sandbox" in ONLY:
        print(f"| sandboxed launch, over unsandboxed (p50s) | {cell('sandbox', 'before', '{:.1f} ms')} | {cell('sandbox', 'after', '{:.1f} ms')} | |")
    if "waiters" in ONLY:
        print(f"| 40 `corral wait` woken by one end, p50 | {cell('w40', 'before', '{:.1f} ms')} | {cell('w40', 'after', '{:.1f} ms')} | {floors('f40')} (40 `cat`s) |")
        print(f"| 1,000 `corral wait`, p50 | {cell('w1000', 'before', '{:.0f} ms')} | {cell('w1000', 'after', '{:.0f} ms')} | {floors('f1000')} (1,000 `cat`s) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
