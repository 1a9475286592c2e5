"""Draws Quire's icon (a folded quire of pages with a search lens) as a 1024x1024 PNG.
The platform icon set in icons/ is made from it with `npx tauri icon` (see icons/README.md)."""
import sys
from PIL import Image, ImageDraw

S = 1024
img = Image.new("RGBA", (S, S), (0, 0, 0, 0))
d = ImageDraw.Draw(img)
d.rounded_rectangle([48, 48, S - 48, S - 48], radius=220, fill=(36, 52, 92, 255))
# Three stacked pages, slightly fanned.
for i, shade in enumerate([(170, 186, 214), (205, 216, 235), (245, 247, 252)]):
    o = i * 34
    d.rounded_rectangle([230 + o, 200 + o, 700 + o, 760 + o], radius=36, fill=shade + (255,))
for k in range(6):
    y = 340 + k * 62
    d.rounded_rectangle([330, y, 700 if k % 3 else 620, y + 22], radius=11, fill=(120, 136, 170, 255))
# The lens.
d.ellipse([560, 560, 840, 840], outline=(255, 196, 61, 255), width=56)
d.line([800, 800, 900, 900], fill=(255, 196, 61, 255), width=70)
img.save(sys.argv[1] if len(sys.argv) > 1 else "icon-source.png")
