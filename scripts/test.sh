#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs
# every test: formatting and clippy, the core and CLI (cargo nextest / cargo
# test; real Claude Code, Codex, pi, Gemini CLI and opencode against a stub model server among
# them, and the model-based random test), then the real desktop app
# headless (Xvfb, a D-Bus session, WebDriver), then the Debian package
# (built, its contents checked, installed into a scratch root). Each step
# says what it took at its end.
# Usage: ./scripts/test.sh   (as root, or a user with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."

# `step NAME COMMAND...`: runs it, then says how long it took.
step() {
  local name=$1 started=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - started)) s" >&2
}

step "setup" ./scripts/setup.sh test

# The house is tidy: formatted, and clippy has nothing to say.
step "fmt" cargo fmt --all --check
step "clippy" cargo clippy --workspace --all-targets -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
  step "core and CLI tests" cargo nextest run --workspace --no-fail-fast
else
  step "core and CLI tests" cargo test --workspace --no-fail-fast
fi

step "app tests" ./scripts/test-app.sh

step "package" ./scripts/check-deb.sh
