#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs
# every test. Usage: ./scripts/test.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust 1.85 or newer): https://rustup.rs" >&2
  exit 1
fi

# System packages the core's tests use: a C compiler for bundled SQLite,
# and util-linux's setsid for the launcher-death test.
need=()
command -v cc >/dev/null || need+=(build-essential)
command -v setsid >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${need[@]}"
fi

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi
