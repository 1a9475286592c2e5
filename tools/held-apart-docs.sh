#!/usr/bin/env bash
# The documents of the held-apart answer set (tests/eval/held-apart-answers.jsonl): three GNU
# manuals as Debian ships them (the Bash Reference Manual, the GNU Coding Standards, Information
# for GNU Maintainers), fetched from Debian's archive, unpacked and checked byte for byte.
# The project never tuned anything on them: the questions were written once from the pages,
# before Quire was asked any of them, and are not to be edited to suit an answer.
#
#   tools/held-apart-docs.sh [DIR]        (default ~/.cache/quire/held-apart-docs)
#   quire eval answers tests/eval/held-apart-answers.jsonl --docs DIR
set -euo pipefail
dir="${1:-$HOME/.cache/quire/held-apart-docs}"
mkdir -p "$dir"
want() {
  cat <<'SUMS'
104971d389c0b9b7a261b0b3070a53b0d8cce6db1ffddefcc8423ddda92acd87  bashref.pdf
7986330133c982d8b35e14c42f847bf7d19afdc2a080ebf8db9b223c0888021f  standards.pdf
aebd1a7558d33624f35b350cd9cbc00095501ae4333c4fc8719b325bb5128e2a  maintain.pdf
SUMS
}
if (cd "$dir" && want | sha256sum --check --status 2>/dev/null); then
  echo "the held-apart documents are in $dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download needs no root; the package versions are those the sums were taken from.
(cd "$work" && apt-get download -qq bash-doc=5.2.15-2 gnu-standards=2022.03.23-0.1) || {
  echo "could not download bash-doc 5.2.15-2 and gnu-standards 2022.03.23-0.1 from Debian's archive" >&2
  echo "(Debian 12 'bookworm' package sources are needed; on a fresh machine run apt-get update first)" >&2
  exit 1
}
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
cp "$work/x/usr/share/doc/bash/bashref.pdf" "$dir/bashref.pdf"
gzip -dc "$work/x/usr/share/doc/gnu-standards/standards.pdf.gz" >"$dir/standards.pdf"
gzip -dc "$work/x/usr/share/doc/gnu-standards/maintain.pdf.gz" >"$dir/maintain.pdf"
(cd "$dir" && want | sha256sum --check) || { echo "the documents in $dir are not the expected ones" >&2; exit 1; }
echo "the held-apart documents are in $dir"
