#!/usr/bin/env bash
# Corral and pueue side by side on the same work (about 2 minutes after the
# builds). Installs pueue 4 from crates.io into /tmp/pueue-bench (not part
# of the project), builds Corral in release, prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${PUEUE_ROOT:-/tmp/pueue-bench}"
[ -x "$root/bin/pueue" ] || cargo install pueue --version 4.0.2 --locked --root "$root"
cargo build --release -p corral
PUEUE_ROOT="$root" python3 tests/bench/pueue_vs_corral.py
