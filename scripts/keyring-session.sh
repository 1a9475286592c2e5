#!/usr/bin/env bash
# Runs a command with an OS keychain to talk to, where there is none (CI, a server, a bare
# container): a private D-Bus session with GNOME Keyring's Secret Service, unlocked with a
# throwaway password, its keyring file in a temporary folder that dies with the run.
# With a working Secret Service already there, the command just runs.
set -euo pipefail
probe='dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.DBus.Peer.Ping'
# A service that answers is not enough: a session whose keyring daemon died answers through a
# freshly activated, locked keyring. Only a secret stored and read back proves the keychain works.
keychain_works() {
  command -v secret-tool >/dev/null || return 1
  local attrs=(quire-probe "$$")
  printf probe | timeout 5 secret-tool store --label="Quire keychain probe" "${attrs[@]}" 2>/dev/null || return 1
  local back
  back=$(timeout 5 secret-tool lookup "${attrs[@]}" 2>/dev/null) || back=
  timeout 5 secret-tool clear "${attrs[@]}" 2>/dev/null || true
  [ "$back" = probe ]
}
if [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] && $probe >/dev/null 2>&1 && keychain_works; then
  exec "$@"
fi
command -v gnome-keyring-daemon >/dev/null || { echo "gnome-keyring is not installed (apt install gnome-keyring libsecret-tools)" >&2; exit 1; }
keyrings=$(mktemp -d)
trap 'rm -rf "$keyrings"' EXIT
dbus-run-session -- bash -c '
  printf "throwaway" | XDG_DATA_HOME="$0" gnome-keyring-daemon --unlock --components=secrets >/dev/null
  # The login keyring is made on the first unlock; wait until the service answers.
  for _ in $(seq 50); do $1 >/dev/null 2>&1 && break; sleep 0.1; done
  shift
  "$@"
' "$keyrings" "$probe" "$@" 2> >(grep -v "Failed to set fd limit" >&2)
