#!/usr/bin/env bash
# Builds Quire with its CUDA feature (the decoder on candle's CUDA device, mistral.rs with its
# CUDA kernels) for an NVIDIA H100/H200 (compute capability 9.0, or $CUDA_COMPUTE_CAP), with the
# toolkit tools/cuda-toolkit.sh lays out from PyPI. Not part of the app's build or its tests:
# a build for a GPU machine, which is checked there (tools/device-check.sh).
#
# Same target folder as every other build: only the crates that depend on candle are built
# again. The CUDA binary is copied to ~/.cache/quire/cuda/quire (printed on the last line), and
# the default build is restored after it, so target/release keeps the binaries the tests run.
#
#   tools/build-cuda.sh --check   only checks that the CUDA build compiles, lint-clean (clippy,
#                                 the kernels compiled by nvcc included): no binary, nothing
#                                 linked, target/release untouched (about 15 minutes on two cores)
set -euo pipefail
case "${1:-}" in --check | "") ;; *) echo "usage: tools/build-cuda.sh [--check]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"

ROOT=$(bash tools/cuda-toolkit.sh | tail -n 1)
out=$(dirname "$(dirname "$ROOT")")/quire
cuda_cargo() (
  export CUDA_PATH=$ROOT PATH=$ROOT/bin:$PATH CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
  cargo "$1" --release --workspace --features quire-cli/cuda,quire-app/cuda "${@:2}"
)
if [ "${1:-}" = --check ]; then
  cuda_cargo clippy -- -D warnings
  echo "the CUDA build compiles, lint-clean"
  exit 0
fi
cuda_cargo build
cp "$CARGO_TARGET_DIR/release/quire" "$out"
# Back to the default build's binaries (the same artifacts as before: a relink, no rebuild).
cargo build --release --workspace
if ldd "$CARGO_TARGET_DIR/release/quire" | grep -q libcuda; then
  echo "target/release/quire still links CUDA after the default build" >&2
  exit 1
fi
echo "$out"
