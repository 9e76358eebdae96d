"""WebDataset samples from tar records, and WebDataset's decoders.

The agent hands out each sample of a tar shard as the byte range of its
members (headers and data: a small tar stream of its own). ``TarRecord``
turns that range into WebDataset's sample dict: ``__key__``, ``__url__``
and one bytes value per field, named and grouped by WebDataset's rules
(the key is the member path up to the first dot of its base name, the
field the rest, lowercased; non-regular members and ``__meta__`` names are
skipped). The Go side has already validated the shard (sizes, names,
duplicates), so this parser only has to read valid USTAR, GNU and PAX
headers fast.

``Decoder`` and ``imagehandler`` implement ``.decode(...)``: image specs
("pil", "rgb", "rgb8", "torchrgb", "l", "l8", ...), custom handlers
``f(key, data)`` returning ``None`` to pass, and WebDataset's basic
handlers for the other extensions.
"""

import io
import json
import re

from . import errors

_ZERO = bytes(512)
_REGULAR = (b"0", b"\0", b"7", b"")


def _octal(field):
    if field and field[0] & 0x80:
        # Base-256 (GNU) for sizes of 8 GiB and more.
        return int.from_bytes(bytes([field[0] & 0x7F]) + bytes(field[1:]), "big")
    s = bytes(field).strip(b"\0 ")
    return int(s, 8) if s else 0


def _pax_records(data):
    out = {}
    pos = 0
    n = len(data)
    while pos < n:
        sp = data.find(b" ", pos)
        if sp < 0:
            break
        ln = int(data[pos:sp])
        if ln <= 0:
            break
        rec = data[sp + 1 : pos + ln - 1]
        k, _, v = rec.partition(b"=")
        out[k] = v
        pos += ln
    return out


_META = re.compile(r"__[^/]*__($|/)")


def _is_meta(name):
    if not name.startswith("__"):
        return False
    if "/" not in name and name.endswith("__"):
        return True
    return _META.match(name) is not None


def split_name(name):
    """WebDataset's base_plus_ext rule, with the suffix lowercased."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot <= slash + 1:
        return None, None
    return name[:dot], name[dot + 1 :].lower()


def parse_members(buf, off, length):
    """Yields (name, start, size) for the regular members in buf[off:off+length]."""
    pos = off
    end = off + length
    long_name = None
    pax = None
    while pos + 512 <= end:
        if buf[pos] == 0 and buf[pos : pos + 512] == _ZERO:
            return
        sz = buf[pos + 124 : pos + 136]
        if sz[0] & 0x80:
            size = _octal(sz)
        else:
            sz = sz.strip(b"\0 ")
            size = int(sz, 8) if sz else 0
        typ = buf[pos + 156 : pos + 157]
        data = pos + 512
        if typ in _REGULAR and pax is None and long_name is None:
            raw = buf[pos : pos + 100]
            nul = raw.find(b"\0")
            if nul >= 0:
                raw = raw[:nul]
            if buf[pos + 257 : pos + 263] == b"ustar\0" and buf[pos + 345] != 0:
                prefix = buf[pos + 345 : pos + 500].split(b"\0", 1)[0]
                raw = prefix + b"/" + raw
            yield raw.decode("utf-8", "surrogateescape"), data, size
        elif typ == b"x":
            pax = _pax_records(bytes(buf[data : data + size]))
        elif typ == b"L":
            long_name = bytes(buf[data : data + size]).rstrip(b"\0")
        elif typ in (b"g", b"K"):
            pass
        else:
            if pax is not None and b"size" in pax:
                size = int(pax[b"size"])
            if typ in _REGULAR:
                if pax is not None and b"path" in pax:
                    raw = pax[b"path"]
                elif long_name is not None:
                    raw = long_name
                else:
                    raw = bytes(buf[pos : pos + 100]).split(b"\0", 1)[0]
                    if buf[pos + 257 : pos + 263] == b"ustar\0":
                        prefix = bytes(buf[pos + 345 : pos + 500]).split(b"\0", 1)[0]
                        if prefix:
                            raw = prefix + b"/" + raw
                yield raw.decode("utf-8", "surrogateescape"), data, size
            long_name = None
            pax = None
        pos = data + ((size + 511) & ~511)


class TarRecord:
    """Decodes one tar sample record into WebDataset's raw sample dict."""

    __slots__ = ("url",)

    def __init__(self, url=None):
        self.url = url

    def __call__(self, buf, off=0, length=None):
        if length is None:
            length = len(buf) - off
        if isinstance(buf, memoryview):
            buf, off = bytes(buf[off : off + length]), 0
        sample = {"__key__": None, "__url__": self.url}
        for name, start, size in parse_members(buf, off, length):
            if _is_meta(name):
                continue
            key, field = split_name(name)
            if key is None:
                continue
            if sample["__key__"] is None:
                sample["__key__"] = key
            sample[field] = bytes(buf[start : start + size])
        return sample


