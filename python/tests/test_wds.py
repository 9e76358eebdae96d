"""sluice.WebDataset against the reference fixtures written and read by the
real webdataset library, the chain methods, and WebLoader."""

import base64
import hashlib
import json
import os
import unittest
import warnings

import helpers

import sluice
from sluice import wds

FIXTURES = os.path.join(os.path.dirname(helpers.ROOT), "shared", "fixtures", "wds")


def _fixtures():
    if not os.path.isdir(FIXTURES):
        if os.environ.get("CI"):
            raise AssertionError("reference fixtures missing: %s" % FIXTURES)
        raise unittest.SkipTest("reference fixtures missing")
    return FIXTURES


def _pattern(name):
    with open(os.path.join(_fixtures(), name, "meta.json")) as f:
        meta = json.load(f)
    return os.path.join(FIXTURES, name, meta["urls"])


def _expected(name):
    with open(os.path.join(_fixtures(), name, "expected.jsonl")) as f:
        return [json.loads(line) for line in f]


class FixtureTest(helpers.AgentCase):
    def check(self, name):
        import numpy as np

        want = _expected(name)
        ds = sluice.WebDataset(_pattern(name), shardshuffle=False, cache_dir=os.path.join(self.tmp, "c-" + name))
        got = list(ds.decode("rgb8"))
        self.assertEqual(len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g["__key__"], w["key"], i)
            self.assertEqual(os.path.basename(g["__url__"]), w["url"], i)
            fields = {k for k in g if not k.startswith("__")}
            self.assertEqual(fields, set(w["fields"]), i)
            for k, wf in w["fields"].items():
                v, wv = g[k], wf["v"]
                ext = k.rsplit(".", 1)[-1]
                if ext in ("jpg", "png"):
                    self.assertIsInstance(v, np.ndarray)
                    self.assertEqual(list(v.shape), wv["shape"], (i, k))
                    self.assertEqual(str(v.dtype), wv["dtype"])
                    mean = v.reshape(-1, 3).astype(np.float64).mean(axis=0)
                    tol = 3.0 if ext == "jpg" else 1e-4
                    for m, e in zip(mean, wv["mean"]):
                        self.assertLessEqual(abs(m - e), tol, (i, k, list(mean), wv["mean"]))
                elif ext == "npy":
                    self.assertEqual(str(v.dtype), wv["dtype"])
                    self.assertEqual(list(v.shape), wv["shape"])
                    self.assertEqual(hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest(), wv["sha256"])
                elif ext in ("cls", "json", "txt"):
                    self.assertEqual(v, wv, (i, k))
                else:
                    self.assertEqual(base64.b64encode(v).decode(), wv["b64"], (i, k))
        # The raw bytes are the member bytes.
        raw = list(sluice.WebDataset(_pattern(name), cache_dir=os.path.join(self.tmp, "c-" + name)))
        for g, w in zip(raw, want):
            for k, wf in w["fields"].items():
                self.assertEqual(len(g[k]), wf["raw_len"])
                self.assertEqual(hashlib.sha256(g[k]).hexdigest(), wf["raw_sha256"])

    def test_images(self):
        self.check("images")

    def test_mixed(self):
        self.check("mixed")

    def test_gnutar_pax(self):
        self.check("gnutar_pax")

    def test_random_access(self):
        want = _expected("images")
        ds = sluice.WebDataset(_pattern("images"), cache_dir=os.path.join(self.tmp, "ra"))
        self.assertEqual(ds.num_samples, len(want))
        for i in (0, 41, len(want) - 1):
            self.assertEqual(ds[i]["__key__"], want[i]["key"])


