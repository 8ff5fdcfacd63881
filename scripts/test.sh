#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs
# every test: formatting and clippy, the core and CLI (cargo nextest / cargo
# test; real Claude Code, Codex, pi, Gemini CLI and opencode against a stub model server among
# them, and the model-based random test), then the real desktop app
# headless (Xvfb, a D-Bus session, WebDriver), then the Debian package
# (built, its contents checked, installed into a scratch root).
# Usage: ./scripts/test.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh test

# The house is tidy: formatted, and clippy has nothing to say.
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi

./scripts/test-app.sh

./scripts/check-deb.sh
