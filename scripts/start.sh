#!/usr/bin/env bash
# Sets up Corral on a fresh Debian machine and starts the tray app.
# Installs `corral` (CLI, MCP server; `corral-push` and `corral-wake` beside it), `corral-tray` (the tray) and
# `corral-app` (the window) into ~/.local/bin (or $CORRAL_INSTALL_ROOT/bin),
# then starts the tray in the background.
# Usage: ./scripts/start.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh app

root="${CORRAL_INSTALL_ROOT:-$HOME/.local}"
# One release build in the workspace's own target folder (never one per
# program, each compiling the whole dependency graph again): after a
# `git pull`, only what changed is built again. The CLI is built on its
# own first, so it links only what it needs; the tray and the window then
# share everything the CLI built.
echo "Building Corral in release mode: the CLI, then the tray and the window."
echo "About 8 minutes the first time on 2 cores; seconds when nothing changed."
cargo build --release --locked -p corral --bins
cargo build --release --locked -p corral-tray -p corral-app
install -d "$root/bin"
for bin in corral corral-push corral-wake corral-tray corral-app; do
  install -m 0755 "target/release/$bin" "$root/bin/$bin"
done
echo "Installed $root/bin/corral (and corral-push, corral-wake), $root/bin/corral-tray and $root/bin/corral-app"
case ":$PATH:" in
  *":$root/bin:"*) ;;
  *) echo "Add $root/bin to your PATH to call 'corral' by name." ;;
esac

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  echo "No display: start the tray from your desktop session with: $root/bin/corral-tray"
  echo "(its menu's \"Open Corral\" opens the window; or run $root/bin/corral-app)"
  exit 0
fi
nohup "$root/bin/corral-tray" >/dev/null 2>&1 &
echo "Corral is running in your tray (pid $!): its menu's \"Open Corral\" opens the window."
echo "Try: corral launch tests \"first run\""
