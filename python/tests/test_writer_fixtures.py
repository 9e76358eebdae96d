"""sluice.MDSWriter writes MosaicML's reference datasets byte for byte.

Every dataset of ../shared/fixtures/mds/ (written by the real MosaicML
Streaming 0.14) is written again with sluice.MDSWriter from the values
MosaicML read back (expected.jsonl; for pkl and images the objects
MosaicML's decoders return: unpickled values, PIL images), with the same
writer arguments, and compared with the fixture: index.json byte for byte
(sizes and digests of compressed files aside, since compressors differ),
every raw shard (through its digests in index.json, and byte for byte where
Python can decompress), and `sluice verify` on the result.
"""

import base64
import bz2
import decimal
import gzip
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import tempfile
import unittest

import helpers

FIXTURES = os.path.join(os.path.dirname(helpers.ROOT), "shared", "fixtures", "mds")

try:
    import numpy as np
    from PIL import Image
except ImportError:  # pragma: no cover
    np = None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _masked(index_text, like):
    """index_text parsed, with the sizes and digests of compressed files
    taken from the index like (compressors differ; raw shards may not)."""
    got, want = json.loads(index_text), json.loads(like)
    for g, w in zip(got["shards"], want["shards"]):
        if g.get("zip_data") and w.get("zip_data"):
            g["zip_data"]["bytes"], g["zip_data"]["hashes"] = w["zip_data"]["bytes"], w["zip_data"]["hashes"]
    return json.dumps(got, sort_keys=True)


def _decompress(family, data):
    if family is None:
        return data
    if family == "gz":
        return gzip.decompress(data)
    if family == "bz2":
        return bz2.decompress(data)
    return None  # zstd, snappy, br: not in Python's standard library


class FixtureWriteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        helpers.binary()
        if not os.path.isdir(FIXTURES):
            if os.environ.get("SLUICE_REQUIRE_SERVICES") == "1":
                raise AssertionError("reference fixtures missing: %s" % FIXTURES)
            raise unittest.SkipTest("reference fixtures missing: %s" % FIXTURES)
        if np is None:
            raise unittest.SkipTest("needs numpy and Pillow")
        cls.tmp = tempfile.mkdtemp(prefix="sluice-writer-fx-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def _raw_columns(self, src):
        """Each sample's stored column bytes (decompressed), through
        `sluice dump --raw`."""
        p = subprocess.run([helpers.binary(), "dump", "--raw", src], stdout=subprocess.PIPE, check=True)
        return [{c: base64.b64decode(v["b64"]) for c, v in json.loads(line)["cols"].items()}
                for line in p.stdout.splitlines()]

    def _value(self, enc, v, raw, files):
        """The value MosaicML's reader returned, rebuilt from expected.jsonl
        (and the raw bytes for pkl and images)."""
        name, _, params = enc.partition(":")
        if name in ("str", "str_int"):
            return v
        if name == "str_decimal":
            return decimal.Decimal(v)
        if name == "bytes":
            return base64.b64decode(v["b64"])
        if name in ("int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
            return v if name == "int" else np.dtype(name).type(v)
        if name in ("float16", "float32", "float64"):
            bits = bytes.fromhex(v["bits"])[::-1]  # big-endian hex to little-endian bytes
            return np.frombuffer(bits, np.dtype(name).newbyteorder("<"))[0]
        if name == "str_float":
            return struct.unpack("<d", bytes.fromhex(v["bits"])[::-1])[0]
        if name == "json":
            # expected.jsonl sorts object keys; the reader returns them in
            # stored order, which json.loads keeps.
            value = json.loads(raw)
            self.assertEqual(json.dumps(value, sort_keys=True), json.dumps(v["json"], sort_keys=True))
            return value
        if name == "pkl":
            return pickle.loads(raw)
        if name == "ndarray":
            arr = np.frombuffer(base64.b64decode(v["data_b64"]), np.dtype(v["dtype"]).newbyteorder("<"))
            return arr.reshape(v["shape"]).astype(v["dtype"])
        if name == "pil":
            w, h, n = struct.unpack_from("<III", raw, 0)
            return Image.frombytes(raw[12:12 + n].decode(), (w, h), bytes(raw[12 + n:]))
        if name == "png":
            return Image.open(io.BytesIO(bytes(raw)))
        if name == "jpeg":
            return self._jpeg_file(bytes(raw), files)
        if name in ("list[jpeg]", "list[png]"):
            n = struct.unpack_from("<I", raw, 4)[0]
            sizes = struct.unpack_from("<%dI" % n, raw, 8)
            pos, items = 8 + 4 * n, []
            for s in sizes:
                b = bytes(raw[pos:pos + s])
                items.append(self._jpeg_file(b, files) if name == "list[jpeg]" else Image.open(io.BytesIO(b)))
                pos += s
            return items
        if name == "jpeg_array":
            n = struct.unpack_from("<I", raw, 0)[0]
            sizes = struct.unpack_from("<%dI" % n, raw, 4)
            pos, items = 4 + 4 * n, []
            for s in sizes:
                items.append(self._jpeg_file(bytes(raw[pos:pos + s]), files))
                pos += s
            return items
        raise AssertionError("encoding %s not covered" % enc)

    def _jpeg_file(self, b, files):
        # MosaicML's JPEG encoder stores the file a JpegImageFile was opened
        # from, so a JPEG that was read from a file round-trips exactly.
        path = os.path.join(self.tmp, "img-%d.jpg" % len(files))
        with open(path, "wb") as f:
            f.write(b)
        files.append(path)
        return Image.open(path)

    def _write_part(self, name, meta, src, out, expected, start):
        import sluice

        args = meta["writer_args"]
        cols = args["columns"]
        raws = self._raw_columns(src)
        files = []
        with sluice.MDSWriter(out=out, columns=cols, compression=args["compression"],
                              hashes=args["hashes"], size_limit=args["size_limit"],
                              allow_unsafe_types=True) as w:
            for k in range(len(raws)):
                exp = expected[start + k]
                sample = {c: self._value(cols[c], exp["cols"][c]["v"], raws[k][c], files) for c in cols}
                w.write(sample)
        return len(raws)

    def _compare(self, src, out):
        want_text = _read(os.path.join(src, "index.json"))
        got_text = _read(os.path.join(out, "index.json"))
        want, got = json.loads(want_text), json.loads(got_text)
        self.assertEqual(len(got["shards"]), len(want["shards"]))
        for g, w in zip(got["shards"], want["shards"]):
            if g.get("zip_data") and w.get("zip_data"):
                g["zip_data"]["bytes"], g["zip_data"]["hashes"] = w["zip_data"]["bytes"], w["zip_data"]["hashes"]
            family = (w["compression"] or "").split(":")[0] or None
            name = (w["zip_data"] or w["raw_data"])["basename"]
            wb = _decompress(family, _read(os.path.join(src, name)))
            gb = _decompress(family, _read(os.path.join(out, name)))
            if wb is not None:
                self.assertEqual(gb, wb, "%s: raw shard differs" % name)
        # Raw shards are equal through their digests (sha1/xxh64 of the
        # decompressed shard) and sizes, and the whole index matches.
        self.assertEqual(json.dumps(got, sort_keys=True), json.dumps(want, sort_keys=True))
        if not want["shards"] or want["shards"][0]["zip_data"] is None:
            self.assertEqual(got_text, want_text, "index.json text differs")
        subprocess.run([helpers.binary(), "verify", out], check=True, stdout=subprocess.DEVNULL)

    def test_every_fixture(self):
        import sluice

        names = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d)))
        self.assertGreater(len(names), 10)
        for name in names:
            with self.subTest(fixture=name):
                meta = json.loads(_read(os.path.join(FIXTURES, name, "meta.json")))
                expected = [json.loads(line) for line in _read(os.path.join(FIXTURES, name, "expected.jsonl")).splitlines()]
                data = os.path.join(FIXTURES, name, "data")
                out = os.path.join(self.tmp, name)
                parts = sorted(p for p in os.listdir(data) if p.startswith("part"))
                n = 0
                if parts:
                    for p in parts:
                        n += self._write_part(name, meta, os.path.join(data, p), os.path.join(out, p), expected, n)
                        self._compare(os.path.join(data, p), os.path.join(out, p))
                    sluice.merge_index(out)
                    want = _read(os.path.join(data, "index.json"))
                    self.assertEqual(_masked(_read(os.path.join(out, "index.json")), want),
                                     json.dumps(json.loads(want), sort_keys=True))
                else:
                    n = self._write_part(name, meta, data, out, expected, 0)
                    self._compare(data, out)
                self.assertEqual(n, len(expected))


if __name__ == "__main__":
    unittest.main()
