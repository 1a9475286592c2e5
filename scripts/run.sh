#!/usr/bin/env bash
# Starts the desktop app (after scripts/setup.sh) on the default models.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
(cd ui && npm run build) >/dev/null
cargo build --release --workspace
exec "$CARGO_TARGET_DIR/release/quire-app" "$@"
