#!/usr/bin/env python3
"""Containment benchmark: abort -> nothing of the run left, with the run's
cgroup against the process-tree sweep (`cgroups = false`), for runs of 1
and 200 processes; the launch -> agent running time with and without the
cgroup; and a run of re-forking generations (each starts the next in a new
session and exits), from its end to nothing left.

Prints figures (p50/p99 over the iterations); asserts nothing.
Usage: tests/bench/containment.py CORRAL_BINARY [ITERATIONS]
"""
import json, os, statistics, subprocess, sys, tempfile, time

CORRAL = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10
HERE = os.path.dirname(os.path.abspath(__file__))
REFORKER = os.path.join(HERE, "..", "fake-agents", "reforker")


def procs_with(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


class Home:
    def __init__(self, config):
        self.dir = tempfile.mkdtemp(prefix="corral-bench-")
        self.project = os.path.join(self.dir, "project")
        os.makedirs(os.path.join(self.project, ".corral", "presets"))
        os.makedirs(os.path.join(self.dir, "home"))
        with open(os.path.join(self.dir, "home", "config.toml"), "w") as f:
            f.write('exit_grace = "100ms"\nstop_grace = "100ms"\n' + config)
        self.env = dict(os.environ, CORRAL_HOME=os.path.join(self.dir, "home"))

    def preset(self, name, argv):
        with open(os.path.join(self.project, ".corral", "presets", name + ".md"), "w") as f:
            f.write(f"---\nname: {name}\ndescription: bench\nagent: command\ncommand: {json.dumps(argv)}\n---\n")
        # A project's command presets run once trusted.
        self.corral("presets", "trust")

    def corral(self, *args):
        out = subprocess.run([CORRAL, *args], cwd=self.project, env=self.env, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise SystemExit(f"corral {args} failed: {out.stderr}")
        return out.stdout

    def show(self, run):
        return json.loads(self.corral("show", run, "--json"))


def wait_until(cond, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.0005)
    return False


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def fmt(xs):
    return f"p50 {statistics.median(xs) * 1000:7.1f} ms  p99 {pct(xs, 99) * 1000:7.1f} ms  (n={len(xs)})"


def abort_to_nothing_left(mode, config, procs):
    home = Home(config)
    times = []
    for i in range(N):
        marker = f"{3600 + i}.{procs}"  # a sleep length unique to this run
        home.preset("many", ["sh", "-c", f"for i in $(seq {procs}); do setsid sleep {marker} & done; wait"])
        run = home.corral("launch", "many", "x").strip()
        assert wait_until(lambda: len(procs_with(f"sleep\0{marker}")) >= procs), "the run never started its processes"
        start = time.monotonic()
        home.corral("abort", run)
        assert wait_until(lambda: not procs_with(f"sleep\0{marker}")), "processes outlived the abort"
        times.append(time.monotonic() - start)
    print(f"abort -> nothing left, {procs:3} processes, {mode:12}: {fmt(times)}")


def launch_to_running(mode, config):
    home = Home(config)
    home.preset("quick", ["true"])
    times = []
    for _ in range(N):
        start = time.monotonic()
        run = home.corral("launch", "quick", "x").strip()
        assert wait_until(lambda: home.show(run)["started_at"] is not None)
        times.append(time.monotonic() - start)
    print(f"launch -> agent started (incl. polling show), {mode:12}: {fmt(times)}")


def reforking(mode, config, generations=10_000, times=3):
    """A run whose tree re-forks in new sessions as fast as it can: once it
    reached `generations`, abort -> nothing of it left."""
    took = [reforking_once(mode, config, generations) for _ in range(times)]
    took = [t for t in took if t is not None]
    if took:
        print(f"re-forking chain of {generations} generations, abort -> nothing left, {mode:12}: {fmt(took)}")


def reforking_once(mode, config, generations):
    home = Home(config)
    home.preset("chain", ["sh", "-c", f"'{REFORKER}' & exec sleep 600"])
    log = os.path.join(home.dir, "generations")
    env = dict(home.env, REFORK_LOG=log, REFORK_PAUSE="")
    run = subprocess.run([CORRAL, "launch", "chain", "x"], cwd=home.project, env=env, capture_output=True, text=True).stdout.strip()
    count = lambda: int((open(log).read().strip() or "0") if os.path.exists(log) else 0)
    assert wait_until(lambda: count() >= generations, 300), f"the chain reached only {count()} generations"
    # A generation lives a few ms: a scan of /proc mostly misses it, so the
    # chain is judged by its count, which stops when the last one is gone.
    start = time.monotonic()
    home.corral("abort", run)
    at_abort = last = count()
    changed = time.monotonic()
    while time.monotonic() - changed < 1.0 and time.monotonic() - start < 60:
        now = count()
        if now != last:
            last, changed = now, time.monotonic()
        time.sleep(0.001)
    if time.monotonic() - start >= 60:
        print(f"re-forking chain, {mode:12}: still forking 60 s after the abort")
        return None
    print(f"  (chain, {mode}: {last - at_abort} generations after the abort)")
    return changed - start


if __name__ == "__main__":
    modes = [("cgroup", ""), ("process tree", "cgroups = false\n")]
    for mode, config in modes:
        launch_to_running(mode, config)
    for procs in (1, 200):
        for mode, config in modes:
            abort_to_nothing_left(mode, config, procs)
    for mode, config in modes:
        reforking(mode, config)
