#!/usr/bin/env python3
"""Sandboxes: 10 runs launched at once, unsandboxed, sandboxed by bubblewrap
(any network) and sandboxed with a host allowlist (bubblewrap, a network of
its own, the shepherd's proxy): `corral launch` -> the agent's first output
(p50/max over the 10), and the memory each run holds while its agent
waits (PSS of its shepherd, of bubblewrap, and of the agent), after one
request through the proxy.

Prints figures; asserts nothing.
Usage: tests/bench/sandbox.py CORRAL_BINARY [RUNS]
"""
import http.server, json, os, statistics, subprocess, sys, tempfile, threading, time
from pathlib import Path

CORRAL = os.path.abspath(sys.argv[1])
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("content-length", "6")
        self.end_headers()
        self.wfile.write(b"hello\n")

    def log_message(self, *args):
        pass


def pss_kb(pid):
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def measure(sandbox, port):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, project, release = root / "home", root / "project", root / "release"
        (project / ".corral" / "presets").mkdir(parents=True)
        home.mkdir()
        (home / "config.toml").write_text(f"max_parallel = 64\n{sandbox}")
        script = (f"date +%s.%N; curl -s http://127.0.0.1:{port}/ >/dev/null; "
                  f"while [ ! -e {release} ]; do sleep 0.2; done")
        (project / ".corral" / "presets" / "wait.md").write_text(
            f'---\nname: wait\ndescription: waits\nagent: command\ncommand: ["sh", "-c", {json.dumps(script)}]\n---\n')
        env = dict(os.environ, CORRAL_HOME=str(home))
        subprocess.run([CORRAL, "presets", "trust"], cwd=project, env=env, capture_output=True, check=True)
        starts, launchers = [], []
        for _ in range(RUNS):
            starts.append(time.time())
            launchers.append(subprocess.Popen([CORRAL, "launch", "wait", "x"], cwd=project, env=env,
                                              stdout=subprocess.PIPE, text=True))
        ids = [p.communicate()[0].strip() for p in launchers]
        delays, shepherd, bwrap, agent = [], [], [], []
        for start, run in zip(starts, ids):
            deadline = time.time() + 30
            while time.time() < deadline:
                text = subprocess.run([CORRAL, "tail", run, "-n", "all"], env=env, capture_output=True, text=True).stdout
                printed = [w for w in text.split() if w.replace(".", "", 1).isdigit() and w.count(".") == 1]
                if printed:
                    delays.append((float(printed[0]) - start) * 1000)
                    break
                time.sleep(0.05)
        time.sleep(1.0)  # the curl done, each run waiting
        for run in ids:
            shown = json.loads(subprocess.run([CORRAL, "show", run, "--json"], env=env, capture_output=True, text=True).stdout)
            cgroup = (shown.get("containment") or {}).get("cgroup")
            pids = [int(p) for p in Path(f"{cgroup}/cgroup.procs").read_text().split()] if cgroup else []
            shepherd.append(pss_kb(shown["shepherd_pid"]))
            bwrap.append(sum(pss_kb(p) for p in pids if comm(p) == "bwrap"))
            agent.append(sum(pss_kb(p) for p in pids if comm(p) != "bwrap"))
        release.write_text("")
        for run in ids:
            subprocess.run([CORRAL, "wait", run], env=env, capture_output=True)
        return delays, shepherd, bwrap, agent


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    print(f"{RUNS} runs launched at once ({CORRAL})")
    modes = [("unsandboxed", ""),
             ("bubblewrap", '[sandbox]\nwrite = ["worktree"]\nnetwork = "all"\n'),
             ("bwrap+proxy", '[sandbox]\nwrite = ["worktree"]\nnetwork = ["127.0.0.1"]\n')]
    for name, sandbox in modes:
        delays, shepherd, bwrap, agent = measure(sandbox, port)
        print(f"  {name:12} launch->agent p50 {statistics.median(delays):6.1f} ms  max {max(delays):6.1f} ms   "
              f"PSS per run: shepherd {statistics.median(shepherd):5.0f} KB  bwrap {statistics.median(bwrap):4.0f} KB  "
              f"agent {statistics.median(agent):5.0f} KB")


if __name__ == "__main__":
    main()
