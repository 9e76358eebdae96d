"""Decoded image columns (sluice.DecodeImage, docs/images.md): through the
shared-memory feed the agent decodes, crops and flips (package vision);
on the other paths sluice.images does the same with PIL. Tested: the
batch's tensor, the same pixels at 0/2/4 threads and after a resume
mid-epoch, the same crop and flip on the Python path (pixels within the
decoders' difference), bad arguments refused."""

import io
import json
import os
import unittest

import helpers
import mdswrite

try:
    import numpy as np
    import torch
    from PIL import Image
except ImportError:  # pragma: no cover
    torch = np = Image = None

import sluice
from sluice import errors, images

N = 48
BS = 4


def jpeg(i):
    """A JPEG whose crops look different: gradients and a bright square."""
    w, h = 64 + (i % 5) * 9, 48 + (i % 3) * 11
    x = np.arange(w)[None, :, None]
    y = np.arange(h)[:, None, None]
    a = np.concatenate([x * 255 // w + 0 * y, y * 255 // h + 0 * x, (x + y + 7 * i) % 256 + 0 * x * y], axis=2)
    a[h // 4:h // 2, w // 3:w // 2] = 250
    buf = io.BytesIO()
    Image.fromarray(a.astype(np.uint8)).save(buf, "JPEG", quality=92)
    return buf.getvalue()


class Env:
    def __init__(self, **kw):
        self.kw = kw

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.kw}
        os.environ.update(self.kw)

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Spy:
    """Counts the samples the Python path decodes."""

    def __enter__(self):
        self.n = 0
        self.orig = images.apply_all

        def apply_all(*a):
            self.n += 1
            return self.orig(*a)

        images.apply_all = apply_all
        return self

    def __exit__(self, *exc):
        images.apply_all = self.orig


@unittest.skipIf(torch is None, "needs torch, numpy and Pillow")
class DecodeImageTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "img")
        mdswrite.write(cls.data, {"id": "int", "img": "jpeg"}, ({"id": i, "img": jpeg(i)} for i in range(N)),
                       size_limit=1 << 14)

    def dataset(self, **kw):
        kw.setdefault("decode_images", sluice.DecodeImage("img", size=(24, 32), flip=True, seed=3))
        return sluice.StreamingDataset(local=self.data, batch_size=BS, shuffle=True, **kw)

    def epoch(self, workers, feed="threads", shm="on", loader=None, stop_after=None):
        """{id: CHW uint8 array} of one epoch (or of its first stop_after
        batches) and the loader."""
        got = {}
        # The agent decodes whatever its build (auto would take PIL over
        # the pure-Go agent: test_image_choice.py).
        with Env(SLUICE_FEED=feed, SLUICE_SHM=shm, SLUICE_IMAGE_DECODE="agent"):
            loader = loader or sluice.StreamingDataLoader(self.dataset(), batch_size=BS, num_workers=workers)
            for k, b in enumerate(loader):
                img = b["img"]
                self.assertIsInstance(img, torch.Tensor)
                self.assertEqual(img.dtype, torch.uint8)
                self.assertEqual(tuple(img.shape[1:]), (3, 24, 32))
                for i, sid in enumerate(b["id"].tolist()):
                    self.assertNotIn(sid, got)
                    got[sid] = img[i].numpy().copy()
                if stop_after is not None and k + 1 == stop_after:
                    break
        return got, loader

    def test_agent_decodes_same_at_every_thread_count(self):
        with Spy() as spy:
            base, _ = self.epoch(0)
            self.assertEqual(sorted(base), list(range(N)))
            for w in (2, 4):
                other, _ = self.epoch(w)
                self.assertEqual(sorted(other), list(range(N)))
                for sid in range(N):
                    np.testing.assert_array_equal(other[sid], base[sid], "sample %d at %d threads" % (sid, w))
        self.assertEqual(spy.n, 0, "the Python path decoded samples: the agent did not")
        # Augmented: crops differ between samples of the same source size.
        self.assertGreater(len({base[s].tobytes() for s in range(N)}), N - 2)

    def test_resume_sees_same_pixels(self):
        full, _ = self.epoch(2)
        part, loader = self.epoch(2, stop_after=3)
        state = loader.state_dict()
        ds = self.dataset()
        ds.load_state_dict(state)
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on", SLUICE_IMAGE_DECODE="agent"):
            rest = {}
            for b in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2):
                for i, sid in enumerate(b["id"].tolist()):
                    rest[sid] = b["img"][i].numpy().copy()
        self.assertEqual(len(part) + len(rest), N)
        self.assertEqual(set(part) | set(rest), set(range(N)))
        for sid, a in list(part.items()) + list(rest.items()):
            np.testing.assert_array_equal(a, full[sid], "sample %d after resume" % sid)

    def test_resume_with_another_seed_sees_same_pixels(self):
        # A run resumed by a dataset built with another shuffle_seed plays
        # the state's seed (MosaicML keeps the resumed one), and so must
        # its augmentation: the pixels of the interrupted run, on the
        # agent's path and on the Python path alike.
        for feed, shm in (("threads", "on"), ("workers", "off")):
            with self.subTest(path="agent" if shm == "on" else "python"):
                full, _ = self.epoch(2, feed=feed, shm=shm)
                part, loader = self.epoch(2, feed=feed, shm=shm, stop_after=3)
                state = loader.state_dict()
                self.assertEqual(state["shuffle_seed"], 9176)
                ds = self.dataset(shuffle_seed=1234)
                ds.load_state_dict(state)
                with Env(SLUICE_FEED=feed, SLUICE_SHM=shm, SLUICE_IMAGE_DECODE="agent"):
                    rest = {}
                    for b in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2):
                        for i, sid in enumerate(b["id"].tolist()):
                            rest[sid] = b["img"][i].numpy().copy()
                self.assertEqual(set(part) | set(rest), set(range(N)))
                self.assertEqual(len(part) + len(rest), N)
                for sid, a in rest.items():
                    np.testing.assert_array_equal(a, full[sid], "sample %d after the resume" % sid)

    def test_python_path_draws_the_same(self):
        agent, _ = self.epoch(2)
        with Spy() as spy:
            py, _ = self.epoch(2, feed="workers", shm="off")
            py0, _ = self.epoch(0, feed="workers", shm="off")
        self.assertGreater(spy.n, 0)
        for sid in range(N):
            np.testing.assert_array_equal(py0[sid], py[sid])
            d = np.abs(py[sid].astype(int) - agent[sid].astype(int))
            # The same crop and flip: only the decoders differ (pure Go vs
            # PIL's libjpeg: a few levels). Another crop differs by tens.
            self.assertLess(d.mean(), 6, "sample %d: mean difference %.2f" % (sid, d.mean()))

    def test_draws_match_vision(self):
        # The Python port of vision's generator: crops inside the image, in
        # range, flips about half; fixed values pin the formula down.
        d = sluice.DecodeImage("img", size=224, flip=True)
        flips = 0
        for sid in range(400):
            (l, t, r, b), f = d.draw(500, 375, 9176, 1, sid)
            self.assertTrue(0 <= l < r <= 500 and 0 <= t < b <= 375)
            frac = (r - l) * (b - t) / (500 * 375)
            self.assertTrue(0.07 < frac <= 1.0 and 0.7 < (r - l) / (b - t) < 1.4)
            flips += f
        self.assertTrue(150 < flips < 250)
        self.assertEqual(d.draw(500, 375, 9176, 1, 7), d.draw(500, 375, 9176, 1, 7))
        self.assertNotEqual(d.draw(500, 375, 9176, 1, 7), d.draw(500, 375, 9176, 2, 7))

    def test_draws_pinned_with_go(self):
        # vision/testdata/draws.json holds draws Go's TestDrawsMatchPythonPort
        # checks vision makes; this port must still make them.
        path = os.path.join(helpers.ROOT, "vision", "testdata", "draws.json")
        with open(path) as f:
            draws = json.load(f)
        self.assertGreater(len(draws), 100)
        for d in draws:
            r = images._RNG(int(d["seed"]), d["epoch"], d["sample"])
            box = images._random_crop(r, d["w"], d["h"], tuple(d["scale"]), tuple(d["ratio"]))
            self.assertEqual((list(box), r.float() < 0.5), (d["box"], d["flip"]), d)

    def test_bad_arguments(self):
        for kw in (dict(size=0), dict(size=(3,)), dict(crop="centre"), dict(layout="cwh"), dict(scale=(0.9, 0.1)),
                   dict(ratio=(0, 1))):
            with self.assertRaises(ValueError, msg=str(kw)):
                sluice.DecodeImage("img", **dict(dict(size=8), **kw))
        with self.assertRaises(TypeError):
            self.dataset(decode_images=["img"])
        for bad in (0, -1):
            with self.assertRaises(ValueError):
                sluice.DecodeImage("img", size=8, max_pixels=bad)
        # A column that holds no images: the agent refuses the transform
        # as an invalid argument naming it.
        ds = self.dataset(decode_images=sluice.DecodeImage("id", size=8))
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on", SLUICE_IMAGE_DECODE="agent"):
            with self.assertRaisesRegex(errors.InvalidArgumentError,
                                        "column \"id\" holds \"int\" values, not encoded images"):
                for _ in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=1):
                    pass


