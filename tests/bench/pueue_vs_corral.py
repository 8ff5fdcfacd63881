#!/usr/bin/env python3
"""Corral and pueue side by side, on the same work, in one run.

Run by scripts/bench-pueue.sh (which installs pueue from crates.io and
builds Corral in release). Prints a table of both tools' figures and the
ratios. Scenarios, each run for both tools in alternating order:
1. 100 short jobs: first submit -> all recorded done.
2. A job that prints its result (an agent's final event) and then lingers:
   time until the tool reports it done (capped).
3. A job whose tree includes a `setsid` grandchild: stop it, then count its
   processes still alive after 5 s.
4. Memory per running job, supervisor processes included (20 jobs).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORRAL = Path(os.environ.get("CORRAL_BIN", ROOT / "target" / "release" / "corral"))
PUEUE_ROOT = Path(os.environ.get("PUEUE_ROOT", "/tmp/pueue-bench")) / "bin"
FAKES = ROOT / "tests" / "fake-agents"
STREAM = ROOT / "tests" / "streams" / "pi-settled.jsonl"
LINGER_CAP = 10.0
# Lines every config.toml this bench writes ends with (`launch_template = true`).
EXTRA_CONFIG = os.environ.get("CORRAL_BENCH_CONFIG", "")


def rss_pss_kb(pid):
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def pids_matching(pattern):
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def end_template(home):
    """Ends the launch template of the Corral home `home`, if one runs."""
    try:
        os.kill(int((home / "corral.template.lock").read_text().split()[0]), 15)
    except (OSError, ValueError, IndexError):
        pass


def wait_for(cond, timeout, every=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return False


class Corral:
    name = "corral"

    def __init__(self, root):
        self.root = root
        self.project = root / "project"
        (self.project / ".corral" / "presets").mkdir(parents=True)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "pi").symlink_to(FAKES / "replay")
        self.env = dict(os.environ, CORRAL_HOME=str(root / "home"), HOME=str(root), PATH=f"{bin_dir}:{os.environ['PATH']}")
        (root / "home").mkdir()
        (root / "home" / "config.toml").write_text('max_parallel = 200\nstop_grace = "1s"\n' + EXTRA_CONFIG)

    def preset(self, name, agent, argv=None):
        command = f"command: {json.dumps(argv)}\n" if argv else ""
        (self.project / ".corral" / "presets" / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: bench\nagent: {agent}\n{command}---\n")
        # A project's command presets run once trusted.
        self.cli("presets", "trust")

    def cli(self, *args, env=None):
        out = subprocess.run([str(CORRAL), *args], cwd=self.project, env=env or self.env, capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise RuntimeError(out.stderr)
        return out.stdout.strip()

    def submit(self, argv, agent_stream=False, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        if agent_stream:
            return self.cli("launch", "agent", "bench", env=env)
        # A preset is written (and trusted) once, as a user would.
        name = "job-" + str(abs(hash(tuple(argv))))
        if not (self.project / ".corral" / "presets" / f"{name}.md").exists():
            self.preset(name, "command", argv)
        return self.cli("launch", name, "bench", env=env)

    def statuses(self):
        return {r["id"]: r["status"] for r in json.loads(self.cli("ls", "--all", "--json"))}

    def done(self, job):
        return self.statuses().get(job) in ("completed", "failed", "aborted", "lost")

    def stop(self, job):
        self.cli("abort", job)

    def supervisors(self):
        # A shepherd is `corral shepherd ID` or the copy of `corral launch`
        # that forked it: the store says which process each is.
        runs = json.loads(self.cli("ls", "--all", "--json"))
        shepherds = [r["shepherd_pid"] for r in runs if r.get("shepherd_pid") and r["status"] == "running"]
        # The launch template and its idle spare, where one runs, count as
        # pueue's daemon does.
        return shepherds + [pid for pid in self.templates() if pid not in shepherds]

    def templates(self):
        """The template's processes: itself and its idle spare."""
        mark = f"CORRAL_HOME={self.env['CORRAL_HOME']}".encode()
        found = []
        for pid in pids_matching("corral template"):
            try:
                if mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    found.append(pid)
            except OSError:
                pass
        return found

    def close(self):
        for job, status in self.statuses().items():
            if status not in ("completed", "failed", "aborted", "lost"):
                self.cli("abort", job)
        end_template(Path(self.env["CORRAL_HOME"]))


