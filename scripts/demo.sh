#!/usr/bin/env bash
# The main job on the default models: ingest the sample documents and answer a question about
# them, streaming the answer and its sources. Uses its own data folder unless QUIRE_HOME is set.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
quire="$CARGO_TARGET_DIR/release/quire"
docs="${1:-../shared/sample-docs}"
question="${2:-Which FASTA program performs a rigorous Smith-Waterman search?}"
# The demo keeps its knowledge base apart from yours, but uses the installed models.
export QUIRE_MODELS="${QUIRE_MODELS:-$("$quire" models | sed -n 's/^models folder: //p')}"
export QUIRE_HOME="${DEMO_HOME:-${TMPDIR:-/tmp}/quire-demo}"
# Some sample files are bad on purpose: they are reported and skipped (exit status 2).
"$quire" ingest "$docs" || [ $? -eq 2 ]
echo
echo "Q: $question"
"$quire" ask "$question"
