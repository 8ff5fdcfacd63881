#!/usr/bin/env bash
# Runs the model-based random test (tests/model.rs) on new seeds for
# MINUTES minutes (default 10), and prints how many sequences ran clean and
# the operations per second; a failure prints its seed and operations.
# Replay one seed: CORRAL_SOAK_SEED=N ./scripts/soak.sh 0.1
# Usage: ./scripts/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
export CORRAL_SOAK_MINUTES="${1:-10}"
cargo test -p corral --test model -- --ignored soak --nocapture --test-threads 1
