#!/usr/bin/env python3
"""`corral top` left open on a store where nothing is at work: how often it
wakes (voluntary and involuntary context switches of its process), in
rounds of SECS seconds, each on a fresh store; the median is what to quote.

    tests/bench/top_idle.py BINARY [SECS] [ROUNDS]
"""
import os
import pty
import select
import statistics
import sys
import tempfile
import time


def one_round(binary, secs):
    home = tempfile.mkdtemp(prefix="corral-top-idle-")
    env = dict(os.environ, CORRAL_HOME=home, TERM="xterm-256color")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(binary, [binary, "top"], env)

    def drain(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    os.read(fd, 65536)
                except OSError:
                    return

    def switches():
        with open(f"/proc/{pid}/status") as status:
            return sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)

    drain(3)  # drawn once, asleep
    before = switches()
    drain(secs)
    after = switches()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return after - before


def main():
    binary = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 30
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    woke = [one_round(binary, secs) for _ in range(rounds)]
    print(f"{binary}: context switches in {secs:.0f} s with nothing at work, {rounds} rounds: "
          f"{woke} (median {statistics.median(woke)})")


if __name__ == "__main__":
    main()
