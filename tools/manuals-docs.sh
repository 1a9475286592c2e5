#!/usr/bin/env bash
# The documents of the manuals answer set (tests/eval/manuals-dev.jsonl and manuals-test.jsonl):
# four manuals on different subjects as Debian 12 ships them, none used by the project before —
# An Introduction to R (statistics), the Debian FAQ (a distribution), the GnuCash Tutorial and
# Concepts Guide (personal accounting) and the gnuplot manual (plotting); 817 pages in all.
# The questions were written once from the pages (pdftotext per page) and split in two halves
# (per document and answerable or not, a seeded shuffle) before Quire was asked any of them:
# study the dev half; the test half is reported once, at the end of the work, unchanged.
#
#   tools/manuals-docs.sh [DIR]        (default ~/.cache/quire/manuals-docs)
#   quire eval answers tests/eval/manuals-dev.jsonl --docs DIR
set -euo pipefail
dir="${1:-$HOME/.cache/quire/manuals-docs}"
mkdir -p "$dir"
want() {
  cat <<'SUMS'
337ccd0b490b1e66f7e783b45f4588d0599730b4206c0c051edfe1419c568c51  R-intro.pdf
ea67ca925863324d97a30b5c926aed95efc687c689aa16788c9bed54525c0b47  debian-faq.en.pdf
fced0a58f892984e9b6059c635399de15823ac8d9087b5d4fff781eb2ecf19f9  gnucash-guide-en.pdf
df68dd0613f043141512fc4436d17aaf96727d5a758d85233915ac5056a97206  gnuplot.pdf
SUMS
}
if (cd "$dir" && want | sha256sum --check --status 2>/dev/null); then
  echo "the manuals are in $dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download needs no root; the versions are those the sums were taken from (gnucash-docs
# is 145 MB: it holds the guide in five languages).
packages=(r-doc-pdf=4.2.2.20221110-2 debian-faq=11.1 gnucash-docs=4.13-1 gnuplot-doc=5.4.4+dfsg1-2)
(cd "$work" && apt-get download -qq "${packages[@]}") || {
  echo "could not download ${packages[*]} from Debian's archive" >&2
  echo "(Debian 12 'bookworm' package sources are needed; on a fresh machine run apt-get update first)" >&2
  exit 1
}
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
cp "$work/x/usr/share/R/doc/manual/R-intro.pdf" "$dir/R-intro.pdf"
gzip -dc "$work/x/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz" >"$dir/debian-faq.en.pdf"
gzip -dc "$work/x/usr/share/doc/gnucash-docs/gnucash-guide-en.pdf.gz" >"$dir/gnucash-guide-en.pdf"
cp "$work/x/usr/share/doc/gnuplot/gnuplot.pdf" "$dir/gnuplot.pdf"
(cd "$dir" && want | sha256sum --check) || { echo "the documents in $dir are not the expected ones" >&2; exit 1; }
echo "the manuals are in $dir"
