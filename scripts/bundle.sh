#!/usr/bin/env bash
# Builds the desktop packages from the one release build: on Linux a .deb (and an .AppImage
# with BUNDLES=deb,appimage, which needs linuxdeploy from the network); on macOS a .app/.dmg with
# Metal (run there: FEATURES=metal; FEATURES=cuda for NVIDIA GPUs); on Windows an .msi. Packages land in
# $CARGO_TARGET_DIR/ship/release/bundle/.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
case "$(uname -s)" in
  Darwin) default_bundles="app,dmg" ;;
  MINGW*|MSYS*|CYGWIN*) default_bundles="msi" ;;
  *) default_bundles="deb" ;;
esac
(cd ui && npm run build)
if [ -n "${FEATURES:-}" ]; then
  cargo build --release --workspace --features "quire-app/$FEATURES"
else
  cargo build --release --workspace
fi
# Packages ship the app without its symbol table (about 80 of its 390 MB): a stripped copy in a
# staging target folder of its own, so the build's binary, which the tests run, keeps its
# symbols for backtraces, and the release profile (one for everything) stays as it is.
ship="$CARGO_TARGET_DIR/ship"
mkdir -p "$ship/release"
case "$(uname -s)" in
  Darwin) strip -x -o "$ship/release/quire-app" "$CARGO_TARGET_DIR/release/quire-app" ;;
  MINGW*|MSYS*|CYGWIN*) cp "$CARGO_TARGET_DIR/release/quire-app.exe" "$ship/release/" ;;
  *) strip --strip-all -o "$ship/release/quire-app" "$CARGO_TARGET_DIR/release/quire-app" ;;
esac
# `tauri bundle` packages the binary it finds in the target folder; it does not build again.
CARGO_TARGET_DIR="$ship" ui/node_modules/.bin/tauri bundle --bundles "${BUNDLES:-$default_bundles}"
ls -l "$ship"/release/bundle/*/
