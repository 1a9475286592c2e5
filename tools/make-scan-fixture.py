#!/usr/bin/env python3
"""Makes crates/testkit/fixtures/scanned-page.jpg: a page of text written for Quire's tests,
drawn at 150 dpi with DejaVu Serif, turned 1.5 degrees, with light noise, JPEG at quality 60 (a scan's look);
scanned-page.jp2, that JPEG's pixels as JPEG 2000 (irreversible, 20:1; Pillow built with OpenJPEG); and
scanned-page.g3, its pixels in black and white (gray under 128 black) coded CCITT group 3 one-dimensional
with end-of-line codes, as libtiff writes a TIFF strip (Pillow's libtiff).
Run once by hand (needs Pillow and numpy, and Debian's fonts-dejavu); the files are committed."""
import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont

LINES = [
    ("Larkspur Heat Pumps - Warranty Card", 34),
    ("", 20),
    ("The Larkspur LX-40 heat pump is covered by a warranty of seven years", 24),
    ("from the date of installation. The compressor alone is covered for", 24),
    ("twelve years when the unit is serviced once a year by an approved", 24),
    ("installer. Keep this card with the installation invoice.", 24),
    ("", 20),
    ("To make a claim, call the service line on 0800 555 0199 and give", 24),
    ("the serial number printed under the front cover.", 24),
]
font_path = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
page = Image.new("L", (1240, 760), 255)
draw = ImageDraw.Draw(page)
y = 60
for text, size in LINES:
    if text:
        draw.text((80, y), text, fill=20, font=ImageFont.truetype(font_path, size))
    y += int(size * 1.7)
page = page.rotate(1.5, resample=Image.BICUBIC, fillcolor=255)
noisy = np.asarray(page).astype(np.float32) + np.random.default_rng(1).normal(0, 8, (page.size[1], page.size[0]))
Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save("crates/testkit/fixtures/scanned-page.jpg", quality=60)
Image.open("crates/testkit/fixtures/scanned-page.jpg").convert("L").save(
    "crates/testkit/fixtures/scanned-page.jp2", quality_mode="rates", quality_layers=[20], irreversible=True)
# One strip of group 3 (TIFF Compression 3, no T4Options: 1-D, end-of-line codes, no fill bits).
bw = Image.open("crates/testkit/fixtures/scanned-page.jpg").convert("L").point(lambda p: 255 if p >= 128 else 0).convert("1")
tiff = io.BytesIO()
bw.save(tiff, format="TIFF", compression="group3", tiffinfo={278: bw.size[1]})
strip = Image.open(io.BytesIO(tiff.getvalue())).tag_v2
start, length = strip[273][0], strip[279][0]
open("crates/testkit/fixtures/scanned-page.g3", "wb").write(tiff.getvalue()[start:start + length])
