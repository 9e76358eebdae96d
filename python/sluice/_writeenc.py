"""Column encoders of the Python writers: Python values to frame sections.

Each encoder turns the values of one column over a batch of samples into
one section of a ``sluice write`` frame (see internal/writepipe in the Go
tree). Values that only Python can render exactly (pickle, ``json.dumps``,
Pillow's PNG/JPEG encoders, ``str()`` of ints, floats and Decimals) are
rendered here; scalar values are packed in bulk by ``array``/``struct``;
ndarrays are sent as dtype, shape and data and the MDS ndarray header is
built by the Go encoder. Record layout, shards, hashing, compression and
upload all happen in Go.

As in MosaicML's ``mds_encode``, a ``bytes`` value is stored unchanged
whatever the column's encoding (it must still have a fixed column's size).
"""

import io
import json
import struct
from array import array

KIND_FIXED = 1
KIND_BYTES = 2
KIND_STRING = 3
KIND_INT64 = 4
KIND_FLOAT64 = 5
KIND_NDARRAY = 6
KIND_BIGINT = 7

_U32 = struct.Struct("<I")

# MDS scalar encodings: array typecode (or struct code) and size.
_SCALARS = {
    "uint8": ("B", 1), "uint16": ("H", 2), "uint32": ("I", 4), "uint64": ("Q", 8),
    "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "int": ("q", 8), "float16": ("e", 2), "float32": ("f", 4), "float64": ("d", 8),
}
assert array("I").itemsize == 4 and array("i").itemsize == 4

_NDARRAY_CODES = {
    "uint8": 8, "int8": 9, "uint16": 16, "int16": 17, "float16": 18,
    "uint32": 32, "int32": 33, "float32": 34, "uint64": 64, "int64": 65, "float64": 66,
}

MDS_ENCODINGS = sorted(
    list(_SCALARS) + ["bytes", "str", "str_int", "str_float", "str_decimal", "json", "pkl",
                      "ndarray", "pil", "jpeg", "png", "jpeg_array", "list[pil]", "list[jpeg]",
                      "list[png]"]
)


class EncodeError(ValueError):
    """A value that its column's encoding cannot store (``offset`` is the
    value's position in the batch)."""

    def __init__(self, offset, column, msg, exc_type=ValueError):
        super().__init__(msg)
        self.offset = offset
        self.column = column
        self.exc_type = exc_type


def _var_section(kind, items):
    lens = array("I", map(len, items))
    return [bytes([kind]), lens.tobytes(), b"".join(items)]


def _per_value(column, vals, conv):
    out = []
    for i, v in enumerate(vals):
        if type(v) is bytes:
            out.append(v)
            continue
        try:
            out.append(conv(v))
        except EncodeError:
            raise
        except (TypeError, ValueError, OverflowError, AttributeError, KeyError, OSError, struct.error) as e:
            kind = ValueError if isinstance(e, (struct.error, OverflowError)) else type(e)
            raise EncodeError(i, column, "column %r: %s" % (column, e), kind) from e
    return out


def _np():
    try:
        import numpy
    except ImportError:  # pragma: no cover
        return None
    return numpy


class _Fixed:
    """A fixed-size scalar column (int, uintN, intN, floatN)."""

    def __init__(self, column, enc):
        self.column, self.enc = column, enc
        self.code, self.size = _SCALARS[enc]
        self.struct = struct.Struct("<" + self.code)

    def _one(self, v):
        if type(v) is bytes:
            if len(v) != self.size:
                raise KeyError("Unexpected data size; was this data typed with the correct encoding (%s)?" % self.enc)
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            np = _np()
            if np is not None and isinstance(v, np.generic):
                return np.asarray(v).astype(self._npdtype(np)).tobytes()
        if self.code in "efd":
            return self.struct.pack(float(v))
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError("%r cannot be stored as %s" % (v, self.enc))
            v = int(v)  # numpy truncates a float given to an int encoding
        return self.struct.pack(v)

    def _npdtype(self, np):
        return np.dtype("int64" if self.enc == "int" else self.enc).newbyteorder("<")

    def _numpy(self, vals):
        np = _np()
        if np is None or not vals or not isinstance(vals[0], np.generic):
            return None
        try:
            arr = np.array(vals)
        except (TypeError, ValueError):
            return None
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            return None
        # numpy scalars keep their exact bits (a NaN's payload too).
        return arr.astype(self._npdtype(np)).tobytes()

    def section(self, vals):
        data = self._numpy(vals)
        if data is None:
            try:
                if self.code == "e":
                    data = struct.pack("<%de" % len(vals), *vals)
                else:
                    data = array(self.code, vals).tobytes()
            except (TypeError, OverflowError, struct.error, ValueError):
                data = b"".join(_per_value(self.column, vals, self._one))
        return [bytes([KIND_FIXED]), _U32.pack(self.size), data]


