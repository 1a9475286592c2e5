#!/usr/bin/env bash
# Packs what the GPU check needs (tools/device-check.sh) into parts small enough for one device
# call each: the device tool sends at most 64 MiB a call, working tree included, and the GPU
# machine reaches no registry, so the CUDA binary (tools/build-cuda.sh), the models and the
# sample documents go over in pieces, one carried part a call, while the machine stays warm.
#
#   bash tools/device-pack.sh            the tiny model and the embedder (exactness on the GPU)
#   bash tools/device-pack.sh --default  also the default answer and draft models (speed)
#
# Writes .device/part-NNN and .device/payload.sha256, and prints one line per part: carry
# [".device/part-NNN"] (the last call also ".device/payload.sha256") with the command
# `bash tools/device-check.sh` each time; the call that brings the last part runs the check.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
BIN=${QUIRE_CUDA_BIN:-$HOME/.cache/quire/cuda/quire}
# What one part may hold: 64 MiB a call less the working tree and some room.
PART_BYTES=$((56 * 1024 * 1024))

[ -x "$BIN" ] || { echo "no CUDA build at $BIN: run bash tools/build-cuda.sh first" >&2; exit 1; }
models=$("$CARGO_TARGET_DIR/release/quire" models | sed -n 's/^models folder: //p')
files=(SmolLM2-135M-Instruct.Q4_1.gguf all-minilm-l6-v2)
[ "${1:-}" = "--default" ] && files+=(qwen2.5-coder-1.5b-instruct-q4_k_m.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)

rm -rf .device
mkdir -p .device/stage/home/models
strip -o .device/stage/quire "$BIN"
xz -6 -T0 .device/stage/quire
for f in "${files[@]}"; do
  [ -e "$models/$f" ] || { echo "$models/$f is missing: run quire models fetch" >&2; exit 1; }
  cp -r "$models/$f" .device/stage/home/models/
done
cp -r ../shared/sample-docs .device/stage/sample-docs
tar -C .device/stage -cf .device/payload.tar .
rm -rf .device/stage
(cd .device && sha256sum payload.tar > payload.sha256 && split -a 3 -d -b "$PART_BYTES" payload.tar part- && rm payload.tar)
ls .device/part-* | while read -r part; do echo "carry [\"$part\"]"; done
echo "$(ls .device/part-* | wc -l) parts; the last call also carries .device/payload.sha256"
