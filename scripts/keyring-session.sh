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
# The private session starts the Secret Service one way only: on demand, through this session's
# own service file, unlocked, over the keyrings kept here. The system's service file would start a
# locked daemon over the user's own keyrings (a second daemon racing the first at start, or the
# one that comes up after the first died mid-run: every key stored by then unreadable); with
# this one, a daemon that dies comes back unlocked with every key it held.
mkdir -p "$keyrings/services"
cat > "$keyrings/secret-service" <<EOF
#!/bin/sh
printf throwaway | XDG_DATA_HOME="$keyrings" exec gnome-keyring-daemon --unlock --foreground --components=secrets >/dev/null
EOF
chmod +x "$keyrings/secret-service"
printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=%s\n' "$keyrings/secret-service" > "$keyrings/services/org.freedesktop.secrets.service"
cat > "$keyrings/session.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <servicedir>$keyrings/services</servicedir>
  <include>/usr/share/dbus-1/session.conf</include>
</busconfig>
EOF
dbus-run-session --config-file="$keyrings/session.conf" -- bash -c '
  # The first call starts the service; the login keyring is made on its first unlock.
  for _ in $(seq 50); do $0 >/dev/null 2>&1 && break; sleep 0.1; done
  "$@"
' "$probe" "$@" 2> >(grep -v "Failed to set fd limit" >&2)
