#!/usr/bin/env bash
# Runs the test suite: the UI's unit tests (Vitest, with a type check), then the Rust tests —
# unit tests and end-to-end tests over the real models and sample documents, the desktop app's
# in its real WebView under Xvfb.
#
#   scripts/test.sh          the fast tier: the small embedder and the tiny model, a slice of
#                            the answer evaluation (for every change)
#   scripts/test.sh --full   adds the default-model tests (answer evaluation on 44 questions,
#                            speculative = plain on 12, a Q4_K_M model's logits against the
#                            bits recorded on x86-64, memory prediction); CI runs this
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
start=$(date +%s)
tier=()
case "${1:-}" in
    # The full-tier tests are the ignored ones; the two measurements among them (`#[ignore = "a
    # measurement…"]`) assert nothing and run only by hand, and the 50,000-document window test
    # (`#[ignore = "long…"]`, about 15 minutes of indexing) and the tests against a Garage cluster
    # (`tools/garage.sh start` first) by explicit command.
    --full) tier=(--include-ignored --skip panel_speed --skip prompt_speed --skip fifty_thousand --skip to_garage --skip on_a_garage_cluster) ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
esac
(cd ui && npm test && npm run build)
# --show-output: the figures the end-to-end tests print (memory prediction, first token) land in the log.
# Inside a keychain session: collections keep their keys in the OS keychain (a private GNOME
# Keyring where the machine has none, as on CI).
scripts/keyring-session.sh cargo test --release --workspace -- --show-output "${tier[@]}"
echo "scripts/test.sh ${1:-(fast tier)}: $(( $(date +%s) - start )) s"
