"""Column decoding for MDS, JSON and XSV records (spec §3–§4, §7).

Values come out as MosaicML's readers return them: str, int, float, bytes,
numpy scalars and arrays, PIL images, JSON values, Decimal. numpy and Pillow
are imported only when a column needs them.
"""

import decimal
import io
import json
import mmap
import struct

from . import errors

_U32 = struct.Struct("<I")


class PickleBytes(bytes):
    """Raw bytes of a ``pkl`` column, returned instead of unpickling.

    Unpickling runs arbitrary code; it happens only with
    ``allow_unsafe_types=True``.
    """


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - exercised only without numpy
        raise errors.SluiceError("decoding this column needs numpy; install python3-numpy") from None
    return numpy


def _pil():
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover
        raise errors.SluiceError("decoding this column needs Pillow; install python3-pil") from None
    return Image


_NP_SCALARS = {
    "uint8": ("<u1", "<B"),
    "uint16": ("<u2", "<H"),
    "uint32": ("<u4", "<I"),
    "uint64": ("<u8", "<Q"),
    "int8": ("<i1", "<b"),
    "int16": ("<i2", "<h"),
    "int32": ("<i4", "<i"),
    "int64": ("<i8", "<q"),
    "float16": ("<f2", "<e"),
    "float32": ("<f4", "<f"),
    "float64": ("<f8", "<d"),
}

_NDARRAY_CODES = {
    8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64",
    9: "int8", 17: "int16", 33: "int32", 65: "int64",
    18: "float16", 34: "float32", 66: "float64",
}
_SHAPE_DTYPES = ("<u1", "<u2", "<u4", "<u8")
_SHAPE_STRUCT = ("B", "H", "I", "Q")


def _scalar(enc):
    npdt, st = _NP_SCALARS[enc]
    try:
        import numpy

        dt = numpy.dtype(npdt)
        return lambda b: numpy.frombuffer(b, dt, 1)[0]
    except ImportError:
        s = struct.Struct(st)
        return lambda b: s.unpack(b)[0]


def _ndarray(params):
    np = _numpy()
    parts = params.split(":") if params else []
    dtype = parts[0] if parts and parts[0] else None
    shape = None
    if len(parts) > 1 and parts[1]:
        shape = tuple(int(x) for x in parts[1].split(","))
    if dtype is not None and dtype not in _NDARRAY_CODES.values():
        raise errors.CorruptDataError("ndarray encoding %r: unknown dtype %r" % (params, dtype))

    def dec_range(b, pos, end):
        """Decodes b[pos:end] straight into a new, writable array: one copy
        from the (mapped) shard, none in between."""
        dt = dtype
        if dt is None:
            if end - pos < 1:
                raise errors.CorruptDataError("ndarray value is empty")
            dt = _NDARRAY_CODES.get(b[pos])
            if dt is None:
                raise errors.CorruptDataError("ndarray dtype code %d is unknown" % b[pos])
            pos += 1
        shp = shape
        if shp is None:
            if end - pos < 1:
                raise errors.CorruptDataError("ndarray value has no shape")
            ndim, code = b[pos] >> 2, b[pos] & 3
            pos += 1
            fmt = "<%d%s" % (ndim, _SHAPE_STRUCT[code])
            size = struct.calcsize(fmt)
            if ndim == 0 or end - pos < size:
                raise errors.CorruptDataError("ndarray shape is truncated")
            shp = struct.unpack_from(fmt, b, pos)
            pos += size
        npdt = np.dtype(dt).newbyteorder("<")
        count = 1
        for d in shp:
            count *= d
        if count * npdt.itemsize != end - pos:
            raise errors.CorruptDataError(
                "ndarray of shape %s and dtype %s needs %d bytes, record has %d" % (shp, dt, count * npdt.itemsize, end - pos)
            )
        arr = np.frombuffer(b, npdt, count, pos).reshape(shp)
        if type(b) is mmap.mmap and arr.flags.writeable:
            # A copy-on-write shard mapping (DataLoader workers): the
            # array views it, writable, with no copy.
            return arr
        return arr.copy()

    def dec(b):
        return dec_range(b, 0, len(b))

    dec.ranged = dec_range
    return dec


def _pil_raw(b):
    Image = _pil()
    if len(b) < 12:
        raise errors.CorruptDataError("pil value is truncated")
    w, h, n = struct.unpack_from("<III", b, 0)
    mode = bytes(b[12 : 12 + n]).decode("ascii")
    return Image.frombytes(mode, (w, h), bytes(b[12 + n :]))


def _image_file(b):
    Image = _pil()
    return Image.open(io.BytesIO(bytes(b)))


def _jpeg_array(b):
    if len(b) < 4:
        raise errors.CorruptDataError("jpeg_array value is truncated")
    (n,) = _U32.unpack_from(b, 0)
    if n == 0 or 4 + 4 * n > len(b):
        raise errors.CorruptDataError("jpeg_array holds %d images in %d bytes" % (n, len(b)))
    sizes = struct.unpack_from("<%dI" % n, b, 4)
    pos = 4 + 4 * n
    out = []
    for s in sizes:
        if pos + s > len(b):
            raise errors.CorruptDataError("jpeg_array image runs past the record")
        out.append(_image_file(b[pos : pos + s]))
        pos += s
    return out


