#!/usr/bin/env bash
# Makes the virtual environment `quire bench embed` runs its reference in: sentence-transformers
# on CPU PyTorch from their registry packages, the library people would otherwise use to embed.
# Not part of the app or its tests. Goes to ~/.cache/quire/st-venv (or $QUIRE_ST_VENV); the
# torch wheel on PyPI brings its CUDA libraries along (about 3 GB), unused on a CPU.
set -euo pipefail
VENV=${QUIRE_ST_VENV:-$HOME/.cache/quire/st-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sentence_transformers' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet torch==2.15.0 sentence-transformers==6.2.0
fi
echo "$VENV/bin/python"
