#!/usr/bin/env bash
# The desktop app's end-to-end tests: the real app under Xvfb with a D-Bus
# session, a StatusNotifierWatcher and a notification server (the test's
# own), driven over D-Bus and WebDriver. Screenshots: target/app-test/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# With their tests: the dependencies then get the features the tests'
# dev-dependencies add (rmcp's client, tokio's process), as the test run
# before built them, so nothing is compiled twice (41 s of tokio, zbus,
# tauri and the three programs again, before). The package's debug check
# builds the same way (package-deb.sh --debug).
cargo build -p corral -p corral-tray -p corral-app --bins --tests
exec xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- /usr/bin/python3 tests/app/test_app.py
