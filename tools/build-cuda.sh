#!/usr/bin/env bash
# Builds Quire with its CUDA feature (the decoder on candle's CUDA device, mistral.rs with its
# CUDA kernels) for an NVIDIA H100/H200 (compute capability 9.0, or $CUDA_COMPUTE_CAP), with the
# toolkit tools/cuda-toolkit.sh lays out from PyPI. Not part of the app's build or its tests:
# a build for a GPU machine, which is checked there (tools/device-check.sh).
#
# Same target folder as every other build: only the crates that depend on candle are built
# again. The CUDA binary is copied to ~/.cache/quire/cuda/quire (printed on the last line), and
# the default build is restored after it, so target/release keeps the binaries the tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"

ROOT=$(bash tools/cuda-toolkit.sh | tail -n 1)
out=$(dirname "$(dirname "$ROOT")")/quire
(
  export CUDA_PATH=$ROOT PATH=$ROOT/bin:$PATH CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
  cargo build --release --workspace --features quire-cli/cuda,quire-app/cuda
)
cp "$CARGO_TARGET_DIR/release/quire" "$out"
# Back to the default build's binaries (the same artifacts as before: a relink, no rebuild).
cargo build --release --workspace
if ldd "$CARGO_TARGET_DIR/release/quire" | grep -q libcuda; then
  echo "target/release/quire still links CUDA after the default build" >&2
  exit 1
fi
echo "$out"
