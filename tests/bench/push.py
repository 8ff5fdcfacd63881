#!/usr/bin/env python3
"""Answers from the phone: from the moment an answer reaches the ntfy
server to the run going on, through `corral push listen`.

    tests/bench/push.py target/release/corral [RUNS]

A local server speaking the part of ntfy's protocol Corral uses (publish
as JSON, a phone's `http` action as a plain POST, a followed topic as one
JSON object per line) stands in for ntfy.sh. Each run (RUNS, default 10)
is a fake pi spending $0.25 a message under a $1 budget: it is frozen, the
push arrives with its buttons, and "Allow $1.00 more" is pressed (its
answer POSTed to the reply topic, as the phone does). Measured: from the
server taking the answer to the shepherd's "resumed after …" (every
process thawed), p50/max.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

corral = os.path.abspath(sys.argv[1])
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
fakes = Path(__file__).resolve().parent.parent / "fake-agents"

messages, arrived = [], threading.Condition()


def publish(topic, body):
    with arrived:
        m = {"id": f"m{len(messages) + 1:06}", "time": int(time.time()), "topic": topic, "body": body, "at": time.time()}
        messages.append(m)
        arrived.notify_all()
        return m


class Ntfy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/":
            data = json.loads(body)
            m = publish(data["topic"], data)
        else:
            m = publish(self.path.strip("/"), {"message": body.decode()})
        out = json.dumps({"id": m["id"], "event": "message"}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):
        topic = self.path.split("/")[1]
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("connection", "close")
        self.end_headers()
        sent = 0
        since = self.path.split("since=")[1] if "since=" in self.path else "all"
        with arrived:
            if since.startswith("m"):
                sent = next((i + 1 for i, m in enumerate(messages) if m["id"] == since), 0)
        while True:
            with arrived:
                arrived.wait_for(lambda: len(messages) > sent, timeout=30)
                batch, sent = messages[sent:], len(messages)
            lines = "".join(json.dumps({"id": m["id"], "event": "message", "topic": m["topic"],
                                        "message": m["body"].get("message")}) + "\n"
                            for m in batch if m["topic"] == topic) or json.dumps({"event": "keepalive"}) + "\n"
            try:
                self.wfile.write(lines.encode())
                self.wfile.flush()
            except OSError:
                return

    def log_message(self, *args):
        pass


class QuietServer(ThreadingHTTPServer):
    """Connections the listener leaves when it is killed are not news."""

    def handle_error(self, request, client_address):
        pass


def at(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    server = QuietServer(("127.0.0.1", 0), Ntfy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    root = Path(tempfile.mkdtemp(prefix="corral-push-"))
    home, bin_dir = root / "home", root / "bin"
    (home / "presets").mkdir(parents=True)
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(fakes / "spender")
    (home / "presets" / "spend.md").write_text("---\nname: spend\ndescription: spends\nagent: pi\n---\n")
    (home / "config.toml").write_text(f"exit_grace = \"100ms\"\nstop_grace = \"300ms\"\n[push]\nntfy = \"{url}/phone\"\n")
    env = {**os.environ, "CORRAL_HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}", "SPEND_EVERY": "0.05"}

    def cli(*args):
        out = subprocess.run([corral, *args], env=env, capture_output=True, text=True, cwd="/tmp")
        if out.returncode != 0:
            raise SystemExit(f"corral {args} failed: {out.stderr}")
        return out.stdout

    listener = subprocess.Popen([corral, "push", "listen"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took = []
    try:
        for _ in range(runs):
            before = len([m for m in messages if m["topic"] == "phone"])
            run = cli("launch", "--budget", "$1", "spend", "spend").strip()
            deadline = time.monotonic() + 30
            while len([m for m in messages if m["topic"] == "phone"]) == before:
                if time.monotonic() > deadline:
                    raise SystemExit("no push")
                time.sleep(0.01)
            push = [m for m in messages if m["topic"] == "phone"][-1]["body"]
            allow = next(a for a in push["actions"] if a["label"].startswith("Allow"))
            answered = publish("phone-answers", {"message": allow["body"]})["at"]
            while True:
                events = [json.loads(l) for l in cli("tail", "-n", "all", "--json", run).splitlines() if l.strip()]
                resumed = [e for e in events if e.get("text", "").startswith("resumed after")]
                if resumed:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"run {run} did not go on")
                time.sleep(0.01)
            took.append((at(resumed[0]["at"]) - answered) * 1000)
            cli("abort", run)
    finally:
        listener.kill()
    print(f"answer at the server -> run going on: p50 {statistics.median(took):.1f} ms, "
          f"min {min(took):.1f}, max {max(took):.1f} ({len(took)} runs)")


main()
