#!/usr/bin/env python3
"""One MCP `wait_agents` call blocked on 100 runs: how soon it returns
once they end together.

    tests/bench/mcp_wait.py target/release/corral [RUNS] [ROUNDS]

RUNS runs (default 100) of a command that blocks reading one fifo; a
`corral mcp` server (its stdio spoken here as an MCP client does:
initialize, then `tools/call wait_agents` with every run id) waits on all
of them. The fifo is opened for writing and closed: every run's agent sees
its end at once and exits. Measured per round (ROUNDS, default 3): from
that close to the `wait_agents` answer arriving, beside the last run's
`completed_at` (the shepherds' own part).
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
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    home = Path(tempfile.mkdtemp(prefix="corral-mcpwait-"))
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "hold.md").write_text(
        "---\nname: hold\ndescription: blocks on a fifo\nagent: command\n"
        "command: [sh, -c, 'read x < \"$CORRAL_TASK\"']\n---\n")
    (home / "config.toml").write_text(f"max_parallel = {runs + 8}\nstop_grace = \"100ms\"\nexit_grace = \"100ms\"\n")
    env = {**os.environ, "CORRAL_HOME": str(home)}
    took, shepherds = [], []
    for n in range(rounds):
        fifo = home / f"gate-{n}"
        os.mkfifo(fifo)
        ids = [subprocess.run([corral, "launch", "hold", str(fifo)], env=env, capture_output=True, text=True,
                              check=True).stdout.strip() for _ in range(runs)]
        deadline = time.monotonic() + 60
        while True:
            listed = json.loads(subprocess.run([corral, "ls", "--all", "--json"], env=env, capture_output=True,
                                               text=True, check=True).stdout)
            if sum(1 for r in listed if r["id"] in ids and r["status"] == "running") == runs:
                break
            if time.monotonic() > deadline:
                raise SystemExit("the runs did not all start")
            time.sleep(0.1)
        server = subprocess.Popen([corral, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def send(message):
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
             "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        server.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "wait_agents", "arguments": {"run_ids": ids, "timeout_s": 60}}})
        time.sleep(1.0)  # the call is blocked by now (nothing has ended)
        fd = os.open(fifo, os.O_WRONLY)
        os.close(fd)
        ended = time.time()
        answer = server.stdout.readline()
        answered = time.time()
        server.stdin.close()
        server.wait()
        assert '"id":2' in answer.replace(" ", ""), answer[:200]
        took.append((answered - ended) * 1000)
        listed = json.loads(subprocess.run([corral, "ls", "--all", "--json"], env=env, capture_output=True, text=True,
                                           check=True).stdout)
        last = max(at(r["completed_at"]) for r in listed if r["id"] in ids)
        shepherds.append((last - ended) * 1000)
    print(f"{runs} runs end together -> wait_agents answers: median {statistics.median(took):.0f} ms "
          f"(rounds: {', '.join(f'{t:.0f}' for t in took)}); the last run's completed_at: median "
          f"{statistics.median(shepherds):.0f} ms")


main()
