#!/usr/bin/env bash
# What a run costs: two release builds side by side, beside pueue and the
# floors (about 25 minutes for 3 rounds). BEFORE is a git revision (default:
# origin's main, else HEAD~1), built in a worktree under /tmp; the working
# tree is AFTER. Installs pueue 4 from crates.io into /tmp/pueue-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
before="${1:-HEAD~1}"
rounds="${ROUNDS:-3}"
root="${PUEUE_ROOT:-/tmp/pueue-bench}"
[ -x "$root/bin/pueue" ] || cargo install pueue --version 4.0.2 --locked --root "$root"
tree=/tmp/corral-bench-before
rm -rf "$tree"
git worktree add --detach "$tree" "$before" >/dev/null
trap 'git worktree remove --force "$tree"' EXIT
(cd "$tree" && CARGO_TARGET_DIR=/tmp/corral-bench-before-target cargo build --release -p corral)
cargo build --release -p corral
# 1,000 waiters each hold a descriptor of the bell and one of the store.
ulimit -n 65536 2>/dev/null || true
PUEUE_ROOT="$root" python3 tests/bench/fork_cost.py /tmp/corral-bench-before-target/release/corral target/release/corral "$rounds"