def _image_list(elem):
    def dec(b):
        if len(b) < 8:
            raise errors.CorruptDataError("image list is truncated")
        _, n = struct.unpack_from("<II", b, 0)
        if 8 + 4 * n > len(b):
            raise errors.CorruptDataError("image list holds %d images in %d bytes" % (n, len(b)))
        sizes = struct.unpack_from("<%dI" % n, b, 8)
        pos = 8 + 4 * n
        out = []
        for s in sizes:
            if pos + s > len(b):
                raise errors.CorruptDataError("image list element runs past the record")
            out.append(elem(b[pos : pos + s]))
            pos += s
        return out

    return dec


def _str_float(b):
    return float(bytes(b).decode("ascii"))


def column_decoder(enc, allow_unsafe=False):
    """Returns a function decoding one column value of encoding enc."""
    name, _, params = enc.partition(":")
    if name == "bytes":
        return bytes
    if name == "str":
        return lambda b: str(b, "utf-8")
    if name == "int":
        return lambda b: int.from_bytes(b, "little", signed=True)
    if name in _NP_SCALARS:
        return _scalar(name)
    if name == "str_int":
        return lambda b: int(str(b, "ascii"))
    if name == "str_float":
        return _str_float
    if name == "str_decimal":
        return lambda b: decimal.Decimal(str(b, "ascii"))
    if name == "json":
        return lambda b: json.loads(str(b, "utf-8"))
    if name == "pkl":
        if allow_unsafe:
            import pickle

            return lambda b: pickle.loads(bytes(b))
        return PickleBytes
    if name == "ndarray":
        return _ndarray(params)
    if name == "pil":
        return _pil_raw
    if name in ("jpeg", "png"):
        return _image_file
    if name in ("jpeg_array", "jpegarray"):
        return _jpeg_array
    if name == "list[pil]":
        return _image_list(_pil_raw)
    if name in ("list[jpeg]", "list[png]"):
        return _image_list(_image_file)
    raise errors.CorruptDataError("unknown column encoding %r" % enc)


def mds_decoder(schema, allow_unsafe=False):
    """Returns a function mapping an MDS record to a dict of columns."""
    names = schema["column_names"]
    encs = schema["column_encodings"]
    sizes = schema["column_sizes"]
    if not (len(names) == len(encs) == len(sizes)):
        raise errors.CorruptDataError("schema column lists differ in length")
    decs = [column_decoder(e, allow_unsafe) for e in encs]
    nvar = sum(1 for s in sizes if s is None)
    lens = struct.Struct("<%dI" % nvar)
    # Decoders with a ranged form read their value in place (no slice).
    cols = [(n, sz, getattr(d, "ranged", None), d) for n, sz, d in zip(names, sizes, decs)]
    start = 4 * nvar

    def decode(buf, off=0, length=None):
        """Decodes the record at buf[off:off+length] (buf: bytes, mmap or
        memoryview). Each column is sliced straight from buf, so a value
        costs one copy at most."""
        if length is None:
            length = len(buf) - off
        end_rec = off + length
        if nvar:
            if length < start:
                raise errors.CorruptDataError("record of %d bytes is shorter than its %d column lengths" % (length, nvar))
            vl = lens.unpack_from(buf, off)
        pos, vi, out = off + start, 0, {}
        for name, size, ranged, dec in cols:
            if size is None:
                n = vl[vi]
                vi += 1
            else:
                n = size
            end = pos + n
            if end > end_rec:
                raise errors.CorruptDataError("column %r runs past the end of its %d-byte record" % (name, length))
            out[name] = ranged(buf, pos, end) if ranged else dec(buf[pos:end])
            pos = end
        return out

    return decode


def json_decoder(schema, allow_unsafe=False):
    """Decodes a MosaicML JSON-lines record."""

    def decode(buf, off=0, length=None):
        rec = buf[off:] if length is None else buf[off : off + length]
        obj = json.loads(str(rec, "utf-8"))
        if not isinstance(obj, dict):
            raise errors.CorruptDataError("json record is not an object")
        return obj

    return decode


def xsv_decoder(schema, allow_unsafe=False):
    """Decodes a CSV/TSV/XSV record: fields split by the separator."""
    sep = schema.get("separator") or {"csv": ",", "tsv": "\t"}.get(schema.get("format"), ",")
    names = schema["column_names"]
    conv = []
    for e in schema["column_encodings"]:
        conv.append({"str": str, "int": int, "float": float}.get(e, str))

    def decode(buf, off=0, length=None):
        rec = buf[off:] if length is None else buf[off : off + length]
        text = str(rec, "utf-8").rstrip("\n").rstrip("\r")
        fields = text.split(sep)
        if len(fields) != len(names):
            raise errors.CorruptDataError("xsv record has %d fields, schema %d" % (len(fields), len(names)))
        return {n: c(f) for n, c, f in zip(names, conv, fields)}

    return decode


def record_decoder(schema, allow_unsafe=False):
    """Returns the record decoder for a shard schema from the agent."""
    fmt = schema.get("format", "mds")
    if fmt == "mds":
        return mds_decoder(schema, allow_unsafe)
    if fmt == "json":
        return json_decoder(schema, allow_unsafe)
    if fmt in ("csv", "tsv", "xsv"):
        return xsv_decoder(schema, allow_unsafe)
    if fmt == "wds":
        from . import _wdstar

        return _wdstar.record_decoder(schema, allow_unsafe)
    raise errors.CorruptDataError("unsupported shard format %r" % fmt)
