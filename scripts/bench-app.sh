#!/usr/bin/env bash
# Measures the desktop app headless (about 90 s): prints figures.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
cargo build -p corral -p corral-app
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- /usr/bin/python3 tests/app/bench_app.py
