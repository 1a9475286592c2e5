#!/usr/bin/env python3
"""A scanned copy of a PDF, as an office scanner makes one: every page drawn at 200 dpi in gray,
turned by up to 1 degree, with light noise, stored as a JPEG (quality 75) and nothing else (no
text layer). For the answer evaluation on scans against the text-layer original.

  tools/make-scanned-copy.py IN.pdf OUT.pdf

Needs poppler-utils (pdftoppm), Pillow and numpy."""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

source, target = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(11)
with tempfile.TemporaryDirectory() as work:
    subprocess.run(["pdftoppm", "-gray", "-r", "200", "-png", source, os.path.join(work, "p")], check=True,
                   stderr=subprocess.DEVNULL)
    pages = []
    for path in sorted(glob.glob(os.path.join(work, "p-*.png"))):
        page = Image.open(path).convert("L")
        page = page.rotate(float(rng.uniform(-1.0, 1.0)), resample=Image.BICUBIC, fillcolor=255)
        noisy = np.asarray(page).astype(np.float32) + rng.normal(0, 8, (page.size[1], page.size[0]))
        pages.append(Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)))
    pages[0].save(target, save_all=True, append_images=pages[1:], resolution=200.0, quality=75)
print(f"{len(pages)} pages scanned into {target}")
