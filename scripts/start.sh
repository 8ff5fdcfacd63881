#!/usr/bin/env bash
# Sets up Corral on a fresh Debian machine and starts the tray app.
# Installs `corral` (CLI, MCP server; `corral-push` beside it), `corral-tray` (the tray) and
# `corral-app` (the window) into ~/.local/bin (or $CORRAL_INSTALL_ROOT/bin),
# then starts the tray in the background.
# Usage: ./scripts/start.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh app

root="${CORRAL_INSTALL_ROOT:-$HOME/.local}"
cargo install --locked --path . --root "$root"
cargo install --locked --path tray --root "$root"
cargo install --locked --path src-tauri --root "$root"
echo "Installed $root/bin/corral (and corral-push), $root/bin/corral-tray and $root/bin/corral-app"
case ":$PATH:" in
  *":$root/bin:"*) ;;
  *) echo "Add $root/bin to your PATH to call 'corral' by name." ;;
esac

if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  echo "No display: start the tray from your desktop session with: $root/bin/corral-tray"
  exit 0
fi
nohup "$root/bin/corral-tray" >/dev/null 2>&1 &
echo "Corral is running in your tray (pid $!). Try: corral launch tests \"first run\""
