#!/usr/bin/env bash
# Measures the desktop app headless (about 90 s, after a release build):
# prints figures.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
cargo build --release -p corral -p corral-tray -p corral-app
export CORRAL_PROFILE=release
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- /usr/bin/python3 tests/app/bench_app.py