class _Var:
    """A variable-size column whose values Python renders to bytes."""

    def __init__(self, column, conv, fast=None):
        self.column, self.conv, self.fast = column, conv, fast

    def section(self, vals):
        items = None
        if self.fast is not None:
            try:
                items = self.fast(vals)
            except (TypeError, AttributeError, UnicodeError, OverflowError):
                items = None
        if items is None:
            items = _per_value(self.column, vals, self.conv)
        if isinstance(items, _Joined):
            return [bytes([KIND_BYTES]), items.lens.tobytes(), items.data]
        return _var_section(KIND_BYTES, items)


class _Joined:
    """Values already joined: one blob and its lengths (the fast path)."""

    __slots__ = ("data", "lens")

    def __init__(self, data, lens):
        self.data, self.lens = data, lens


def _str_fast(vals):
    # All-ASCII text (the common case) is encoded in one piece: when the
    # UTF-8 of the joined text is as long as the text, every character
    # is one byte, and the values' lengths are their str lengths.
    data = "".join(vals).encode("utf-8")
    lens = array("I", map(len, vals))
    if len(data) == sum(lens):
        return _Joined(data, lens)
    return [v.encode("utf-8") for v in vals]


def _bytes_fast(vals):
    return _Joined(b"".join(vals), array("I", map(len, vals)))


def _bytes_only(v):
    if type(v) is bytes:
        return v
    raise TypeError


def _str(v):
    if not isinstance(v, str):
        raise TypeError("str column takes str, got %s" % type(v).__name__)
    return v.encode("utf-8")


def _bytes(v):
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError("bytes column takes bytes, got %s" % type(v).__name__)


def _str_int(v):
    if isinstance(v, bool) or not isinstance(v, int):
        np = _np()
        if not (np is not None and isinstance(v, np.integer)):
            raise TypeError("str_int column takes int, got %s" % type(v).__name__)
    return str(int(v)).encode("ascii")


def _str_float(v):
    if not isinstance(v, float):
        raise TypeError("str_float column takes float, got %s" % type(v).__name__)
    return str(v).encode("ascii")


def _str_decimal(v):
    import decimal

    if not isinstance(v, decimal.Decimal):
        raise TypeError("str_decimal column takes decimal.Decimal, got %s" % type(v).__name__)
    return str(v).encode("ascii")


def _json(v):
    np = _np()
    if np is not None and isinstance(v, np.ndarray):
        v = v.tolist()
    return json.dumps(v).encode("utf-8")


def _pickle(v):
    import pickle

    return pickle.dumps(v)


def _image_check(v):
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover
        raise TypeError("image columns need Pillow")
    if not isinstance(v, Image.Image):
        raise TypeError("image column takes a PIL image, got %s" % type(v).__name__)
    return Image


def _pil(v):
    _image_check(v)
    mode = v.mode.encode("utf-8")
    w, h = v.size
    return struct.pack("<III", w, h, len(mode)) + mode + v.tobytes()


def _jpeg_of(quality):
    def enc(v):
        _image_check(v)
        from PIL.JpegImagePlugin import JpegImageFile

        name = getattr(v, "filename", "")
        if isinstance(v, JpegImageFile) and name:
            # The source file, as MosaicML does: no lossy re-encoding.
            with open(name, "rb") as f:
                return f.read()
        out = io.BytesIO()
        v.save(out, format="JPEG", quality=quality)
        return out.getvalue()

    return enc


def _png(v):
    _image_check(v)
    out = io.BytesIO()
    v.save(out, format="PNG")
    return out.getvalue()


def _list_of(elem):
    def enc(v):
        if not isinstance(v, (list, tuple)):
            raise TypeError("image list column takes a list, got %s" % type(v).__name__)
        items = [x if type(x) is bytes else elem(x) for x in v]
        return b"".join([_U32.pack(0), _U32.pack(len(items)), array("I", map(len, items)).tobytes()] + items)

    return enc


def _jpeg_array(quality):
    jpeg = _jpeg_of(quality)

    def enc(v):
        if not isinstance(v, (list, tuple)):
            raise TypeError("jpeg_array column takes a list of images, got %s" % type(v).__name__)
        items = [x if type(x) is bytes else jpeg(x) for x in v]
        return b"".join([_U32.pack(len(items)), array("I", map(len, items)).tobytes()] + items)

    return enc


