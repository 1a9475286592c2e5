#!/usr/bin/env bash
# Runs on the lent GPU machine (the device tool), once per part tools/device-pack.sh made: it
# keeps the part that came with this call outside the working tree, unpacks each stage once its
# parts add up to its checksum, and runs what the stages there allow, each check once:
#   binary   `quire models` (where the decoder runs, the GPU's memory) and what the binary links;
#   tiny     `quire bench speculative --check` on the tiny model (30 RAG questions, the draft
#            being the model itself): greedy speculative output must equal plain decoding;
#   answer   the same on the default models (12 questions, 2 chats; with the draft model when its
#            stage came, else grammar and passage-lookup drafts only) and `quire bench ttft`.
# Every output goes to $OUT (the device tool brings it back).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
KEEP=${QUIRE_DEVICE_DIR:-$HOME/quire-device}
OUT=${OUT:-$KEEP/out}
mkdir -p "$KEEP/parts" "$KEEP/run" "$OUT"
for f in .device/*-[0-9][0-9][0-9] .device/*.sha256; do
  [ -f "$f" ] && mv -f "$f" "$KEEP/parts/"
done
cd "$KEEP"
echo "parts here: $(ls parts | tr '\n' ' ')"
for sum in parts/*.sha256; do
  [ -f "$sum" ] || continue
  stage=$(basename "$sum" .sha256)
  [ -e "unpacked-$stage" ] && continue
  cat parts/"$stage"-[0-9][0-9][0-9] > "$stage.tar"
  (cp "$sum" . && sha256sum -c "$stage.sha256") || { echo "stage $stage does not add up: send its parts again"; exit 1; }
  tar -C run -xf "$stage.tar" && rm -f "$stage.tar" parts/"$stage"-* && touch "unpacked-$stage"
  echo "stage $stage unpacked"
done
[ -e unpacked-binary ] || { echo "waiting for the binary stage"; exit 0; }
if [ ! -x run/quire ]; then
  python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" run/quire.xz run/quire
  chmod +x run/quire
fi

# cuBLAS, cuRAND, NVRTC and the CUDA runtime of the machine's PyTorch (CUDA 13); the driver's
# libcuda from its own folder; the carried system libraries only where the image lacks them.
libs=$(python3 -c "import nvidia, os; print(':'.join(os.path.join(p, 'cu13', 'lib') for p in nvidia.__path__))" 2>/dev/null)
export LD_LIBRARY_PATH=$libs:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}
Q=$KEEP/run/quire
if ldd "$Q" | grep -q 'not found'; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$KEEP/run/lib; fi
export QUIRE_HOME=$KEEP/run/home
docs=$KEEP/run/sample-docs
questions=$REPO/tests/eval/sample-docs-answers.jsonl
cd "$REPO"

status=0
step() { # name, command...: runs once per machine, its output in $OUT/<name>.log
  local name=$1
  shift
  [ -e "$KEEP/done-$name" ] && return 0
  local started=$SECONDS
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - started)) s" >> "$OUT/steps.txt"
  [ "$rc" = 0 ] || status=1
  touch "$KEEP/done-$name"
}
smoke() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  ldd "$Q" | grep -E 'cuda|cublas|curand|nvrtc|not found'
  "$Q" models
}
step smoke smoke
if [ -e "$KEEP/unpacked-tiny" ]; then
  step speculative-tiny "$Q" bench speculative --model smollm2-135m --draft smollm2-135m --limit 30 --chat 0 \
    --modes free,draft --questions "$questions" --docs "$docs" --check --report "$OUT/speculative-tiny.json"
fi
if [ -e "$KEEP/unpacked-answer" ]; then
  if [ -e "$KEEP/unpacked-draft" ]; then draft=(--draft qwen2.5-coder-0.5b); else draft=(--draft none --modes free); fi
  step speculative-default "$Q" bench speculative --limit 12 --chat 2 "${draft[@]}" --questions "$questions" \
    --docs "$docs" --check --report "$OUT/speculative-default.json"
  step ttft "$Q" bench ttft --limit 3 --questions "$questions" --docs "$docs"
fi
[ -f "$OUT/steps.txt" ] && cat "$OUT/steps.txt"
exit $status