def record_decoder(schema, allow_unsafe=False):
    """The record decoder of tar shards (format "wds")."""
    return TarRecord()


# -- decoding ---------------------------------------------------------------

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "ppm", "pgm", "pbm", "pnm")

# spec -> (PIL mode or None, kind: "numpy8", "numpy", "torch8", "torch", "pil")
_IMAGE_SPECS = {
    "l8": ("L", "numpy8"),
    "rgb8": ("RGB", "numpy8"),
    "rgba8": ("RGBA", "numpy8"),
    "l": ("L", "numpy"),
    "rgb": ("RGB", "numpy"),
    "rgba": ("RGBA", "numpy"),
    "torchl8": ("L", "torch8"),
    "torchrgb8": ("RGB", "torch8"),
    "torchrgba8": ("RGBA", "torch8"),
    "torchl": ("L", "torch"),
    "torchrgb": ("RGB", "torch"),
    "torchrgba": ("RGBA", "torch"),
    "pill": ("L", "pil"),
    "pilrgb": ("RGB", "pil"),
    "pilrgba": ("RGBA", "pil"),
    "pil": (None, "pil"),
}


def _ext(key):
    return key.rsplit(".", 1)[-1].lower()


class imagehandler:
    """Decodes image fields as WebDataset's imagehandler(spec) does."""

    def __init__(self, imagespec, extensions=IMAGE_EXTENSIONS):
        spec = imagespec.lower()
        if spec not in _IMAGE_SPECS:
            raise ValueError("unknown image decoding spec %r (one of %s)" % (imagespec, ", ".join(sorted(_IMAGE_SPECS))))
        self.imagespec = spec
        self.mode, self.kind = _IMAGE_SPECS[spec]
        self.extensions = tuple(e.lower() for e in extensions)

    def __call__(self, key, data):
        if _ext(key) not in self.extensions:
            return None
        try:
            from PIL import Image
        except ImportError:  # pragma: no cover
            raise errors.SluiceError("decoding images needs Pillow; install python3-pil") from None
        img = Image.open(io.BytesIO(data))
        img.load()
        if self.mode is not None:
            img = img.convert(self.mode)
        if self.kind == "pil":
            return img
        import numpy as np

        a = np.asarray(img)
        if self.kind in ("numpy", "torch"):
            a = a.astype(np.float32) / 255.0
        if self.kind in ("torch8", "torch"):
            import torch

            t = torch.from_numpy(np.ascontiguousarray(a))
            return t.permute(2, 0, 1) if t.ndim == 3 else t
        return a


def _basic(key, data):
    ext = _ext(key)
    if ext in ("txt", "text", "transcript"):
        return data.decode("utf-8")
    if ext in ("cls", "cls2", "class", "count", "index", "inx", "id"):
        try:
            return int(data)
        except ValueError:
            return None
    if ext in ("json", "jsn"):
        return json.loads(data)
    if ext in ("npy",):
        import numpy as np

        return np.load(io.BytesIO(data), allow_pickle=False)
    if ext in ("npz",):
        import numpy as np

        return np.load(io.BytesIO(data), allow_pickle=False)
    if ext in ("mp", "msgpack", "msg"):
        try:
            import msgpack
        except ImportError:
            return None
        return msgpack.unpackb(data)
    # pyd/pickle/pth are left as bytes: Sluice never unpickles.
    return None


def handle_extension(extensions, fn):
    """A handler applying fn(data) to fields whose last extensions match."""
    exts = [e.lower() for e in extensions.split()]

    def h(key, data):
        k = key.lower()
        for e in exts:
            if k == e or k.endswith("." + e):
                return fn(data)
        return None

    return h


class Decoder:
    """Applies handlers to each field of a sample, WebDataset's way: the
    first handler returning something other than None wins; fields whose
    name starts with "_" and values that are not bytes are left alone."""

    def __init__(self, handlers, only=None, partial=False):
        self.handlers = []
        for h in handlers:
            if isinstance(h, str):
                h = imagehandler(h)
            elif not callable(h):
                raise ValueError("decode: %r is neither an image spec nor a handler" % (h,))
            self.handlers.append(h)
        self.handlers.append(_basic)
        if isinstance(only, str):
            only = only.split()
        self.only = None if only is None else set(only)
        self.partial = partial

    def __call__(self, sample):
        out = {}
        for k, v in sample.items():
            if k.startswith("_") or not isinstance(v, (bytes, bytearray, memoryview)):
                out[k] = v
                continue
            if self.only is not None and k not in self.only:
                out[k] = v
                continue
            v = bytes(v)
            for h in self.handlers:
                r = h(k, v)
                if r is not None:
                    v = r
                    break
            out[k] = v
        return out
