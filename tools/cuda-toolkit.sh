#!/usr/bin/env bash
# Lays out a CUDA 13.0 toolkit from NVIDIA's PyPI wheels, for building Quire's CUDA feature on a
# machine without the CUDA installer (this one): nvcc, its front end (nvvm), the C runtime and
# library headers, and the libraries candle and mistral.rs link (cudart, cuBLAS, cuRAND, NVRTC).
# 13.0 is what the lent GPU machines' driver (580) runs: candle loads its kernels as PTX, which a
# driver older than the compiler refuses.
#
# The one part no wheel carries is the driver library, libcuda.so, which only a machine with an
# NVIDIA driver has. Programs link against a stub of it (as the CUDA installer's lib/stubs does):
# a library named libcuda.so.1 that exports every driver function cudarc declares and does
# nothing; the real driver's libcuda.so.1 is what runs.
#
# Everything goes under ~/.cache/quire/cuda (or $QUIRE_CUDA_DIR); the last line printed is the
# toolkit's root (CUDA_PATH). Safe to run again.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

DIR=${QUIRE_CUDA_DIR:-$HOME/.cache/quire/cuda}
ROOT=$DIR/nvidia/cu13
# The wheels, name==version (pip checks each against the registry's hash).
WHEELS=(
  "nvidia-cuda-nvcc==13.0.88"
  "nvidia-nvvm==13.0.88"
  "nvidia-cuda-crt==13.0.88"
  "nvidia-cuda-runtime==13.0.96"
  "nvidia-cuda-cccl==13.0.85"
  "nvidia-cuda-nvrtc==13.0.88"
  "nvidia-curand==10.4.0.35"
  "nvidia-cublas==13.0.0.19"
)

if [ -x "$ROOT/bin/nvcc" ] && [ -e "$ROOT/lib/stubs/libcuda.so" ] && [ -e "$ROOT/lib/libcublas.so" ]; then
  echo "$ROOT"
  exit 0
fi
mkdir -p "$DIR/wheels"
for w in "${WHEELS[@]}"; do
  name=${w%%==*}
  if ! ls "$DIR/wheels/${name//-/_}-${w##*==}-"*.whl >/dev/null 2>&1; then
    echo "fetching $w" >&2
    python3 -m pip download -q --no-deps -d "$DIR/wheels" "$w"
  fi
done
for whl in "$DIR"/wheels/*.whl; do
  unzip -qo "$whl" 'nvidia/*' -d "$DIR"
done

# The linker looks for libX.so; the wheels carry only the versioned names.
cd "$ROOT/lib"
for lib in libcudart.so.* libcublas.so.* libcublasLt.so.* libcurand.so.* libnvrtc.so.*; do
  case "$lib" in *.alt.*) continue ;; esac
  ln -sf "$lib" "${lib%%.so.*}.so"
done

# The driver's stub: every function cudarc's bindings declare, doing nothing.
(cd "$REPO" && cargo fetch -q)
cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | tail -n 1)
mkdir -p stubs
grep -o '^pub unsafe fn cu[A-Za-z0-9_]*' "$cudarc/src/driver/sys/mod.rs" | awk '{print "void " $4 "(void) {}"}' | sort -u \
  > stubs/libcuda.c
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o stubs/libcuda.so stubs/libcuda.c
echo "$ROOT"
