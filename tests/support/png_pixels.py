"""Reads a PNG with Pillow (a decoder dawnpost does not use) and prints, as one JSON object,
its size and the RGB colour at each x,y given: png_pixels.py FILE X,Y [X,Y ...]."""
import json
import sys

from PIL import Image

image = Image.open(sys.argv[1])
image.load()
rgb = image.convert("RGB")
points = [tuple(int(v) for v in p.split(",")) for p in sys.argv[2:]]
print(json.dumps({
    "format": image.format,
    "size": list(image.size),
    "pixels": [list(rgb.getpixel(p)) for p in points],
}))
