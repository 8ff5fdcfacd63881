#!/usr/bin/env bash
# Installs what Corral needs on Debian: the libraries the app builds
# against, and for `test`, what the headless app tests use (Xvfb, D-Bus,
# WebKit's WebDriver, tauri-driver). Installs only what is missing.
# Usage: ./scripts/setup.sh [app|test]
set -euo pipefail
mode="${1:-app}"
if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust 1.85 or newer): https://rustup.rs" >&2
  exit 1
fi
packages=(build-essential pkg-config libssl-dev libgtk-3-dev libwebkit2gtk-4.1-dev
  libayatana-appindicator3-dev librsvg2-dev libxdo-dev util-linux procps openssh-client bubblewrap)
if [ "$mode" = test ]; then
  packages+=(xvfb xauth dbus-x11 webkit2gtk-driver imagemagick x11-utils python3 python3-dbus python3-gi python3-xlib gir1.2-gtk-3.0 libglib2.0-bin openssh-server acl passwd fish tcsh zsh netcat-openbsd systemd curl)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [ "$mode" = test ] && ! command -v tauri-driver >/dev/null; then
  # The newest tauri-driver is a 3.0 alpha; 2.1.0 drives Tauri 2 apps.
  cargo install tauri-driver --version 2.1.0 --locked
fi
if [ "$mode" = test ]; then
  # The real agent CLIs the tests run against a local stub model server.
  # Pinned with every package under them (tests/real-agents/package-lock.json):
  # a new release, theirs or a dependency's, is tried here before the tests
  # rely on it, and a registry that lags a release cannot break a fresh
  # machine's setup. A registry hiccup is tried again.
  agents=target/real-agents
  wanted="$(sha256sum tests/real-agents/package-lock.json | cut -d' ' -f1)"
  if [ "$(cat "$agents/installed" 2>/dev/null)" != "$wanted" ]; then
    mkdir -p "$agents"
    cp tests/real-agents/package.json tests/real-agents/package-lock.json "$agents/"
    for try in 1 2 3; do
      # `install` with the lockfile in place keeps every locked version
      # (`ci` would also ask for other platforms' optional packages).
      if npm install --prefix "$agents" --no-audit --no-fund --loglevel=error; then break; fi
      [ "$try" = 3 ] && exit 1
      sleep 10
    done
    echo "$wanted" > "$agents/installed"
  fi
fi
