#!/usr/bin/env bash
# Quire on 64-bit ARM, tested here: cross-builds the workspace for aarch64-unknown-linux-gnu
# (Debian's cross linker) and runs it under qemu's user-mode emulation, failing on any
# difference from this machine's x86-64 results.
#
#   1. The kernel tests (decoder tiles and panels, attention, softmax, SiLU, `smmla` and `sdot`
#      against their definitions, the embedder's int8 layers: each set against the plain
#      arithmetic and the bits recorded on x86-64) under three CPU models: `max` (dot products
#      and i8mm), `neoverse-n1` (dot products, no i8mm) and `cortex-a72` (NEON alone); each
#      must pick the kernel set it is expected to.
#   2. The decoder's exactness tests and the embedder's reference tests under `max` and
#      `neoverse-n1` (the i8mm panels, then the dot-product ones), and the 0.5B Q4_K_M model's
#      logits against the bits recorded on x86-64.
#   3. The command line's fast scenario under `max` and `neoverse-n1` against the x86-64 build
#      on the same documents and models: ingest, list, search in all three modes, ask with the
#      tiny model and with the 0.5B Qwen (Q4_K/Q6_K: the NEON tiles and panels), the same bytes
#      out.
#
# PARTS picks parts (default "kernels exactness scenario"), ARM_CPUS the CPU models of parts 2
# and 3 (default "max neoverse-n1"): the whole run takes hours under qemu on 2 cores.
#
# Speed under emulation means nothing (BENCHMARKS.md estimates ARM's on paper). The app is not
# built: its WebKitGTK for ARM is not installed here. Needs the x86-64 build (scripts/setup.sh)
# and the models; about as long as the Linux build when cold, then ~15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
TARGET=aarch64-unknown-linux-gnu
# ARM's libraries as Debian's multiarch installs them (the D-Bus library below brings its C
# library): qemu finds the loader and libc of one release there. The cross compiler's own
# sysroot (/usr/aarch64-linux-gnu) holds an older libc, and its loader with the newer libc hangs
# every program at its first thread (the two disagree on the thread stack list).
SYSROOT=/

rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
# The keychain's D-Bus library for ARM (Debian's multiarch: the build links it, qemu loads it).
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/dbus-1.pc ] || need+=(libdbus-1-dev:arm64)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
# C and C++ of the -sys crates, for the target, and pkg-config looking at ARM's libraries.
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
export PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH_aarch64_unknown_linux_gnu=/usr/lib/aarch64-linux-gnu/pkgconfig
build=(--release --workspace --exclude quire-app --target "$TARGET")
PARTS="${PARTS:-kernels exactness scenario}"
ARM_CPUS="${ARM_CPUS:-max neoverse-n1}"
part() { [[ " $PARTS " == *" $1 "* ]]; }
cargo build "${build[@]}"
# The tests are built only for the parts that run them (the scenario runs the binary alone).
if part kernels || part exactness; then cargo test "${build[@]}" --no-run; fi
runner() { echo "qemu-aarch64-static -L $SYSROOT -cpu $1"; }
failed=0
part kernels && for model in "max:NEON i8mm" "neoverse-n1:NEON dotprod" "cortex-a72:NEON"; do
  cpu=${model%%:*} expected=${model#*:}
  echo "--- kernel tests, qemu -cpu $cpu"
  out=$(CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$(runner "$cpu")" \
    cargo test "${build[@]}" --lib -- kernels attention softmax silu int8 weights integer_products the_chain --nocapture 2>&1) || { echo "$out" | tail -n 40; failed=1; }
  echo "$out" | grep -E "^test result|kernels in use" | sort | uniq -c
  echo "$out" | grep -q "kernels in use: $expected\$" || { echo "expected the $expected kernels on $cpu"; failed=1; }
done

part exactness && for cpu in $ARM_CPUS; do
  echo "--- the decoder's exactness and the embedder's reference tests, qemu -cpu $cpu"
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$(runner "$cpu")" \
    cargo test "${build[@]}" --test decoder --test reference -- --skip speed --skip sampling || failed=1
  # The 0.5B Q4_K_M model's logits by panels and by tiles: x86-64's bits (a full-tier test).
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$(runner "$cpu")" \
    cargo test "${build[@]}" --test decoder -- --ignored --exact a_q4_k_m_model_gives_the_recorded_logits_by_panels_and_by_tiles || failed=1
done

if ! part scenario; then
  [ "$failed" = 0 ] && echo "aarch64 under qemu gives x86-64's results ($PARTS)" && exit 0
  exit 1
fi
X86="${X86_QUIRE:-$CARGO_TARGET_DIR/release/quire}"
ARM="$CARGO_TARGET_DIR/$TARGET/release/quire"
SAMPLES="${QUIRE_SAMPLE_DOCS:-$(cd .. && pwd)/shared/sample-docs}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs"
# Markdown only: a PDF is read in a child process (the loader's isolation), which qemu's user
# mode cannot start without binfmt_misc (exit status 127 here); real ARM machines start it.
cp -r "$SAMPLES/markdown" "$work/docs/"
export QUIRE_PASSPHRASE="aarch64 scenario passphrase"
export QUIRE_MODELS="${QUIRE_MODELS:-$HOME/.local/share/quire/models}"
side() {
  local which=$1; shift
  if [ "$which" = x86 ]; then
    QUIRE_HOME="$work/home-x86" "$X86" "$@"
  else
    QUIRE_HOME="$work/home-$which" qemu-aarch64-static -L "$SYSROOT" -cpu "${which#arm-}" "$ARM" "$@"
  fi
}
answer() { python3 tools/answer_summary.py; }
arms=(); for cpu in $ARM_CPUS; do arms+=("arm-$cpu"); done
for which in x86 "${arms[@]}"; do
  out="$work/out-$which"
  mkdir -p "$out"
  start=$(date +%s)
  # Files finish in any order: the report's lines sorted.
  side "$which" ingest "$work/docs" 2>&1 | sort >"$out/ingest"
  side "$which" list >"$out/list"
  for mode in dense bm25 hybrid; do
    side "$which" search --mode "$mode" --limit 5 "which platforms does keyring support" >"$out/search-$mode"
  done
  side "$which" ask --json --model smollm2-135m "What does the tokio crate provide?" | answer >"$out/ask-tiny"
  side "$which" ask --json --model qwen2.5-coder-0.5b --top-k 1 --max-tokens 200 \
    "What does the notify crate do?" | answer >"$out/ask-qwen"
  echo "$which: $(( $(date +%s) - start )) s for the scenario"
done
for arm in "${arms[@]}"; do
  for f in ingest list search-dense search-bm25 search-hybrid ask-tiny ask-qwen; do
    if diff -u "$work/out-x86/$f" "$work/out-$arm/$f"; then echo "same on $arm: $f"; else echo "DIFFERENT on $arm: $f"; failed=1; fi
  done
done
echo "--- x86-64's answers:"
cat "$work/out-x86/ask-tiny" "$work/out-x86/ask-qwen"
[ "$failed" = 0 ] && echo "aarch64 under qemu gives x86-64's results" || exit 1
