"""Throughput of sluice.WebDataset through a 2-worker DataLoader on ~20 KB
JPEG samples (bytes only, and with .decode("pil")). A benchmark, not a
test: it runs only with SLUICE_BENCH=1 and prints samples/s.

    SLUICE_BENCH=1 python3 -m unittest test_wds_bench -v
"""

import io
import os
import tarfile
import time
import unittest
import warnings

import helpers

import sluice

N = int(os.environ.get("SLUICE_BENCH_SAMPLES", "20000"))


def jpeg_20k():
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    img = (rng.random((128, 160, 3)) * 255).astype("uint8")
    for q in range(95, 10, -5):
        b = io.BytesIO()
        Image.fromarray(img).save(b, format="JPEG", quality=q)
        if len(b.getvalue()) <= 22 << 10:
            break
    return b.getvalue()


@unittest.skipUnless(os.environ.get("SLUICE_BENCH") == "1", "benchmark: set SLUICE_BENCH=1")
class WebDatasetBench(helpers.AgentCase):
    def test_loader_throughput(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        from torch.utils.data import DataLoader

        jpg = jpeg_20k()
        src = os.path.join(self.tmp, "tars")
        os.makedirs(src)
        per = (64 << 20) // (len(jpg) + 2048)
        for k in range((N + per - 1) // per):
            with tarfile.open(os.path.join(src, "shard-%06d.tar" % k), "w", format=tarfile.USTAR_FORMAT) as tf:
                for i in range(k * per, min(N, (k + 1) * per)):
                    for ext, data in (("jpg", jpg), ("cls", str(i % 1000).encode())):
                        ti = tarfile.TarInfo("s%08d.%s" % (i, ext))
                        ti.size = len(data)
                        tf.addfile(ti, io.BytesIO(data))
        print("\n%d samples of %d-byte JPEGs in %d shards" % (N, len(jpg), len(os.listdir(src))))
        for name, decode in (("bytes", None), ("pil", "pil")):
            os.environ["SLUICE_JOB"] = "bench-" + name
            ds = sluice.WebDataset(src, cache_dir=os.path.join(self.tmp, "cache"), batch_size=32)
            if decode:
                ds = ds.decode(decode)
            ds = ds.to_tuple("jpg", "cls")
            for workers in (2, 0):
                loader = DataLoader(ds, batch_size=32, num_workers=workers,
                                    collate_fn=(lambda b: b) if decode else None)
                best = 0
                for _ in range(3):
                    t0 = time.perf_counter()
                    n = sum(len(b) if decode else len(b[0]) for b in loader)
                    best = max(best, n / (time.perf_counter() - t0))
                    self.assertEqual(n, N)
                print("WebDataset %s, DataLoader(num_workers=%d, batch_size=32): %.0f samples/s (best of 3; load %.1f)"
                      % (name, workers, best, os.getloadavg()[0]))


if __name__ == "__main__":
    unittest.main()
