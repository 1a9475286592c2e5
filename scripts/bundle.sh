#!/usr/bin/env bash
# Builds the desktop packages from the one release build: on Linux a .deb (and an .AppImage
# with BUNDLES=deb,appimage, which needs linuxdeploy from the network); on macOS a .app/.dmg with
# Metal (run there: FEATURES=metal); on Windows an .msi. Packages land in
# $CARGO_TARGET_DIR/release/bundle/.
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
# `tauri bundle` packages the binary already built above; it does not build again.
ui/node_modules/.bin/tauri bundle --bundles "${BUNDLES:-$default_bundles}"
ls -l "$CARGO_TARGET_DIR"/release/bundle/*/
