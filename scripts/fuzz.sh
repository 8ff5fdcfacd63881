#!/usr/bin/env bash
# Fuzzes every adapter's stream parser, preset parsing and the line
# splitter, each for SECONDS (default 60), seeded with the real agent
# captures. Uses cargo-fuzz (installed from crates.io if missing); on a
# stable toolchain RUSTC_BOOTSTRAP lets it use the flags it needs.
# Usage: ./scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
mkdir -p fuzz/corpus/adapters fuzz/corpus/presets fuzz/corpus/lines
cp tests/captures/*.jsonl tests/streams/*.jsonl fuzz/corpus/adapters/
cp tests/captures/*.jsonl fuzz/corpus/lines/
cp presets/*.md fuzz/corpus/presets/
for target in adapters presets lines; do
  echo "== fuzzing $target for ${seconds}s"
  # -rss_limit_mb bounds memory: a parser that grows without bound fails.
  cargo fuzz run --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=512 -max_len=1048576
done
echo "fuzzing: 3 targets ran ${seconds}s each without a crash"
