#!/usr/bin/env bash
# Installs the .deb that scripts/bundle.sh built, starts the installed app under Xvfb with an
# empty home and the installed models, checks that it is running and has opened its collection
# (the knowledge base folder exists, with its key made and stored: run it where there is a
# keychain, or inside scripts/keyring-session.sh as CI does), then removes the package.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/quire/target}"
deb=$(ls -t "$CARGO_TARGET_DIR"/ship/release/bundle/deb/*.deb | head -1)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing $deb"
$SUDO apt-get install -y -qq "$(realpath "$deb")" >/dev/null
dpkg -L quire | grep -E 'bin/quire-app$|\.desktop$'
home=$(mktemp -d)
log="$home/app.log"
models="${QUIRE_MODELS:-$("$CARGO_TARGET_DIR/release/quire" models | sed -n 's/^models folder: //p')}"
QUIRE_HOME="$home" QUIRE_MODELS="$models" \
  xvfb-run -a -s "-screen 0 1280x800x24" timeout 25 /usr/bin/quire-app >"$log" 2>&1 &
runner=$!
sleep 15
# -x: the process named quire-app, not xvfb-run, whose arguments also name it (killing
# xvfb-run would leave its Xvfb behind).
if pgrep -x quire-app >/dev/null && [ -d "$home/index/chunks.lance" ] && [ -f "$home/index/vault.json" ]; then
  echo "the installed app is running after 15 s and has opened its collection in $home/index"
  status=0
else
  echo "the installed app is not running or did not open its collection; its output:"; cat "$log"
  status=1
fi
pkill -x quire-app || true
wait $runner 2>/dev/null || true
$SUDO apt-get remove -y -qq quire >/dev/null
rm -rf "$home"
exit $status
