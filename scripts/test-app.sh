#!/usr/bin/env bash
# The desktop app's end-to-end tests: the real app under Xvfb with a D-Bus
# session, a StatusNotifierWatcher and a notification server (the test's
# own), driven over D-Bus and WebDriver. Screenshots: target/app-test/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build -p corral -p corral-tray -p corral-app
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- /usr/bin/python3 tests/app/test_app.py
