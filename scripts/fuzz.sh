#!/usr/bin/env bash
# Fuzzes the loaders and the chunker with cargo fuzz (libFuzzer) for a bounded time each:
#   scripts/fuzz.sh [seconds per target, default 120]
# Seeds: the sample documents (good and bad). Needs cargo-fuzz (`cargo install cargo-fuzz`)
# and a nightly toolchain for the sanitizer; without nightly it runs on stable with no sanitizer.
# A crash leaves its input under fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
samples=${QUIRE_SAMPLE_DOCS:-$(cd .. && pwd)/shared/sample-docs}
export CARGO_TARGET_DIR=${QUIRE_FUZZ_TARGET_DIR:-$HOME/.cache/quire/fuzz-target}
toolchain=()
sanitizer=(-s none)
if rustup toolchain list 2>/dev/null | grep -q nightly; then toolchain=(+nightly); sanitizer=(-s address); fi
for target in loaders chunker; do
  corpus=fuzz/corpus/$target
  mkdir -p "$corpus"
  # Seeds: each sample file, prefixed with the byte that picks its loader (loaders) or as text.
  find "$samples" -type f | while read -r f; do
    case "$f" in *.pdf) k=0;; *.md) k=1;; *.txt) k=2;; *.html) k=3;; *.docx) k=4;; *.epub) k=5;; *) k=2;; esac
    name=$(basename "$f")
    if [ "$target" = loaders ]; then { printf "\\x$(printf %02x $k)"; head -c 200000 "$f"; } > "$corpus/$name"; else head -c 20000 "$f" > "$corpus/$name"; fi
  done
  (cd fuzz && cargo "${toolchain[@]}" fuzz run "${sanitizer[@]}" --release "$target" "corpus/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=4096 -max_len=300000 -timeout=30 -print_final_stats=1)
done
echo "fuzzing: no crash in ${seconds} s per target"
