#!/usr/bin/env python3
"""Runs on a host over SSH, followed here: how fast and how light.

Usage: tests/bench/remote.py [CORRAL] [N]   (needs /usr/sbin/sshd; root
for sshd's privilege separation folder)

Debian's sshd on a loopback port with keys made here, a separate
CORRAL_HOME as the remote side, `corral hosts follow` as the local
follower (what the tray runs). Prints:
1. a remote run ends -> shown ended here (the mirror in this store says
   so): p50/p99 over N runs, from the remote commit's `completed_at`;
2. an outage: sshd stopped, 10 runs end there, sshd started -> every one
   shown ended here (time from sshd's start);
3. 50 remote runs at once, each printing 200 lines: CPU and memory of the
   local side (the follower and its ssh), per host connection.
"""

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORRAL = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target" / "release" / "corral")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50


def wait_for(cond, timeout, every=0.001):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return False


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_and_memory(pid):
    """CPU seconds (user + system) and PSS in KiB of one process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            pss = int(line.split()[1])
    return cpu, pss


class Bench:
    def __init__(self, root):
        self.root = root
        for key in ["host_key", "user_key"]:
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / key)], check=True)
        (root / "authorized_keys").write_text((root / "user_key.pub").read_text())
        self.port = free_port()
        (root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} " + (root / "host_key.pub").read_text())
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\nPidFile {root}/sshd.pid\n"
            f"AuthorizedKeysFile {root}/authorized_keys\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nLogLevel ERROR\n"
            "MaxSessions 100\n")
        os.makedirs("/run/sshd", exist_ok=True)
        self.remote = root / "remote-home"
        (self.remote / "presets").mkdir(parents=True)
        self.local = root / "local-home"
        self.local.mkdir()
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        (self.local / "config.toml").write_text(
            f'[hosts.box]\nssh = "{user}@127.0.0.1"\nport = {self.port}\nidentity_file = "{root}/user_key"\n'
            f'ssh_options = ["-o", "UserKnownHostsFile={root}/known_hosts"]\n'
            f'corral = "{CORRAL}"\nhome = "{self.remote}"\n')
        self.preset("quick", ["sh", "-c", "sleep 0.2; echo done"])
        self.preset("chatty", ["sh", "-c", "for i in $(seq 1 200); do echo line $i of some output; sleep 0.01; done"])
        self.sshd = None
        self.start_sshd()
        # The local store made first, so this script reads a whole one.
        subprocess.run([CORRAL, "about"], env=dict(os.environ, CORRAL_HOME=str(self.local)), check=True,
                       capture_output=True)
        self.follower = subprocess.Popen([CORRAL, "hosts", "follow"], env=dict(os.environ, CORRAL_HOME=str(self.local)),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.db = sqlite3.connect(str(self.local / "corral.db"), timeout=10)

    def preset(self, name, argv):
        (self.remote / "presets" / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: bench\nagent: command\ncommand: {json.dumps(argv)}\n---\n")

    def start_sshd(self):
        self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(self.root / "sshd_config")],
                                     stderr=subprocess.DEVNULL)
        import socket
        assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", self.port)) == 0, 20, 0.01)

    def stop_sshd(self):
        subprocess.run(["pkill", "-KILL", "-P", str(self.sshd.pid)])
        self.sshd.kill()
        self.sshd.wait()

    def remote_launch(self, preset, task):
        out = subprocess.run([CORRAL, "launch", preset, task, "--json"], env=dict(os.environ, CORRAL_HOME=str(self.remote)),
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["id"]

    def remote_run(self, run_id):
        out = subprocess.run([CORRAL, "show", run_id, "--json"], env=dict(os.environ, CORRAL_HOME=str(self.remote)),
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def mirrored_status(self, run_id):
        row = self.db.execute("SELECT status FROM remote_runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def close(self):
        self.follower.terminate()
        self.follower.wait()
        self.stop_sshd()


def seconds(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        b = Bench(Path(tmp))
        try:
            # Followed from the start: wait for the follower to be caught up.
            reachable = lambda: b.db.execute("SELECT reachable FROM hosts WHERE name='box'").fetchone()
            assert wait_for(lambda: reachable() == (1,), 30, 0.01)
            delays = []
            for i in range(N):
                run = b.remote_launch("quick", f"run {i}")
                assert wait_for(lambda: b.mirrored_status(run) == "completed", 30)
                seen = time.time()
                delays.append((seen - seconds(b.remote_run(run)["completed_at"])) * 1000)
            delays.sort()
            p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))]
            print(f"remote run ends -> shown ended here, {N} runs: p50 {statistics.median(delays):.1f} ms, "
                  f"p99 {p99:.1f} ms, max {delays[-1]:.1f} ms")

            b.stop_sshd()
            assert wait_for(lambda: reachable() == (0,), 60, 0.01)
            ended = [b.remote_launch("quick", f"during the outage {i}") for i in range(10)]
            for run in ended:
                subprocess.run([CORRAL, "wait", run], env=dict(os.environ, CORRAL_HOME=str(b.remote)), capture_output=True)
            outage = time.time()
            b.start_sshd()
            started = time.monotonic()
            assert wait_for(lambda: all(b.mirrored_status(r) == "completed" for r in ended), 60, 0.005)
            print(f"outage: sshd down {time.time() - outage:.1f} s after the runs ended; started again -> "
                  f"10 runs that ended meanwhile shown ended here in {time.monotonic() - started:.2f} s "
                  f"(the follower retries after 1, 2, 4, then every 10 s)")

            ssh = subprocess.run(["pgrep", "-P", str(b.follower.pid)], capture_output=True, text=True).stdout.split()
            procs = [b.follower.pid] + [int(p) for p in ssh]
            before = [cpu_and_memory(p) for p in procs]
            t0 = time.monotonic()
            runs = [b.remote_launch("chatty", f"chatty {i}") for i in range(50)]
            assert wait_for(lambda: all(b.mirrored_status(r) == "completed" for r in runs), 120, 0.05)
            took = time.monotonic() - t0
            after = [cpu_and_memory(p) for p in procs]
            cpu = sum(a[0] - b_[0] for a, b_ in zip(after, before))
            pss = sum(a[1] for a in after)
            print(f"50 remote runs at once, 200 lines each, {took:.1f} s until all shown ended here: local side "
                  f"(follower + {len(procs) - 1} ssh) used {cpu:.2f} s of CPU ({100 * cpu / took:.1f}% of a core), "
                  f"PSS {pss / 1024:.1f} MB, for 1 host connection")
        finally:
            b.close()


if __name__ == "__main__":
    main()