class _NDArray:
    """An ndarray column: dtype code, shape and data go to Go, which builds
    the MDS ndarray header (static or dynamic dtype and shape)."""

    def __init__(self, column, params):
        self.column = column
        parts = params.split(":") if params else []
        self.dtype = parts[0] if parts else None
        self.shape = tuple(int(x) for x in parts[1].split(",")) if len(parts) > 1 else None

    def _one(self, v):
        if type(v) is bytes:
            return b"\x00" + v  # dtype code 0: stored unchanged
        np = _np()
        if np is None or not isinstance(v, np.ndarray):
            raise TypeError("ndarray column takes a numpy array, got %s" % type(v).__name__)
        name = v.dtype.name
        code = _NDARRAY_CODES.get(name)
        if code is None:
            raise ValueError("Unsupported dtype: %s." % name)
        if self.dtype is not None and name != self.dtype:
            raise ValueError("Wrong dtype: expected %s, got %s." % (self.dtype, name))
        if v.ndim == 0:
            raise ValueError("Attempting to encode a scalar with NDArray encoding. Please use a scalar encoding.")
        if v.size == 0:
            raise ValueError("Attempting to encode a numpy array with 0 elements.")
        if v.ndim >= 64:
            raise ValueError("Array has too many axes: maximum 63, got %d." % v.ndim)
        if self.shape is not None and tuple(v.shape) != self.shape:
            raise ValueError("Wrong shape: expected %s, got %s." % (self.shape, tuple(v.shape)))
        if v.dtype.byteorder == ">":
            v = v.astype(v.dtype.newbyteorder("<"))
        return struct.pack("<BB%dQ" % v.ndim, code, v.ndim, *v.shape) + v.tobytes()

    def section(self, vals):
        items = []
        for i, v in enumerate(vals):
            try:
                items.append(self._one(v))
            except (TypeError, ValueError) as e:
                raise EncodeError(i, self.column, "column %r: %s" % (self.column, e), type(e)) from e
        return _var_section(KIND_NDARRAY, items)


def mds_encoder(column, enc, allow_pickle=False):
    """Returns the section encoder of an MDS column, or raises TypeError
    for an encoding MDS does not have."""
    name, _, params = enc.partition(":")
    if enc in _SCALARS:
        return _Fixed(column, enc)
    if enc == "str":
        return _Var(column, _str, _str_fast)
    if enc == "bytes":
        return _Var(column, _bytes, _bytes_fast)
    if enc == "str_int":
        return _Var(column, _str_int)
    if enc == "str_float":
        return _Var(column, _str_float)
    if enc == "str_decimal":
        return _Var(column, _str_decimal)
    if enc == "json":
        return _Var(column, _json)
    if enc == "pkl":
        if not allow_pickle:
            raise ValueError(
                "column %r: pkl columns run pickle; pass allow_unsafe_types=True to write them" % column
            )
        return _Var(column, _pickle)
    if name == "ndarray":
        return _NDArray(column, params)
    if enc == "pil":
        return _Var(column, _pil)
    if name == "jpeg":
        return _Var(column, _jpeg_of(int(params) if params else 75))
    if enc == "png":
        return _Var(column, _png)
    if name in ("jpeg_array", "jpegarray"):
        return _Var(column, _jpeg_array(int(params) if params else 75))
    if enc == "list[pil]":
        return _Var(column, _list_of(_pil))
    if enc == "list[jpeg]":
        return _Var(column, _list_of(_jpeg_of(75)))
    if enc == "list[png]":
        return _Var(column, _list_of(_png))
    raise TypeError(
        "MDSWriter passed column %r with encoding %r is unsupported. Supported encodings are %s"
        % (column, enc, MDS_ENCODINGS)
    )


class _Typed:
    """A JSON/XSV column: typed values that the Go writer renders."""

    def __init__(self, column, enc, forbidden=()):
        if enc not in ("str", "int", "float"):
            raise TypeError("column %r: encoding %r is not one of str, int, float" % (column, enc))
        self.column, self.enc = column, enc
        self.forbidden = [f for f in forbidden if f]

    def section(self, vals):
        c = self.column
        if self.enc == "str":
            items = []
            for i, v in enumerate(vals):
                if not isinstance(v, str):
                    raise EncodeError(i, c, "column %r: str column takes str, got %s" % (c, type(v).__name__))
                for f in self.forbidden:
                    if f in v:
                        raise EncodeError(i, c, "column %r: value %.40r contains the separator or the newline" % (c, v))
                items.append(v.encode("utf-8"))
            return _var_section(KIND_STRING, items)
        if self.enc == "int":
            for i, v in enumerate(vals):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise EncodeError(i, c, "column %r: int column takes int, got %s" % (c, type(v).__name__))
            try:
                return [bytes([KIND_INT64]), array("q", vals).tobytes()]
            except OverflowError:
                return _var_section(KIND_BIGINT, [str(v).encode("ascii") for v in vals])
        for i, v in enumerate(vals):
            if not isinstance(v, float):
                raise EncodeError(i, c, "column %r: float column takes float, got %s" % (c, type(v).__name__))
        return [bytes([KIND_FLOAT64]), array("d", vals).tobytes()]


def typed_encoder(column, enc, forbidden=()):
    """Returns the section encoder of a JSON, CSV, TSV or XSV column;
    forbidden lists texts a str value must not contain (an XSV separator
    and newline), refused here so that the writer stays usable."""
    return _Typed(column, enc, forbidden)
