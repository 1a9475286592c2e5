#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool), once per part tools/device-pack.sh made: it
# keeps the part that came with this call outside the working tree, and once every part is
# there (payload.sha256 came too and the parts add up to it), runs the check:
#   1. `quire models`: where the decoder runs and the GPU's memory;
#   2. `quire bench speculative --check` on the tiny model (30 RAG questions, the draft being the
#      model itself): greedy speculative output must equal plain decoding on the GPU;
#   3. with the default models packed: the same on them (12 questions) and `quire bench ttft`.
# Every output goes to $OUT (the device tool brings it back).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
KEEP=${QUIRE_DEVICE_DIR:-$HOME/quire-device}
OUT=${OUT:-$KEEP/out}
mkdir -p "$KEEP/parts" "$OUT"
for f in .device/part-* .device/payload.sha256; do
  [ -f "$f" ] && mv -f "$f" "$KEEP/parts/"
done
echo "parts kept: $(ls "$KEEP/parts" | grep -c '^part-')"
[ -f "$KEEP/parts/payload.sha256" ] || { echo "waiting for the last part (with payload.sha256)"; exit 0; }

cd "$KEEP"
if [ ! -x run/quire ]; then
  cat parts/part-* > payload.tar
  (cp parts/payload.sha256 . && sha256sum -c payload.sha256) || { echo "the parts do not add up: send them again"; exit 1; }
  mkdir -p run && tar -C run -xf payload.tar && rm payload.tar
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" run/quire.xz run/quire
  chmod +x run/quire
fi
# cuBLAS, cuRAND, NVRTC and the CUDA runtime of the machine's PyTorch (CUDA 13); the driver's
# libcuda from its own folder.
libs=$(python3 -c "import nvidia, os; print(':'.join(os.path.join(p, 'cu13', 'lib') for p in nvidia.__path__))" 2>/dev/null)
export LD_LIBRARY_PATH=$libs:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
export QUIRE_HOME=$KEEP/run/home
Q=$KEEP/run/quire
docs=$KEEP/run/sample-docs
questions=$REPO/tests/eval/sample-docs-answers.jsonl
cd "$REPO"

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$OUT/gpu.txt"
ldd "$Q" | grep -E 'cuda|cublas|curand|nvrtc|not found' | tee "$OUT/ldd.txt"
"$Q" models 2>&1 | tee "$OUT/models.txt"
status=0
"$Q" bench speculative --model smollm2-135m --draft smollm2-135m --limit 30 --chat 0 --modes free,draft \
  --questions "$questions" --docs "$docs" --check --report "$OUT/speculative-tiny.json" 2>&1 \
  | tee "$OUT/speculative-tiny.log" || status=1
if ls "$QUIRE_HOME"/models/qwen2.5-coder-1.5b-* >/dev/null 2>&1; then
  "$Q" bench speculative --limit 12 --chat 2 --questions "$questions" --docs "$docs" --check \
    --report "$OUT/speculative-default.json" 2>&1 | tee "$OUT/speculative-default.log" || status=1
  "$Q" bench ttft --limit 3 --questions "$questions" --docs "$docs" 2>&1 | tee "$OUT/ttft.log" || status=1
fi
exit $status
