"""Prints the parts of `quire ask --json`'s answer (stdin) that two runs must agree on: the text,
each citation's path, page and quote, how many sources and prompt tokens. Timings are left out.
Used by the scripts that compare platforms (tests/windows-wine.sh, tools/test-aarch64.sh)."""
import json
import sys

answer = json.load(sys.stdin)
print("answer:", answer["text"])
for c in answer["citations"]:
    print("cited:", c["path"], "page", c["page"], "|", c["quote"])
print("sources:", len(answer["sources"]), "prompt tokens:", answer["stats"]["prompt_tokens"])
