"""Decoded image columns: ``StreamingDataset(..., decode_images=[...])``.

A DecodeImage names an encoded image column (MDS ``jpeg``, ``png`` or
``bytes``) and how to deliver it: a ``uint8`` array of a fixed size, CHW
(torch) or HWC, optionally a random-resized crop (torchvision's
RandomResizedCrop) and a horizontal flip. The random choices come from a
per-sample generator seeded by (seed, shuffle_seed, epoch, sample id), so
a resumed run, another worker count or another world size sees the same
augmentation of a sample.

Through the shared-memory feed (StreamingDataLoader with torch's default
collate, see docs/images.md) the agent decodes on all cores (package
vision: pure Go in the default build, libjpeg-turbo in a ``-tags libjpeg``
build) and the batch arrives as one ``uint8`` tensor viewing shared
memory. On every other path (worker processes, plain iteration) this
module applies the same crop and flip with PIL: the pixels are then
PIL's, which equal the libjpeg build's with ``full_decode=True`` exactly
and are within a few levels of the pure-Go decoder's.
"""

import io
import math

from . import errors

_M = (1 << 64) - 1

# The most pixels (width x height) a source image may declare, as the
# agent's decoder (vision.DefaultMaxPixels: 64 Mpx, 192 MB of RGB); an
# image declaring more is refused from its header, before it is decoded.
DEFAULT_MAX_PIXELS = 1 << 26

# The encodings both decoders read (the agent's vision package: JPEG and
# PNG); PIL would open many more, so a column would decode on one path and
# fail on the other.
_FORMATS = ("JPEG", "PNG")


class DecodeImage:
    """How to decode one image column.

    column: the column's name. size: output (height, width), or one int
    for a square. crop: "random_resized" or "none" (the whole image
    resized). scale, ratio: RandomResizedCrop's area and aspect ranges.
    flip: flip horizontally with probability 1/2. layout: "chw" or "hwc".
    seed: mixed with the dataset's shuffle_seed into every sample's draws.
    full_decode: in the libjpeg build, decode at full size before the
    resize (PIL's pixels) instead of at the smallest DCT scale that covers
    the output. max_pixels: the most pixels (width x height) a source image
    may declare (default DEFAULT_MAX_PIXELS); a larger one, or bytes that
    are not a JPEG or PNG image, fail the iteration with CorruptDataError
    naming the column and sample, on either path, before any decoding.
    """

    def __init__(self, column, size, crop="random_resized", scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), flip=False,
                 layout="chw", seed=0, full_decode=False, max_pixels=None):
        if isinstance(size, int):
            size = (size, size)
        size = tuple(int(v) for v in size)
        if len(size) != 2 or min(size) < 1:
            raise ValueError("DecodeImage size %r: want (height, width), both >= 1" % (size,))
        if crop not in ("random_resized", "none"):
            raise ValueError("DecodeImage crop %r: want 'random_resized' or 'none'" % crop)
        if layout not in ("chw", "hwc"):
            raise ValueError("DecodeImage layout %r: want 'chw' or 'hwc'" % layout)
        scale, ratio = tuple(float(v) for v in scale), tuple(float(v) for v in ratio)
        if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
            raise ValueError("DecodeImage scale %r: want 0 < low <= high <= 1" % (scale,))
        if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1] < math.inf:
            raise ValueError("DecodeImage ratio %r: want 0 < low <= high" % (ratio,))
        if not 0 <= int(seed) <= _M:
            raise ValueError("DecodeImage seed %r: want 0 <= seed < 2**64" % seed)
        if max_pixels is not None and not 0 < int(max_pixels) <= _M >> 1:
            raise ValueError("DecodeImage max_pixels %r: want a positive pixel count" % (max_pixels,))
        self.max_pixels = DEFAULT_MAX_PIXELS if max_pixels is None else int(max_pixels)
        self.column, self.size, self.crop, self.scale, self.ratio = str(column), size, crop, scale, ratio
        self.flip, self.layout, self.seed, self.full_decode = bool(flip), layout, int(seed), bool(full_decode)

    def __repr__(self):
        return "DecodeImage(%r, size=%r, crop=%r, flip=%r, layout=%r)" % (self.column, self.size, self.crop, self.flip,
                                                                          self.layout)

    def shape(self):
        h, w = self.size
        return (3, h, w) if self.layout == "chw" else (h, w, 3)

    def mixed_seed(self, shuffle_seed):
        """The generator seed of this column in a dataset with shuffle_seed."""
        return (self.seed * 0x9E3779B97F4A7C15 + int(shuffle_seed)) & _M

    def feed_transform(self, shuffle_seed):
        """The agent's "image" feed transform for this column."""
        p = {"size": list(self.size), "layout": self.layout, "crop": self.crop, "flip": self.flip,
             "seed": self.mixed_seed(shuffle_seed), "full_decode": self.full_decode, "max_pixels": self.max_pixels}
        if self.crop == "random_resized":
            p["scale"], p["ratio"] = list(self.scale), list(self.ratio)
        return {"column": self.column, "transform": "image", "params": p}

    def draw(self, width, height, shuffle_seed, epoch, sample):
        """The crop box (left, top, right, bottom) and the flip the agent
        draws for this sample of an image of width x height."""
        r = _RNG(self.mixed_seed(shuffle_seed), epoch, sample)
        box = (0, 0, width, height)
        if self.crop == "random_resized":
            box = _random_crop(r, width, height, self.scale, self.ratio)
        flip = self.flip and r.float() < 0.5
        return box, flip

    def apply(self, value, shuffle_seed, epoch, sample):
        """Decodes value (encoded bytes or a PIL image) with PIL and applies
        this sample's crop, resize and flip: a numpy uint8 array. Bytes
        that are not a JPEG or PNG, or that declare more than max_pixels,
        raise CorruptDataError before anything is decoded."""
        import numpy as np
        from PIL import Image

        img = self._open(value, sample)
        box, flip = self.draw(img.width, img.height, shuffle_seed, epoch, sample)
        h, w = self.size
        img = img.resize((w, h), Image.BILINEAR, box=box)
        if flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        a = np.asarray(img)
        if self.layout == "chw":
            a = np.ascontiguousarray(a.transpose(2, 0, 1))
        return a

    def _open(self, value, sample):
        """value as an RGB PIL image, its size checked from the header."""
        import numpy as np
        from PIL import Image

        def bad(why):
            return errors.CorruptDataError("column %r of sample %d: bad image: %s" % (self.column, sample, why))

        if isinstance(value, Image.Image):
            img = value  # decoded by the column's decoder (MDS jpeg/png)
        else:
            try:
                img = Image.open(io.BytesIO(bytes(value)), formats=_FORMATS)
            except Image.DecompressionBombError as e:  # beyond PIL's own limit
                raise bad(str(e)) from e
            except Exception as e:  # noqa: BLE001 - PIL raises many kinds on hostile bytes
                raise bad("not a JPEG or PNG (%d bytes): %s" % (len(value), e)) from e
        w, h = img.size
        if w <= 0 or h <= 0 or w * h > self.max_pixels:
            raise bad("%d×%d pixels (limit %d)" % (w, h, self.max_pixels))
        try:
            if img.mode in ("I", "I;16", "I;16B", "I;16L"):
                # 16-bit grey: its high byte, as the agent's decoder (PIL's
                # convert clips such values to 255).
                img = Image.fromarray((np.asarray(img).astype(np.int64) >> 8).clip(0, 255).astype(np.uint8), "L")
            return img.convert("RGB")
        except Exception as e:  # noqa: BLE001 - truncated or corrupt data
            raise bad("%s: %s" % (type(e).__name__, e)) from e