def patch_jpeg_size(b, h, w):
    """b with its frame header declaring h x w pixels (the scan unchanged)."""
    b, i = bytearray(b), 2
    while i < len(b):
        m, n = b[i + 1], int.from_bytes(b[i + 2:i + 4], "big")
        if 0xC0 <= m <= 0xC2:
            b[i + 5:i + 9] = h.to_bytes(2, "big") + w.to_bytes(2, "big")
            return bytes(b)
        i += 2 + n
    raise ValueError("no frame header")


def encoded(img, fmt):
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


@unittest.skipIf(torch is None, "needs torch, numpy and Pillow")
class BadImageTest(helpers.AgentCase):
    """Hostile and unusual images give the same answer on both paths: the
    agent's decoder and PIL's. An image declaring more pixels than the
    limit is refused from its header (PIL decoded a 12000 x 12000 header
    into 2.2 GB, and one past the agent's 64 Mpx below PIL's own bomb
    limit silently), bytes in another format PIL reads (BMP) are refused
    as the agent refuses them, both as CorruptDataError naming the column
    and sample (the agent's went out as a plain SluiceError, PIL's as
    whatever PIL raised); 16-bit grey PNGs keep their high byte on both
    (PIL's convert clipped them to 255)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        good = jpeg(1)
        grey16 = Image.fromarray((np.arange(40 * 56).reshape(40, 56) * 29 % 65536).astype(np.uint16))
        cls.cases = {
            # 67.2 Mpx: over the agent's 64 Mpx limit, under PIL's warning.
            "huge": patch_jpeg_size(good, 8200, 8200),
            "bmp": encoded(Image.open(io.BytesIO(good)).convert("RGB"), "BMP"),
            "garbage": b"\xff\xd8\xff" + bytes(range(256)) * 3,
            "grey16": encoded(grey16, "PNG"),
            "cmyk": encoded(Image.open(io.BytesIO(good)).convert("CMYK"), "JPEG"),
        }
        for name, v in cls.cases.items():
            mdswrite.write(os.path.join(cls.tmp, name), {"id": "int", "img": "bytes"},
                           ({"id": i, "img": v} for i in range(BS)), size_limit=1 << 20)

    def decode(self, name, path):
        """The epoch's image column on the agent's or PIL's path."""
        ds = sluice.StreamingDataset(local=os.path.join(self.tmp, name), batch_size=BS,
                                     decode_images=sluice.DecodeImage("img", size=(12, 16), crop="none"))
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on", SLUICE_IMAGE_DECODE=path):
            return torch.cat([b["img"] for b in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2)])

    def test_refused_alike(self):
        for name, why in (("huge", "8200×8200 pixels \\(limit 67108864\\)"), ("bmp", "not a JPEG or PNG"),
                          ("garbage", "")):
            for path in ("agent", "pil"):
                with self.subTest(name=name, path=path):
                    with self.assertRaisesRegex(errors.CorruptDataError, "column .img. of sample [0-9]+: bad image: .*" + why):
                        self.decode(name, path)

    def test_limit_is_a_parameter(self):
        small = sluice.DecodeImage("img", size=8, max_pixels=100)
        with self.assertRaisesRegex(errors.CorruptDataError, "56×40 pixels \\(limit 100\\)"):
            small.apply(self.cases["grey16"], 0, 0, 5)
        self.assertEqual(small.feed_transform(0)["params"]["max_pixels"], 100)

    def test_unusual_modes_decode_alike(self):
        for name in ("grey16", "cmyk"):
            with self.subTest(name=name):
                agent, pil = self.decode(name, "agent"), self.decode(name, "pil")
                self.assertEqual(tuple(agent.shape), (BS, 3, 12, 16))
                d = (agent.int() - pil.int()).abs().float()
                self.assertLess(float(d.mean()), 6, "%s: mean difference %.2f" % (name, float(d.mean())))


if __name__ == "__main__":
    unittest.main()
