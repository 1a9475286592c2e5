#!/usr/bin/env bash
# Runs a command with an OS keychain to talk to, where there is none (CI, a server, a bare
# container): a private D-Bus session with GNOME Keyring's Secret Service, unlocked with a
# throwaway password, its keyring file in a temporary folder that dies with the run.
# With a working Secret Service already there, the command just runs.
set -euo pipefail
probe='dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets org.freedesktop.DBus.Peer.Ping'
if [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] && $probe >/dev/null 2>&1; then
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