class Pueue:
    name = "pueue"

    def __init__(self, root):
        self.root = root
        self.env = dict(os.environ, HOME=str(root), XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "data"),
                        XDG_RUNTIME_DIR=str(root / "run"))
        (root / "run").mkdir(mode=0o700, parents=True)
        self.daemon = subprocess.Popen([str(PUEUE_ROOT / "pueued")], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(lambda: subprocess.run([str(PUEUE_ROOT / "pueue"), "status"], env=self.env, capture_output=True).returncode == 0, 20):
            raise RuntimeError("pueued did not start")
        self.cli("parallel", "200")

    def cli(self, *args, env=None):
        out = subprocess.run([str(PUEUE_ROOT / "pueue"), *args], env=env or self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr + out.stdout)
        return out.stdout.strip()

    def submit(self, argv, agent_stream=False, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        if agent_stream:
            argv = [str(FAKES / "replay")]
        out = self.cli("add", "--print-task-id", "--", *[shlex_quote(a) for a in argv], env=env)
        return out.strip()

    def statuses(self):
        data = json.loads(self.cli("status", "--json"))
        result = {}
        for tid, task in data["tasks"].items():
            status = task["status"]
            result[tid] = next(iter(status)) if isinstance(status, dict) else status
        return result

    def done(self, job):
        return self.statuses().get(job) == "Done"

    def stop(self, job):
        self.cli("kill", job)

    def supervisors(self):
        return [self.daemon.pid]

    def close(self):
        subprocess.run([str(PUEUE_ROOT / "pueue"), "kill", "--all"], env=self.env, capture_output=True)
        self.daemon.terminate()
        self.daemon.wait(10)


def shlex_quote(arg):
    import shlex
    return shlex.quote(arg)


def short_jobs(tool, n=100):
    start = time.monotonic()
    jobs = [tool.submit(["true"]) for _ in range(n)]
    wait_for(lambda: all(s in ("completed", "Done") for s in [tool.statuses().get(j) for j in jobs]), 120, every=0.05)
    return time.monotonic() - start


def lingering_result(tool):
    env = {"FAKE_STREAM": str(STREAM), "FAKE_THEN": "linger"}
    start = time.monotonic()
    job = tool.submit([], agent_stream=True, extra_env=env)
    reported = wait_for(lambda: tool.done(job), LINGER_CAP, every=0.01)
    took = time.monotonic() - start
    tool.stop(job)
    return took if reported else None


def setsid_survivors(tool):
    marker = f"30{int(time.time() * 1000) % 100000}"
    job = tool.submit(["sh", "-c", f"setsid sleep {marker}1 & sleep {marker}2"])
    wait_for(lambda: len(pids_matching(f"sleep {marker}")) == 2, 20)
    tool.stop(job)
    time.sleep(5)
    survivors = pids_matching(f"sleep {marker}")
    for pid in survivors:
        os.kill(pid, 9)
    return len(survivors)


def memory_per_job(tool, n=20):
    jobs = [tool.submit(["sleep", "600"]) for _ in range(n)]
    wait_for(lambda: len(pids_matching("sleep 600")) >= n, 30)
    time.sleep(1)
    rss = pss = 0
    for pid in tool.supervisors():
        r, p = rss_pss_kb(pid)
        rss += r
        pss += p
    for job in jobs:
        tool.stop(job)
    wait_for(lambda: not pids_matching("sleep 600"), 20)
    return rss / n, pss / n


def main():
    if not CORRAL.exists() or not (PUEUE_ROOT / "pueue").exists():
        print("run scripts/bench-pueue.sh", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="corral-vs-pueue-"))
    corral = Corral(base / "corral")
    corral.preset("agent", "pi")
    pueue = Pueue(base / "pueue")
    results = {}
    try:
        order = [corral, pueue]
        for scenario, fn in [("short", short_jobs), ("linger", lingering_result), ("setsid", setsid_survivors), ("memory", memory_per_job)]:
            for tool in order:
                results[(scenario, tool.name)] = fn(tool)
            order.reverse()  # alternate who goes first
    finally:
        corral.close()
        pueue.close()
        shutil.rmtree(base, ignore_errors=True)

    def fmt(value, unit):
        if value is None:
            return f"> {LINGER_CAP:.0f} s (never, while it lingers)"
        return f"{value:.3f} s" if unit == "s" else f"{value}"

    rows = [
        ("100 short jobs: submit -> all done", "short", "s"),
        ("result printed, process lingers: time to 'done'", "linger", "s"),
        ("stop a job with a setsid grandchild: survivors after 5 s", "setsid", "n"),
    ]
    print(f"{'work':58} {'corral':>30} {'pueue':>30}  ratio (pueue/corral)")
    for label, key, unit in rows:
        c, p = results[(key, "corral")], results[(key, "pueue")]
        if key == "linger":
            ratio = "corral reports it; pueue cannot" if p is None else f"{p / c:.0f}x"
        elif unit == "n":
            ratio = "-" if c == p else f"{p} vs {c}"
        else:
            ratio = f"{p / c:.2f}x"
        print(f"{label:58} {fmt(c, unit):>30} {fmt(p, unit):>30}  {ratio}")
    (crss, cpss), (prss, ppss) = results[("memory", "corral")], results[("memory", "pueue")]
    print(f"{'memory per running job (RSS), supervisors included':58} {crss / 1024:>27.2f} MB {prss / 1024:>27.2f} MB  {prss / crss:.2f}x")
    print(f"{'memory per running job (PSS), supervisors included':58} {cpss / 1024:>27.2f} MB {ppss / 1024:>27.2f} MB  {ppss / cpss:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
