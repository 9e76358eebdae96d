"""A minimal MDS writer for tests (spec §2-§4): uncompressed shards, the
index.json MosaicML writes. Values are encoded here independently of the
client's decoders, so the tests check one against the other."""

import json
import os
import struct

_FIXED = {"int": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2,
          "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8}
_FMT = {"int": "<q", "uint8": "<B", "uint16": "<H", "uint32": "<I", "uint64": "<Q", "int8": "<b",
        "int16": "<h", "int32": "<i", "int64": "<q", "float16": "<e", "float32": "<f", "float64": "<d"}


def encode(enc, v):
    if isinstance(v, bytes):
        return v
    if enc in _FMT:
        return struct.pack(_FMT[enc], v)
    if enc == "str":
        return v.encode("utf-8")
    if enc == "json":
        return json.dumps(v).encode("utf-8")
    if enc == "str_int":
        return str(v).encode()
    if enc == "str_float":
        return repr(float(v)).encode()
    if enc.startswith("ndarray"):
        import numpy as np

        parts = enc.split(":")
        a = np.ascontiguousarray(v)
        out = b""
        codes = {"uint8": 8, "int16": 17, "float32": 34, "int64": 65}
        if len(parts) < 2 or not parts[1]:
            out += bytes([codes[a.dtype.name]])
        if len(parts) < 3:
            out += bytes([(a.ndim << 2) | 0]) + bytes(a.shape)
        return out + a.astype(a.dtype.newbyteorder("<")).tobytes()
    raise ValueError("test writer cannot encode %s" % enc)


def fixed_size(enc):
    if enc in _FIXED:
        return _FIXED[enc]
    if enc.startswith("ndarray:"):
        parts = enc.split(":")
        if len(parts) == 3:
            import numpy as np

            n = 1
            for d in parts[2].split(","):
                n *= int(d)
            return n * np.dtype(parts[1]).itemsize
    return None


def write(directory, columns, samples, size_limit=1 << 12):
    """Writes samples (dicts) under directory with the given columns."""
    os.makedirs(directory, exist_ok=True)
    names = sorted(columns)
    encs = [columns[n] for n in names]
    sizes = [fixed_size(e) for e in encs]
    config = {"column_encodings": encs, "column_names": names, "column_sizes": sizes,
              "compression": None, "format": "mds", "hashes": [], "size_limit": size_limit, "version": 2}
    cfg = json.dumps(config, sort_keys=True).encode()
    shards, records = [], []

    def flush():
        if not records:
            return
        n = len(records)
        head = 4 + 4 * (n + 1) + len(cfg)
        offs, pos = [], head
        for r in records:
            offs.append(pos)
            pos += len(r)
        offs.append(pos)
        data = struct.pack("<I", n) + struct.pack("<%dI" % (n + 1), *offs) + cfg + b"".join(records)
        name = "shard.%05d.mds" % len(shards)
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
        entry = dict(config)
        entry.update({"raw_data": {"basename": name, "bytes": len(data), "hashes": {}},
                      "samples": n, "zip_data": None})
        shards.append(entry)
        records.clear()

    size = 0
    for s in samples:
        lens, body = b"", b""
        for name, enc, fs in zip(names, encs, sizes):
            b = encode(enc, s[name])
            if fs is None:
                lens += struct.pack("<I", len(b))
            elif len(b) != fs:
                raise ValueError("column %s: %d bytes, fixed %d" % (name, len(b), fs))
            body += b
        rec = lens + body
        if records and size + len(rec) + 4 > size_limit:
            flush()
            size = 0
        records.append(rec)
        size += len(rec) + 4
    flush()
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump({"shards": shards, "version": 2}, f, sort_keys=True)
    return len(shards)


def _pyfloat(v):
    return repr(float(v))


def write_split(directory, fmt, columns, samples, size_limit=1 << 26, separator=None, newline="\n"):
    """Writes a JSON-lines ("json") or CSV/TSV/XSV dataset per spec §7: each
    shard a data file plus a meta file (u32 N, u32 offsets[N+1] into the
    data file, config JSON). Returns the number of shards."""
    os.makedirs(directory, exist_ok=True)
    names = sorted(columns)
    config = {"compression": None, "format": fmt, "hashes": [], "newline": newline, "size_limit": size_limit,
              "version": 2}
    if fmt == "json":
        config["columns"] = {n: columns[n] for n in names}
    else:
        sep = {"csv": ",", "tsv": "\t"}.get(fmt, separator)
        config.update({"column_encodings": [columns[n] for n in names], "column_names": names})
        if fmt == "xsv":
            config["separator"] = sep
        header = (sep.join(names) + newline).encode()
    cfg = json.dumps(config, sort_keys=True).encode()
    shards, records = [], []

    def flush():
        if not records:
            return
        n = len(records)
        head = b"" if fmt == "json" else header
        offs, pos = [], len(head)
        for r in records:
            offs.append(pos)
            pos += len(r)
        offs.append(pos)
        data = head + b"".join(records)
        meta = struct.pack("<I", n) + struct.pack("<%dI" % (n + 1), *offs) + cfg
        name = "shard.%05d.%s" % (len(shards), fmt)
        for fname, blob in ((name, data), (name + ".meta", meta)):
            with open(os.path.join(directory, fname), "wb") as f:
                f.write(blob)
        entry = dict(config)
        entry.update({"raw_data": {"basename": name, "bytes": len(data), "hashes": {}},
                      "raw_meta": {"basename": name + ".meta", "bytes": len(meta), "hashes": {}},
                      "samples": n, "zip_data": None, "zip_meta": None})
        shards.append(entry)
        records.clear()

    size = 0
    for s in samples:
        if fmt == "json":
            rec = json.dumps({n: s[n] for n in names}, sort_keys=True).encode() + newline.encode()
        else:
            vals = []
            for n in names:
                v = s[n]
                t = _pyfloat(v) if columns[n] == "float" else str(v)
                if sep in t or newline in t:
                    raise ValueError("column %s: value %r holds the separator or newline" % (n, v))
                vals.append(t)
            rec = (sep.join(vals) + newline).encode()
        if records and size + len(rec) > size_limit:
            flush()
            size = 0
        records.append(rec)
        size += len(rec)
    flush()
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump({"shards": shards, "version": 2}, f, sort_keys=True)
    return len(shards)
