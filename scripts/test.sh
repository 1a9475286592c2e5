#!/usr/bin/env bash
# Runs the test suite (unit tests, and end-to-end tests over the real models and sample documents).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
cargo test --release --workspace