def check(decode_images):
    """decode_images as a list of DecodeImage (None: [])."""
    if decode_images is None:
        return []
    if isinstance(decode_images, DecodeImage):
        decode_images = [decode_images]
    out = list(decode_images)
    for d in out:
        if not isinstance(d, DecodeImage):
            raise TypeError("decode_images: want DecodeImage objects, got %r" % (d,))
    if len({d.column for d in out}) != len(out):
        raise ValueError("decode_images names a column twice")
    return out


def apply_all(decode_images, sample, shuffle_seed, epoch, sample_id):
    """The sample dict with its image columns decoded (Python path)."""
    if not isinstance(sample, dict):
        return sample
    for d in decode_images:
        if d.column in sample:
            sample[d.column] = d.apply(sample[d.column], shuffle_seed, epoch, sample_id)
    return sample


class _RNG:
    """vision's per-sample generator: SplitMix64 over (seed, epoch, sample)."""

    def __init__(self, seed, epoch, sample):
        self.s = (seed ^ 0x51751CE0D1CE0001) & _M
        self.s = self.next() ^ (epoch & _M)
        self.s = self.next() ^ (sample & _M)
        self.next()

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & _M
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
        return z ^ (z >> 31)

    def float(self):
        return (self.next() >> 11) / (1 << 53)

    def intn(self, n):
        return (self.next() * n) >> 64


def _round(x):
    """Go's math.Round for x >= 0 (half away from zero)."""
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


def _random_crop(r, W, H, scale, ratio):
    area = float(W * H)
    lr0, lr1 = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * (scale[0] + r.float() * (scale[1] - scale[0]))
        ar = math.exp(lr0 + r.float() * (lr1 - lr0))
        w = _round(math.sqrt(target * ar))
        h = _round(math.sqrt(target / ar))
        if 0 < w <= W and 0 < h <= H:
            i = r.intn(H - h + 1)
            j = r.intn(W - w + 1)
            return (j, i, j + w, i + h)
    ratio_in = W / H
    w, h = W, H
    if ratio_in < ratio[0]:
        h = _round(w / ratio[0])
    elif ratio_in > ratio[1]:
        w = _round(h * ratio[1])
    w, h = max(min(w, W), 1), max(min(h, H), 1)
    i, j = (H - h) // 2, (W - w) // 2
    return (j, i, j + w, i + h)
