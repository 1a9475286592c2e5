#!/usr/bin/env bash
# Cross-builds Quire for Windows (x86-64) on this Linux machine: quire.exe (the command line),
# quire-app.exe (the desktop app) and a per-user installer made by NSIS from
# src-tauri/windows/installer.nsi, with the name, version and icon of src-tauri/tauri.conf.json.
# The toolchain is mingw-w64 (Rust's x86_64-pc-windows-gnu target); nothing here runs Windows:
# tests/windows-wine.sh runs quire.exe under Wine.
#
# Same target folder as every other build; the Windows artifacts sit in its
# x86_64-pc-windows-gnu/ folder, so target/release (what the tests run) is untouched. What ships
# (stripped binaries, the installer) lands in $CARGO_TARGET_DIR/windows/, printed at the end.
# About as long as the Linux build when cold (an hour on two cores).
#
#   tools/build-windows.sh           binaries and installer
#   tools/build-windows.sh --check   clippy -D warnings over the Windows build, nothing linked
set -euo pipefail
case "${1:-}" in --check | "") ;; *) echo "usage: tools/build-windows.sh [--check]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
TARGET=x86_64-pc-windows-gnu

rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
need=()
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64)
command -v makensis >/dev/null || need+=(nsis)
# aws-lc-sys (TLS, pulled in by mistral.rs's hub client, unused offline) assembles with NASM.
command -v nasm >/dev/null || need+=(nasm)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
[ -f ui/dist/index.html ] || (cd ui && npm ci --no-audit --no-fund && npm run build)

if [ "${1:-}" = --check ]; then
  cargo clippy --release --workspace --all-targets --target "$TARGET" -- -D warnings
  echo "the Windows build compiles, lint-clean"
  exit 0
fi
cargo build --release --workspace --target "$TARGET"

built="$CARGO_TARGET_DIR/$TARGET/release"
ship="$CARGO_TARGET_DIR/windows"
rm -rf "$ship" && mkdir -p "$ship/files"
for exe in quire.exe quire-app.exe; do
  x86_64-w64-mingw32-strip --strip-all -o "$ship/files/$exe" "$built/$exe"
done
# The GNU target's app loads WebView2's loader at run time (webview2-com-sys puts Microsoft's
# redistributable DLL beside the build); without it the app does not start at all.
cp "$built/WebView2Loader.dll" "$ship/files/"
# The name, version and icon are tauri.conf.json's, as in the Linux package.
conf=src-tauri/tauri.conf.json
field() { python3 -c "import json,sys; print(json.load(open('$conf'))[sys.argv[1]])" "$1"; }
name=$(field productName)
version=$(field version)
makensis -V2 -INPUTCHARSET UTF8 \
  -DNAME="$name" -DVERSION="$version" -DICON="$PWD/icons/icon.ico" \
  -DFILES="$ship/files" -DOUTFILE="$ship/${name}_${version}_x64-setup.exe" \
  src-tauri/windows/installer.nsi
ls -l "$ship/files" "$ship"/*.exe
echo "$ship"
