#!/usr/bin/env bash
# Sets up Corral on a fresh Debian machine and starts it.
# Usage: ./scripts/start.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust 1.85 or newer): https://rustup.rs" >&2
  exit 1
fi
if ! command -v cc >/dev/null; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends build-essential
fi

cargo install --locked --path . --root "${CORRAL_INSTALL_ROOT:-$HOME/.local}"
bin="${CORRAL_INSTALL_ROOT:-$HOME/.local}/bin/corral"
echo
echo "Installed $bin"
case ":$PATH:" in
  *":$(dirname "$bin"):"*) ;;
  *) echo "Add $(dirname "$bin") to your PATH to call 'corral' by name." ;;
esac
echo
"$bin" presets
echo
"$bin" ls
