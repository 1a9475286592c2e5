#!/usr/bin/env bash
# The documents of the per-language set (tests/eval/handbook/{en,de,fr,es,ja,zh}.jsonl): The
# Debian Administrator's Handbook as Debian 12 ships it (package debian-handbook, checked by
# sha256), its HTML book in six languages, one folder each (127 pages of HTML a
# language). Its translations are partial (paragraphs added since a translation was made stay
# in English there); every question was written from a paragraph translated in all five.
#
#   tools/handbook-docs.sh [DIR]     (DIR defaults to ~/.cache/quire/handbook-docs)
#   QUIRE_HOME=$(mktemp -d) quire ingest DIR/de
#   QUIRE_HOME=… quire eval answers tests/eval/handbook/de.jsonl --limit 0   (retrieval only)
set -euo pipefail
dir="${1:-$HOME/.cache/quire/handbook-docs}"
sum=3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa
languages=(en:en-US de:de-DE fr:fr-FR es:es-ES ja:ja-JP zh:zh-CN)
if [ -f "$dir/.complete" ] && [ "$(cat "$dir/.complete")" = "$sum" ]; then
  echo "the handbook is in $dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq debian-handbook=11.20220922) || {
  echo "could not download debian-handbook from Debian's archive (on a fresh machine run apt-get update first)" >&2
  exit 1
}
echo "$sum  $(ls "$work"/debian-handbook_*.deb)" | sha256sum --check --status || {
  echo "the downloaded debian-handbook package is not the expected one" >&2
  exit 1
}
dpkg-deb -x "$work"/debian-handbook_*.deb "$work/x"
rm -rf "$dir"
for pair in "${languages[@]}"; do
  mkdir -p "$dir/${pair%%:*}"
  cp "$work/x/usr/share/doc/debian-handbook/html/${pair#*:}"/*.html "$dir/${pair%%:*}/"
done
echo "$sum" >"$dir/.complete"
echo "the handbook is in $dir"
