#!/usr/bin/env python3
"""The page images `quire bench ocr` reads: sample-document pages drawn as a scanner would give
them, each beside its known text (the PDF's own text layer, from pdftotext).

  tools/make-ocr-scans.py OUT_DIR [SAMPLE_DOCS_DIR]

Per page: NAME-300-clean.png (300 dpi, gray) and NAME-150-noisy.jpg (150 dpi, turned 2 degrees,
Gaussian noise of deviation 14, JPEG quality 70), and NAME.txt. Needs poppler-utils (pdftoppm,
pdftotext), Pillow and numpy."""
import os
import subprocess
import sys

import numpy as np
from PIL import Image

# Pages of running text, tables, option lists and program output, from the two sample PDFs.
PAGES = [("4ti2_manual.pdf", 5), ("4ti2_manual.pdf", 12), ("fasta_guide.pdf", 3),
         ("fasta_guide.pdf", 10), ("fasta_guide.pdf", 20), ("fasta_guide.pdf", 30)]

out = sys.argv[1]
samples = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "sample-docs")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
for pdf, page in PAGES:
    path = os.path.join(samples, pdf)
    name = os.path.join(out, f"{pdf[:-4]}-p{page}")
    text = subprocess.run(["pdftotext", "-f", str(page), "-l", str(page), path, "-"],
                          capture_output=True, text=True, check=True).stdout
    with open(f"{name}.txt", "w") as f:
        f.write(text)
    for dpi in (300, 150):
        subprocess.run(["pdftoppm", "-gray", "-r", str(dpi), "-f", str(page), "-l", str(page),
                        "-singlefile", "-png", path, f"{name}-{dpi}"], check=True)
    os.rename(f"{name}-300.png", f"{name}-300-clean.png")
    page_150 = Image.open(f"{name}-150.png").convert("L")
    os.remove(f"{name}-150.png")
    turned = page_150.rotate(2.0, resample=Image.BICUBIC, expand=True, fillcolor=255)
    noisy = np.asarray(turned).astype(np.float32) + rng.normal(0, 14, (turned.size[1], turned.size[0]))
    Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(f"{name}-150-noisy.jpg", quality=70)
print(f"{len(PAGES)} pages in {out}")
