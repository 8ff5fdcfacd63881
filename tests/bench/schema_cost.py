#!/usr/bin/env python3
"""What a store's schema costs every process that opens it.

Every Corral process (a launcher, its shepherd, a waiter) opens the store
and, at its first statement, SQLite parses the whole schema: every table,
index and trigger. This prints how long an open and a first query take on
a store Corral made (the schema as it is now), and on copies of it with
parts of the schema dropped, beside a one-table WAL database (the floor of
an open). Opens of each, min of three rounds; the figures are SQLite's own
work, as Python's `sqlite3` drives it.

    python3 tests/bench/schema_cost.py [CORRAL]     # CORRAL: the corral binary (target/release/corral)
"""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

OPENS = 3000


def cost(path):
    """Microseconds of one open and a first query, the best of three rounds."""
    rounds = []
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(OPENS):
            conn = sqlite3.connect(path)
            conn.execute("SELECT 1 FROM runs LIMIT 0").fetchall()
            conn.close()
        rounds.append((time.perf_counter() - started) / OPENS * 1e6)
    return min(rounds)


def without(source, folder, name, drop):
    """A copy of `source` with the schema objects `drop(type, name)` picks dropped."""
    path = os.path.join(folder, f"{name}.db")
    shutil.copy(source, path)
    conn = sqlite3.connect(path)
    for kind, item in conn.execute("SELECT type, name FROM sqlite_master WHERE sql IS NOT NULL").fetchall():
        if drop(kind, item):
            # A full-text index's own tables go with it (dropped first).
            try:
                conn.execute(f'DROP {kind} IF EXISTS "{item}"')
            except sqlite3.Error:
                pass
    conn.commit()
    conn.close()
    return path


def main():
    corral = sys.argv[1] if len(sys.argv) > 1 else "target/release/corral"
    with tempfile.TemporaryDirectory() as folder:
        home = os.path.join(folder, "home")
        env = dict(os.environ, CORRAL_HOME=home)
        # Any command makes the store with every migration.
        subprocess.run([corral, "ls"], env=env, check=True, capture_output=True)
        store = os.path.join(home, "corral.db")
        conn = sqlite3.connect(store)
        counts = dict(conn.execute("SELECT type, count(*) FROM sqlite_master GROUP BY type").fetchall())
        size = conn.execute("SELECT sum(length(sql)) FROM sqlite_master").fetchone()[0]
        conn.close()
        floor = os.path.join(folder, "floor.db")
        conn = sqlite3.connect(floor)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE runs (id TEXT)")
        conn.commit()
        conn.close()
        print(f"schema: {counts} ({size} bytes of SQL); SQLite {sqlite3.sqlite_version}; {OPENS} opens, min of 3")
        rows = [
            ("the store as Corral makes it", store),
            ("without the spend triggers", without(store, folder, "nospend", lambda k, n: k == "trigger" and "spend" in n)),
            ("without full-text search (tables and triggers)",
             without(store, folder, "nofts", lambda k, n: "fts" in n)),
            ("without any trigger", without(store, folder, "notriggers", lambda k, n: k == "trigger")),
            ("a one-table WAL database (the floor)", floor),
        ]
        for what, path in rows:
            print(f"  {cost(path):7.1f} us  {what}")


if __name__ == "__main__":
    main()
