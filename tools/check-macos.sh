#!/usr/bin/env bash
# Checks that Quire compiles for macOS on Apple silicon (aarch64-apple-darwin) with Metal, lint
# clean: `cargo clippy -D warnings` over the whole workspace, the app, the Metal decoder path, the
# Keychain store and the macOS thermal reader included. A check only: nothing is linked (that
# needs Apple's SDK), no binary is made, and nothing here runs on a Mac. zig (PyPI's ziglang,
# through cargo-zigbuild) is the C compiler for the -sys crates that compile C for the target.
# Metal shaders are not precompiled (that needs Apple's `xcrun metal`); a build on a Mac does.
#
# Same target folder as every other build; the macOS artifacts sit in its
# aarch64-apple-darwin/ folder, so target/release (what the tests run) is untouched.
# About 20 minutes on two cores when cold.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
TARGET=aarch64-apple-darwin

rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
python3 -m ziglang version >/dev/null 2>&1 && command -v cargo-zigbuild >/dev/null ||
  python3 -m pip install --quiet "ziglang==0.17.1" "cargo-zigbuild==0.24.1"

# The shaders are compiled by xcrun on a Mac; here mistral.rs embeds an empty library instead.
export MISTRALRS_METAL_PRECOMPILE=0
cargo-zigbuild clippy --release --workspace --all-targets --target "$TARGET" \
  --features quire-cli/metal,quire-app/metal -- -D warnings
echo "the macOS (Apple silicon, Metal) build compiles, lint-clean"