class ChainTest(helpers.AgentCase):
    def ds(self):
        return sluice.WebDataset(_pattern("images"), cache_dir=os.path.join(self.tmp, "chain"))

    def test_decode_specs(self):
        import numpy as np
        import torch
        from PIL import Image

        s = next(iter(self.ds().decode("pil")))
        self.assertIsInstance(s["jpg"], Image.Image)
        self.assertIsInstance(s["cls"], int)
        self.assertIsInstance(s["json"], dict)
        s = next(iter(self.ds().decode("rgb")))
        self.assertEqual(s["jpg"].dtype, np.float32)
        self.assertLessEqual(float(s["jpg"].max()), 1.0)
        s = next(iter(self.ds().decode("torchrgb")))
        self.assertIsInstance(s["jpg"], torch.Tensor)
        self.assertEqual(s["jpg"].shape[0], 3)
        s = next(iter(self.ds().decode("l")))
        self.assertEqual(s["jpg"].ndim, 2)
        # A custom handler runs first; None passes to the next.
        s = next(iter(self.ds().decode(lambda k, d: "custom" if k == "txt" else None, "rgb8")))
        self.assertEqual(s["txt"], "custom")
        self.assertEqual(s["jpg"].dtype, np.uint8)
        s = next(iter(self.ds().decode(wds.handle_extension("cls", lambda d: -1))))
        self.assertEqual(s["cls"], -1)

    def test_tuple_map_batch(self):
        want = _expected("images")
        it = iter(self.ds().decode("rgb8").to_tuple("png;jpg", "cls", "__key__")
                  .map_tuple(lambda a: a.shape, lambda c: c + 1, None).batched(8, partial=False))
        b = next(it)
        self.assertEqual(len(b), 3)
        self.assertEqual(list(b[1]), [w["fields"]["cls"]["v"] + 1 for w in want[:8]])
        self.assertEqual(b[2], [w["key"] for w in want[:8]])
        u = list(self.ds().decode().to_tuple("jpg", "cls").batched(7).unbatched())
        self.assertEqual(len(u), 120)
        self.assertEqual(u[9][1], want[9]["fields"]["cls"]["v"])
        n = sum(len(b[0]) for b in self.ds().to_tuple("jpg", "cls").batched(7, partial=False))
        self.assertEqual(n, 119)  # 120 samples, the last short batch dropped
        n = sum(len(b[0]) for b in self.ds().to_tuple("jpg", "cls").batched(7))
        self.assertEqual(n, 120)
        with self.assertRaises(ValueError):
            next(iter(self.ds().to_tuple("nosuchfield")))

    def test_select_rename_map_dict(self):
        ds = self.ds().decode().select(lambda s: s["cls"] % 2 == 0).rename(label="cls", image="jpg;png")
        got = list(ds)
        self.assertTrue(all(s["label"] % 2 == 0 for s in got))
        self.assertTrue(all("cls" not in s and "image" in s and "__key__" in s for s in got))
        got = list(self.ds().decode().map_dict(cls=lambda c: -c).map(lambda s: s["cls"]))
        self.assertTrue(all(c <= 0 for c in got))

    def test_shuffle_epoch_length(self):
        keys = [s["__key__"] for s in self.ds()]
        shuffled = [s["__key__"] for s in self.ds().shuffle(50, seed=1)]
        self.assertEqual(sorted(shuffled), sorted(keys))
        self.assertNotEqual(shuffled, keys)
        # shardshuffle: Sluice's global seeded shuffle, the same for a seed.
        a = [s["__key__"] for s in sluice.WebDataset(_pattern("images"), shardshuffle=True, shuffle_seed=3,
                                                      cache_dir=os.path.join(self.tmp, "chain"))]
        self.assertEqual(sorted(a), sorted(keys))
        self.assertNotEqual(a, keys)
        # with_epoch: every iteration n items, continuing the stream.
        ep = self.ds().with_epoch(50)
        first, second, third = [[s["__key__"] for s in ep] for _ in range(3)]
        self.assertEqual(len(first), 50)
        self.assertEqual(first + second, keys[:100])
        self.assertEqual(third[:20], keys[100:])
        self.assertEqual(third[20:], keys[:30])
        self.assertEqual(len(self.ds().with_length(77)), 77)
        with self.assertRaises(TypeError):
            len(self.ds())
        r = sluice.WebDataset(_pattern("images"), resampled=True, cache_dir=os.path.join(self.tmp, "chain")).with_epoch(300)
        self.assertEqual(len(list(r)), 300)


class LoaderTest(helpers.AgentCase):
    def test_webloader_two_workers(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        want = sorted(w["key"] for w in _expected("images"))
        old = os.environ.get("SLUICE_JOB")
        self.addCleanup(lambda: os.environ.pop("SLUICE_JOB", None) if old is None else os.environ.update(SLUICE_JOB=old))
        for workers in (0, 2):
            # A job per worker count: epochs are counted per (rank, worker).
            os.environ["SLUICE_JOB"] = "wds-loader-%d" % workers
            ds = sluice.WebDataset(_pattern("images"), shardshuffle=True, cache_dir=os.path.join(self.tmp, "wl"))
            loader = sluice.WebLoader(ds.to_tuple("__key__", "cls"), batch_size=8, num_workers=workers)
            keys = [k for b in loader for k in b[0]]
            self.assertEqual(sorted(keys), want, workers)
            # Re-batching on the loader side, as WebDataset users do.
            loader = sluice.WebLoader(ds.to_tuple("__key__", "cls"), batch_size=None, num_workers=workers).batched(16)
            keys = [k for b in loader for k in b[0]]
            self.assertEqual(sorted(keys), want, workers)


if __name__ == "__main__":
    unittest.main()


class IndexScanWarningTest(helpers.AgentCase):
    """Tars that no index.json lists are indexed by reading their headers
    on every node (small-member tars whole): the user is told so once, with
    `sluice index` as the way out, and not once an index is beside them."""

    def open_and_read(self, pattern, cache):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = len(list(sluice.WebDataset(pattern, cache_dir=cache)))
        return n, [str(w.message) for w in caught if "sluice index" in str(w.message)]

    def test_scan_warns_until_indexed(self):
        import shutil
        import subprocess

        src = os.path.join(self.tmp, "scan-tars")
        shutil.copytree(os.path.join(_fixtures(), "images", "data"), src)
        names = sorted(os.listdir(src))
        pattern = os.path.join(src, "{%s}" % ",".join(names)) if len(names) > 1 else os.path.join(src, names[0])
        want = len(_expected("images"))
        n, said = self.open_and_read(pattern, os.path.join(self.tmp, "scan-c1"))
        self.assertEqual(n, want)
        self.assertEqual(len(said), 1, said)
        self.assertIn("%d tar shards" % len(names), said[0])
        # The index built is cached on the node: no scan, nothing said.
        n, said = self.open_and_read(pattern, os.path.join(self.tmp, "scan-c1"))
        self.assertEqual((n, said), (want, []))
        subprocess.run([os.environ["SLUICE_BIN"], "index", pattern], check=True, capture_output=True, timeout=120)
        n, said = self.open_and_read(pattern, os.path.join(self.tmp, "scan-c2"))
        self.assertEqual((n, said), (want, []))
