#!/usr/bin/env python3
"""Worktrees that run: how long a run's worktree takes to be ready with the
checkout's ignored files carried in, and how long `corral conflicts` takes.

    tests/bench/worktrees_that_run.py target/release/corral [ROOT...]

1. Worktree ready: for a repository with a 500 MB ignored `node_modules/`
   (5,000 files of 100 KB), from `corral launch` to the agent running
   (`started_at - created_at`: the worktree made, what `.worktreeinclude`
   names carried in), and the carry alone as the transcript says it, over
   3 runs each: nothing carried (no `.worktreeinclude`), and carried in each
   ROOT given (a folder on the file system to test: ext4 copies, btrfs or
   XFS clone with FICLONE). Default ROOT: the system's temporary folder.
2. `corral conflicts` over 10 runs with unmerged work (two of them change
   the same lines), the whole command, p50/min/max of 5.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

corral = os.path.abspath(sys.argv[1])
roots = sys.argv[2:] or [tempfile.gettempdir()]


def git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), "-c", "user.name=B", "-c", "user.email=b@b", *args], check=True, capture_output=True)


def setup(root, include):
    base = Path(tempfile.mkdtemp(prefix="corral-bench-wt-", dir=root))
    home, project = base / "home", base / "project"
    (project / ".corral" / "presets").mkdir(parents=True)
    home.mkdir()
    (home / "config.toml").write_text("max_parallel = 16\n")
    env = dict(os.environ, CORRAL_HOME=str(home))
    git(project, "init", "-q", "-b", "main")
    (project / ".gitignore").write_text(".corral/\nnode_modules/\n.env\n")
    (project / "app.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    git(project, "add", ".")
    git(project, "commit", "-qm", "init")
    if include:
        (project / ".worktreeinclude").write_text(".env\nnode_modules/\n")
    (project / ".env").write_text("DATABASE_URL=postgres:///bench\n")
    chunk = os.urandom(100 * 1024)
    for d in range(50):
        folder = project / "node_modules" / f"pkg{d}"
        folder.mkdir(parents=True)
        for f in range(100):
            (folder / f"f{f}.js").write_bytes(chunk)
    (project / ".corral" / "presets" / "go.md").write_text(
        "---\nname: go\ndescription: starts\nagent: command\ncommand: [\"true\"]\nworktree: true\n---\n")
    subprocess.run([corral, "presets", "trust", str(project)], env=env, check=True, capture_output=True)
    return base, project, env


def ms(a, b):
    return (datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.fromisoformat(a.replace("Z", "+00:00"))).total_seconds() * 1000


def ready(root, include, n=3):
    base, project, env = setup(root, include)
    readies, carries, how = [], [], "-"
    for _ in range(n):
        subprocess.run(["sync"])
        rid = subprocess.run([corral, "launch", "go", "x"], cwd=project, env=env, check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run([corral, "wait", rid], cwd=project, env=env, capture_output=True)
        run = json.loads(subprocess.run([corral, "show", rid, "--json"], cwd=project, env=env, check=True, capture_output=True, text=True).stdout)
        readies.append(ms(run["created_at"], run["started_at"]))
        said = subprocess.run([corral, "tail", rid, "-n", "all"], cwd=project, env=env, capture_output=True, text=True).stdout
        m = re.search(r"carried in: .*\((\w[\w ,]*?), (\d+) files, ([\d.]+ \w+) in ([\d.]+) s\)", said)
        if m:
            how = f"{m.group(1)}, {m.group(2)} files, {m.group(3)}"
            carries.append(float(m.group(4)) * 1000)
        subprocess.run([corral, "discard", rid], cwd=project, env=env, capture_output=True)
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(base)], capture_output=True, text=True).stdout.strip()
    what = "nothing carried" if not include else f"carried ({how})"
    carry = f"; the carry alone p50 {statistics.median(carries):.0f} ms" if carries else ""
    print(f"worktree ready, {what}, on {fs}: launch -> agent running p50 {statistics.median(readies):.0f} ms "
          f"(min {min(readies):.0f}, max {max(readies):.0f}, n={n}){carry}", flush=True)
    subprocess.run(["rm", "-rf", str(base)])


def conflicts(n=10, rounds=5):
    base = Path(tempfile.mkdtemp(prefix="corral-bench-cf-"))
    home, project = base / "home", base / "project"
    (project / ".corral" / "presets").mkdir(parents=True)
    home.mkdir()
    (home / "config.toml").write_text("max_parallel = 16\n")
    env = dict(os.environ, CORRAL_HOME=str(home))
    git(project, "init", "-q", "-b", "main")
    (project / ".gitignore").write_text(".corral/\n")
    for i in range(n):
        (project / f"file{i}.txt").write_text("".join(f"line {j}\n" for j in range(200)))
    git(project, "add", ".")
    git(project, "commit", "-qm", "init")
    for i in range(n):
        # Runs 0 and 1 change the same line of file0; the others their own file.
        target = "file0.txt" if i < 2 else f"file{i}.txt"
        script = f"sed -i 's/^line 7$/line 7 by run {i}/' {target}; echo new > new{i}.txt"
        (project / ".corral" / "presets" / f"e{i}.md").write_text(
            f"---\nname: e{i}\ndescription: edits\nagent: command\ncommand: {json.dumps(['sh', '-c', script])}\nworktree: true\n---\n")
    subprocess.run([corral, "presets", "trust", str(project)], env=env, check=True, capture_output=True)
    ids = [subprocess.run([corral, "launch", f"e{i}", "x"], cwd=project, env=env, check=True, capture_output=True, text=True).stdout.strip() for i in range(n)]
    subprocess.run([corral, "wait", *ids], cwd=project, env=env, capture_output=True)
    times, said = [], ""
    for _ in range(rounds):
        t0 = time.monotonic()
        out = subprocess.run([corral, "conflicts"], cwd=project, env=env, capture_output=True, text=True)
        times.append((time.monotonic() - t0) * 1000)
        said = out.stdout.strip().splitlines()[-1]
    print(f"corral conflicts over {n} runs with unmerged work ({n * (n - 1) // 2} pairs; said: {said}): "
          f"p50 {statistics.median(times):.0f} ms, min {min(times):.0f}, max {max(times):.0f} (n={rounds})", flush=True)
    subprocess.run(["rm", "-rf", str(base)])


ready(roots[0], include=False)
for root in roots:
    ready(root, include=True)
conflicts()
