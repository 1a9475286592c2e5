#!/usr/bin/env bash
# The documents of the manuals answer sets, as Debian 12 ships them, each checked by sha256.
#
# first (tests/eval/manuals-dev.jsonl and manuals-test.jsonl): four manuals on different subjects
#   none used by the project before — An Introduction to R (statistics), the Debian FAQ (a
#   distribution), the GnuCash Tutorial and Concepts Guide (personal accounting) and the gnuplot
#   manual (plotting); 817 pages. Written once from the pages (pdftotext per page), split in two
#   halves (per document and answerable or not, a seeded shuffle) before Quire was asked any:
#   the dev half studied, the test half reported once (BENCHMARKS.md, 2026-12-06), both studied since.
# second (tests/eval/manuals2-test.jsonl): four more, written from pages drawn by a seeded shuffle
#   before the second round of work on answers began, reported once at its end — the amsmath
#   user's guide (mathematical typesetting), the Asymptote manual (vector graphics), the
#   debmake guide for Debian maintainers (packaging) and the LilyPond Learning Manual (music
#   notation); 604 pages.
#
#   tools/manuals-docs.sh [first|second] [DIR]   (DIR defaults to ~/.cache/quire/manuals-docs,
#                                                  or manuals2-docs for the second set)
#   quire eval answers tests/eval/manuals-dev.jsonl --docs DIR
set -euo pipefail
set_name=first
case "${1:-}" in first | second) set_name=$1; shift ;; esac
if [ "$set_name" = first ]; then
  dir="${1:-$HOME/.cache/quire/manuals-docs}"
  sums='337ccd0b490b1e66f7e783b45f4588d0599730b4206c0c051edfe1419c568c51  R-intro.pdf
ea67ca925863324d97a30b5c926aed95efc687c689aa16788c9bed54525c0b47  debian-faq.en.pdf
fced0a58f892984e9b6059c635399de15823ac8d9087b5d4fff781eb2ecf19f9  gnucash-guide-en.pdf
df68dd0613f043141512fc4436d17aaf96727d5a758d85233915ac5056a97206  gnuplot.pdf'
  # gnucash-docs is 145 MB: it holds the guide in five languages.
  packages=(r-doc-pdf=4.2.2.20221110-2 debian-faq=11.1 gnucash-docs=4.13-1 gnuplot-doc=5.4.4+dfsg1-2)
else
  dir="${1:-$HOME/.cache/quire/manuals2-docs}"
  sums='367321308ea999a3dc4cab8655cd534ca48a6c1f3e5b9fae2083bbac23084a83  amsldoc.pdf
e17165321f74a5ec1b884cf20773cc43361df8f7fc707b071debf4ef707de051  asymptote.pdf
b49a29f9f39ccf599a93de7789338eb001dda98063bfbb9960f7d45e95d027d6  debmake-doc.en.pdf
4789fa6c4a57c97153baea611619648331db08a051fb078fa9f43167ec6fc728  lilypond-learning.pdf'
  # texlive-latex-base-doc is 85 MB and lilypond-doc-pdf 33 MB for one PDF each.
  packages=(texlive-latex-base-doc=2022.20230122-3 asymptote-doc=2.85+ds-1 debmake-doc=1.17-7 lilypond-doc-pdf=2.24.1-2)
fi
mkdir -p "$dir"
if (cd "$dir" && sha256sum --check --status 2>/dev/null <<<"$sums"); then
  echo "the manuals are in $dir"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt-get download needs no root; the versions are those the sums were taken from.
(cd "$work" && apt-get download -qq "${packages[@]}") || {
  echo "could not download ${packages[*]} from Debian's archive" >&2
  echo "(Debian 12 'bookworm' package sources are needed; on a fresh machine run apt-get update first)" >&2
  exit 1
}
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
docs="$work/x/usr/share/doc"
if [ "$set_name" = first ]; then
  cp "$work/x/usr/share/R/doc/manual/R-intro.pdf" "$dir/R-intro.pdf"
  gzip -dc "$docs/debian/FAQ/debian-faq.en.pdf.gz" >"$dir/debian-faq.en.pdf"
  gzip -dc "$docs/gnucash-docs/gnucash-guide-en.pdf.gz" >"$dir/gnucash-guide-en.pdf"
  cp "$docs/gnuplot/gnuplot.pdf" "$dir/gnuplot.pdf"
else
  cp "$docs/texlive-doc/latex/amsmath/amsldoc.pdf" "$dir/amsldoc.pdf"
  cp "$docs/asymptote/asymptote.pdf" "$dir/asymptote.pdf"
  cp "$docs/debmake-doc/debmake-doc.en.pdf" "$dir/debmake-doc.en.pdf"
  cp "$docs/lilypond/html/Documentation/learning.pdf" "$dir/lilypond-learning.pdf"
fi
(cd "$dir" && sha256sum --check <<<"$sums") || { echo "the documents in $dir are not the expected ones" >&2; exit 1; }
echo "the manuals are in $dir"
