#!/usr/bin/env python3
"""Corral from inside a sandbox: a run's agent calls `corral ls --json` and
`corral launch` + `corral wait` on a one-line child, N times each, timed by
the agent itself (p50/max) — unsandboxed (the store opened by the agent's
own `corral`) and sandboxed (handed to the shepherd's broker and carried
out outside).

Prints figures; asserts nothing.
Usage: tests/bench/sandbox_corral.py CORRAL_BINARY [N]
"""
import json, os, statistics, subprocess, sys, tempfile
from pathlib import Path

CORRAL = os.path.abspath(sys.argv[1])
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20

AGENT = r"""
import json, subprocess, sys, time
n = int(sys.argv[1])
def timed(args):
    t = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True)
    return (time.perf_counter() - t) * 1000
ls = [timed(["corral", "ls", "--json"]) for _ in range(n)]
launch = []
for _ in range(n):
    t = time.perf_counter()
    child = subprocess.run(["corral", "launch", "quick", "--", "x"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["corral", "wait", child], capture_output=True, check=True)
    launch.append((time.perf_counter() - t) * 1000)
print("FIGURES " + json.dumps({"ls": ls, "launch": launch}), flush=True)
"""


def measure(sandbox):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, project = root / "home", root / "project"
        presets = project / ".corral" / "presets"
        presets.mkdir(parents=True)
        home.mkdir()
        (home / "config.toml").write_text(f"max_parallel = 64\n{sandbox}")
        (root / "agent.py").write_text(AGENT)
        (presets / "agent.md").write_text(
            f'---\nname: agent\ndescription: calls corral\nagent: command\n'
            f'command: ["python3", "{root / "agent.py"}", "{N}"]\n---\n')
        (presets / "quick.md").write_text(
            '---\nname: quick\ndescription: one line\nagent: command\ncommand: ["echo", "done"]\n---\n')
        env = dict(os.environ, CORRAL_HOME=str(home), PATH=f"{os.path.dirname(CORRAL)}:{os.environ['PATH']}")
        subprocess.run([CORRAL, "presets", "trust"], cwd=project, env=env, capture_output=True, check=True)
        run = subprocess.run([CORRAL, "launch", "agent", "x"], cwd=project, env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        subprocess.run([CORRAL, "wait", run], env=env, capture_output=True)
        text = subprocess.run([CORRAL, "tail", run, "-n", "all"], env=env, capture_output=True, text=True).stdout
        line = next((l for l in text.splitlines() if "FIGURES " in l), None)
        if line is None:
            raise SystemExit(f"no figures from the agent:\n{text}")
        return json.loads(line.split("FIGURES ", 1)[1])


def main():
    print(f"corral from inside a run, {N} calls each ({CORRAL})")
    modes = [("unsandboxed", ""), ("sandboxed", '[sandbox]\nwrite = ["worktree"]\nnetwork = "none"\n')]
    for name, sandbox in modes:
        figures = measure(sandbox)
        ls, launch = figures["ls"], figures["launch"]
        print(f"  {name:12} ls p50 {statistics.median(ls):6.1f} ms (max {max(ls):6.1f})   "
              f"launch+wait p50 {statistics.median(launch):6.1f} ms (max {max(launch):6.1f})")


if __name__ == "__main__":
    main()
