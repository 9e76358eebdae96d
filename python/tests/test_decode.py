"""Column decoders against the byte layouts of spec §3-§4 (no agent)."""

import decimal
import io
import struct
import unittest

import helpers  # noqa: F401
from sluice import _decode, errors

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    from PIL import Image
except ImportError:  # pragma: no cover
    Image = None


class ScalarTest(unittest.TestCase):
    def test_vectors(self):
        d = _decode.column_decoder
        self.assertEqual(d("int")(bytes.fromhex("6300000000000000")), 99)
        self.assertEqual(d("int")(bytes.fromhex("b168de3a00000000")), 987654321)
        self.assertEqual(d("float16")(bytes.fromhex("4051")), 42.0)
        self.assertEqual(d("float32")(bytes.fromhex("00002842")), 42.0)
        self.assertEqual(d("float64")(bytes.fromhex("0000000000004540")), 42.0)
        self.assertEqual(d("str")("héllo".encode()), "héllo")
        self.assertEqual(d("bytes")(b"\x00\x01"), b"\x00\x01")
        self.assertEqual(d("str_int")(b"-123456789012345678901234567890"), -123456789012345678901234567890)
        self.assertEqual(d("str_float")(b"1e+16"), 1e16)
        self.assertEqual(d("str_decimal")(b"1E+10"), decimal.Decimal("1E+10"))
        self.assertEqual(d("json")(b'{"b": [1, 2.5, null, true], "a": "\\u00e9"}'), {"b": [1, 2.5, None, True], "a": "é"})
        self.assertEqual(d("uint8")(b"\xff"), 255)
        self.assertEqual(d("int16")(b"\xfe\xff"), -2)
        if np is not None:
            self.assertIsInstance(d("uint8")(b"\xff"), np.uint8)
            self.assertIsInstance(d("float32")(bytes.fromhex("00002842")), np.float32)

    def test_pickle_is_not_executed(self):
        v = _decode.column_decoder("pkl")(b"\x80\x04K\x05.")
        self.assertIsInstance(v, _decode.PickleBytes)
        self.assertEqual(bytes(v), b"\x80\x04K\x05.")
        self.assertEqual(_decode.column_decoder("pkl", allow_unsafe=True)(b"\x80\x04K\x05."), 5)

    def test_unknown(self):
        with self.assertRaises(errors.CorruptDataError):
            _decode.column_decoder("nope")


@unittest.skipIf(np is None, "numpy missing")
class NDArrayTest(unittest.TestCase):
    def test_spec_examples(self):
        want = np.arange(6, dtype=np.int16).reshape(2, 3)
        cases = {
            "ndarray": "11080203000001000200030004000500",
            "ndarray:int16": "080203000001000200030004000500",
            "ndarray:int16:2,3": "000001000200030004000500",
        }
        for enc, hexs in cases.items():
            got = _decode.column_decoder(enc)(bytes.fromhex(hexs))
            self.assertEqual(got.dtype, np.int16, enc)
            np.testing.assert_array_equal(got, want, enc)
        got = _decode.column_decoder("ndarray")(bytes.fromhex("2204010000c03f"))
        np.testing.assert_array_equal(got, np.array([1.5], np.float32))
        big = np.arange(300, dtype=np.uint8)
        got = _decode.column_decoder("ndarray")(bytes.fromhex("08052c01") + big.tobytes())
        np.testing.assert_array_equal(got, big)

    def test_corrupt(self):
        for b in (b"", b"\x07", b"\x11\x08\x02\x03\x00"):
            with self.assertRaises(errors.CorruptDataError):
                _decode.column_decoder("ndarray")(b)


@unittest.skipIf(Image is None, "Pillow missing")
class ImageTest(unittest.TestCase):
    def test_pil_raw(self):
        b = bytes.fromhex("02000000" "01000000" "03000000") + b"RGB" + bytes([1, 2, 3, 1, 2, 3])
        im = _decode.column_decoder("pil")(b)
        self.assertEqual((im.mode, im.size), ("RGB", (2, 1)))
        self.assertEqual(im.tobytes(), bytes([1, 2, 3, 1, 2, 3]))

    def test_png_and_lists(self):
        buf = io.BytesIO()
        Image.new("L", (3, 2), 7).save(buf, format="PNG")
        png = buf.getvalue()
        im = _decode.column_decoder("png")(png)
        self.assertEqual((im.format, im.mode, im.size), ("PNG", "L", (3, 2)))
        lst = struct.pack("<II", 0, 2) + struct.pack("<II", len(png), len(png)) + png + png
        ims = _decode.column_decoder("list[png]")(lst)
        self.assertEqual(len(ims), 2)
        self.assertEqual(_decode.column_decoder("list[png]")(b"\x00" * 8), [])
        buf = io.BytesIO()
        Image.new("RGB", (4, 4), (10, 20, 30)).save(buf, format="JPEG")
        jpg = buf.getvalue()
        arr = struct.pack("<II", 1, len(jpg)) + jpg
        self.assertEqual(_decode.column_decoder("jpeg_array")(arr)[0].size, (4, 4))
        with self.assertRaises(errors.CorruptDataError):
            _decode.column_decoder("jpeg_array")(struct.pack("<I", 0))


class RecordTest(unittest.TestCase):
    def test_spec_worked_example(self):
        # Spec §3.3: columns id:int, text:str; records of samples 0 and 1.
        dec = _decode.mds_decoder({"column_names": ["id", "text"], "column_encodings": ["int", "str"], "column_sizes": [8, None]})
        self.assertEqual(dec(bytes.fromhex("02000000" "0700000000000000") + b"hi"), {"id": 7, "text": "hi"})
        self.assertEqual(dec(bytes.fromhex("06000000" "ffffffffffffffff") + "héllo".encode()), {"id": -1, "text": "héllo"})
        with self.assertRaises(errors.CorruptDataError):
            dec(bytes.fromhex("ff000000" "0700000000000000"))
        with self.assertRaises(errors.CorruptDataError):
            dec(b"\x01")


if __name__ == "__main__":
    unittest.main()
