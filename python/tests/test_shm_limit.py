"""The shared-memory feed under a cache_limit of a few shards, smaller
than the data, with batches that span more shards than the limit holds:
the plan's batches in its exact order, every sample once, the feed really
used, the cache inside its limit, and no hang (the dataset's stall
timeout and the test's own deadline bound every wait). From a local
directory through the cache, and from the real S3 server under
.ci/with-services.sh. Before, cache_limit turned the feed off: a batch
held its shards' leases until it was full, and here every worker's
pending shards filled the cache so no producer could fetch its next one."""

import os
import unittest
import uuid

import helpers
import mdswrite
from test_shm import Counting, Env, ids_of

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = np = None

import sluice
from sluice import _agent, _shm

N = 1500
BS = 128  # samples per batch: about 9 shards of 15


def shard_files(d):
    return [f for f in os.listdir(d) if f.endswith(".mds")]


def cache_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs if f.endswith(".mds"))


@unittest.skipIf(torch is None, "needs torch and numpy")
class ShmLimitTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.src = os.path.join(cls.tmp, "src")
        # A fixed-shape ndarray column: SLUICE_SHM=auto takes the feed.
        mdswrite.write(cls.src, {"id": "int", "vec": "ndarray:float32:48"},
                       ({"id": i, "vec": np.full(48, i, np.float32)} for i in range(N)), size_limit=3 << 10)
        sizes = [os.path.getsize(os.path.join(cls.src, f)) for f in shard_files(cls.src)]
        index = os.path.getsize(os.path.join(cls.src, "index.json"))
        cls.shards = len(sizes)
        # The smallest limit the agent accepts for 2 workers: each may hold
        # 3 shards, plus one being fetched (and the index).
        cls.limit = index + 7 * max(sizes)
        cls.per_batch = BS * len(sizes) // N

    def check(self, remote, label):
        self.assertGreater(self.per_batch, 7, "a batch must span more shards than the limit holds")
        self.assertLess(self.limit, sum(os.path.getsize(os.path.join(self.src, f)) for f in shard_files(self.src)))
        shape, work = None, None
        for workers, feed, shm in ((0, "threads", "auto"), (2, "threads", "auto"), (2, "workers", "on")):
            with self.subTest(source=label, workers=workers, feed=feed):
                cache = os.path.join(self.tmp, "cache-" + uuid.uuid4().hex)
                ds = sluice.StreamingDataset(remote=remote, local=cache, batch_size=BS, shuffle=True, shuffle_seed=5,
                                             cache_limit=self.limit, stall_timeout=60, timeout=60)
                shape, work = helpers.plan_work(self.src, BS, workers=max(workers, 1), seed=5)
                want = helpers.rank_batches(shape, work, 0, BS)
                with Env(SLUICE_FEED=feed, SLUICE_SHM=shm), Counting() as c:
                    self.assertTrue(_shm.eligible(ds, sluice.StreamingDataset))
                    got = []
                    for b in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=workers):
                        ids = ids_of(b)
                        self.assertEqual(b["vec"].shape, (len(ids), 48))
                        self.assertTrue(torch.equal(b["vec"][:, 0], torch.tensor(ids, dtype=torch.float32)))
                        got.append(ids)
                self.assertEqual(got, want)
                self.assertEqual(sorted(i for b in got for i in b), list(range(N)))
                self.assertGreaterEqual(c.count.value, N // BS, "the feed did not run")
                self.assertLessEqual(cache_bytes(cache), self.limit)
        stats = _agent.Connection(timeout=30).call({"op": "stats"}, "stats")
        self.assertGreater(stats["downloads"], self.shards, stats)

    def test_local_source(self):
        self.check(self.src, "local")

    def test_s3(self):
        s3 = helpers.s3_env(self)
        helpers.set_env(self, s3[1])
        url = helpers.upload_s3(self, self.src, "shm-limit", s3)
        self.check(url, "s3")


if __name__ == "__main__":
    unittest.main()
