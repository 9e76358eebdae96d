"""Regenerates the JPEG fixtures and PIL's pixels for them (the reference
the Go decoders are compared with):

    /usr/bin/python3 vision/testdata/gen.py

Writes <name>.jpg, <name>.full.rgb.gz (PIL's decode, RGB) and, for each
box in cases.json, <name>.<i>.rgb.gz (PIL's resize(size, BILINEAR,
box) of that decode).
"""

import gzip
import io
import json
import os

import numpy as np
from PIL import Image, features

HERE = os.path.dirname(os.path.abspath(__file__))


def photo(w, h, seed):
    rng = np.random.default_rng(seed)
    x = np.arange(w)[None, :] / w
    y = np.arange(h)[:, None] / h
    a, b, c = rng.uniform(2, 9, 3)
    img = np.stack([127 + 110 * np.sin(a * x + b * y), 127 + 110 * np.cos(b * x * y + c * x),
                    127 + 110 * np.sin(c * y + a * x * x)], -1)
    img += rng.normal(0, 10, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


FIXTURES = {
    "yuv420": (96, 72, dict(quality=90)),
    "yuv444": (96, 72, dict(quality=95, subsampling=0)),
    "yuv422": (96, 72, dict(quality=85, subsampling=1)),
    "gray": (96, 72, dict(quality=90), "L"),
    "progressive": (96, 72, dict(quality=90, progressive=True)),
    "odd": (61, 47, dict(quality=80)),
}

# (box, output size): a large crop (reduced DCT scale), a crop kept at its
# size (a shift only), an upscale, the whole image.
BOXES = [((10, 5, 90, 65), (24, 18)), ((7, 3, 50, 40), (43, 37)), ((20, 12, 40, 30), (48, 40)),
         (None, (32, 32))]


def write_gz(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(gzip.compress(data, mtime=0))


def main():
    assert features.check_feature("libjpeg_turbo")
    cases = []
    for i, (name, spec) in enumerate(sorted(FIXTURES.items())):
        w, h, opts = spec[:3]
        img = photo(w, h, i)
        if len(spec) > 3:
            img = img.convert(spec[3])
        buf = io.BytesIO()
        img.save(buf, "JPEG", **opts)
        with open(os.path.join(HERE, name + ".jpg"), "wb") as f:
            f.write(buf.getvalue())
        dec = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
        write_gz(name + ".full.rgb.gz", dec.tobytes())
        boxes = []
        for j, (box, size) in enumerate(BOXES):
            box = box or (0, 0, w, h)
            box = (box[0], box[1], min(box[2], w), min(box[3], h))
            out = dec.resize(size, Image.BILINEAR, box=box)
            write_gz("%s.%d.rgb.gz" % (name, j), out.tobytes())
            boxes.append({"box": box, "size": size})
        cases.append({"name": name, "width": w, "height": h, "boxes": boxes})
    # CMYK (Adobe, inverted): libjpeg has no RGB conversion for it, the
    # pure-Go decoder takes it; PIL's RGB of it for reference.
    img = photo(40, 30, 99).convert("CMYK")
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    with open(os.path.join(HERE, "cmyk.jpg"), "wb") as f:
        f.write(buf.getvalue())
    write_gz("cmyk.full.rgb.gz", Image.open(io.BytesIO(buf.getvalue())).convert("RGB").tobytes())
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
