#!/usr/bin/env bash
# Packs what the GPU check needs (tools/device-check.sh) into parts small enough for one device
# call each: the device tool sends at most 64 MiB a call, working tree included, and the GPU
# machine reaches no registry, so the CUDA binary (tools/build-cuda.sh), the models and the
# sample documents go over in pieces, one carried part a call, while the machine stays warm.
#
# The parts come in stages, each a tar of its own with its own checksum, so the machine checks
# each stage as soon as it is whole: a binary that does not start on that machine is known after
# the first stage, before the large models are sent.
#   binary   the CUDA build, the libraries it links that a bare image may lack, the embedder,
#            the sample documents
#   tiny     the tiny model (exactness on the GPU, 30 questions)
#   answer   the default answer model        (speed: first token, speculative against plain)
#   draft    the default draft model
#
#   bash tools/device-pack.sh [STAGE...]     default: binary answer draft
#
# Writes .device/<stage>-NNN and .device/<stage>.sha256 and prints one line per call, in order:
# the paths to carry (the last part of a stage with its checksum), each call's command being
# `bash tools/device-check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
BIN=${QUIRE_CUDA_BIN:-$HOME/.cache/quire/cuda/quire}
# What one part may hold: 64 MiB a call less the working tree and some room.
PART_BYTES=$((58 * 1024 * 1024))
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(binary answer draft)

[ -x "$BIN" ] || { echo "no CUDA build at $BIN: run bash tools/build-cuda.sh first" >&2; exit 1; }
models=$("$CARGO_TARGET_DIR/release/quire" models | sed -n 's/^models folder: //p')
model_file() {
  [ -e "$models/$1" ] || { echo "$models/$1 is missing: run quire models fetch" >&2; exit 1; }
  mkdir -p "$stage_dir/home/models"
  cp -r "$models/$1" "$stage_dir/home/models/"
}

rm -rf .device
mkdir -p .device
for stage in "${stages[@]}"; do
  stage_dir=.device/stage
  mkdir -p "$stage_dir"
  case "$stage" in
    binary)
      strip -o "$stage_dir/quire" "$BIN"
      xz -6 -T0 "$stage_dir/quire"
      # The system libraries it links beyond glibc (D-Bus for the keychain and what that
      # needs): used there only where the image lacks them.
      mkdir -p "$stage_dir/lib"
      ldd "$BIN" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libgcc_s|libpthread|libdl|librt)\.so' \
        | grep -vE 'libcuda|libcublas|libcurand|libnvrtc|libcudart' | xargs -r cp -L -t "$stage_dir/lib"
      model_file all-minilm-l6-v2
      cp -r ../shared/sample-docs "$stage_dir/sample-docs"
      ;;
    tiny) model_file SmolLM2-135M-Instruct.Q4_1.gguf ;;
    answer) model_file qwen2.5-coder-1.5b-instruct-q4_k_m.gguf ;;
    draft) model_file qwen2.5-coder-0.5b-instruct-q4_k_m.gguf ;;
    *) echo "unknown stage $stage: binary, tiny, answer or draft" >&2; exit 2 ;;
  esac
  tar -C "$stage_dir" -cf ".device/$stage.tar" .
  rm -rf "$stage_dir"
  (cd .device && sha256sum "$stage.tar" > "$stage.sha256" && split -a 3 -d -b "$PART_BYTES" "$stage.tar" "$stage-" && rm "$stage.tar")
  parts=(.device/"$stage"-[0-9][0-9][0-9])
  last=${parts[${#parts[@]}-1]}
  for part in "${parts[@]}"; do
    if [ "$part" = "$last" ]; then echo "carry [\"$part\", \".device/$stage.sha256\"]"; else echo "carry [\"$part\"]"; fi
  done
done
echo "$(ls .device/*-[0-9][0-9][0-9] | wc -l) calls, each with the command: bash tools/device-check.sh"
