"""sluice.WebDataset over tar shards on the real S3 server (versitygw under
.ci/with-services.sh): rank processes with torchrun-style environments and
DataLoader workers, a cache limit smaller than the data, exact resume on
another world size."""

import io
import json
import os
import subprocess
import sys
import tarfile
import unittest
import uuid

import helpers

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

SHARDS, PER, B = 48, 10, 4
N = SHARDS * PER
RANK = os.path.join(helpers.HERE, "test_wds_rank.py")


def write_tars(directory):
    """SHARDS tars written by Python's tarfile (as webdataset's TarWriter
    does): samples s000000.. with a jpg of 3000+ bytes and a cls."""
    os.makedirs(directory, exist_ok=True)
    total = 0
    for k in range(SHARDS):
        path = os.path.join(directory, "shard-%06d.tar" % k)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for j in range(PER):
                i = k * PER + j
                for ext, data in (("cls", str(i).encode()), ("jpg", bytes([i % 251]) * (3000 + i % 7))):
                    ti = tarfile.TarInfo("s%06d.%s" % (i, ext))
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
        total += os.path.getsize(path)
    return total


@unittest.skipIf(torch is None, "torch missing")
class S3TarTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.src = os.path.join(cls.tmp, "tars")
        cls.total = write_tars(cls.src)

    def setUp(self):
        s3 = helpers.s3_env(self)
        helpers.set_env(self, s3[1])
        prefix = helpers.upload_s3(self, self.src, "wds", s3)
        self.remote = prefix + "/shard-{000000..%06d}.tar" % (SHARDS - 1)
        # Under the data's size (the shards must be evicted and fetched
        # again while the epoch runs), above what the agent requires: each
        # of 4 ranks x 2 workers holding up to 3 shards, one being fetched.
        shard = max(os.path.getsize(os.path.join(self.src, f)) for f in os.listdir(self.src))
        self.limit = 30 * shard
        self.assertLess(self.limit, self.total)

    def run_ranks(self, ranks, cfg, job):
        # The agent requires room for 3 shards per DataLoader worker of
        # every local rank plus one being fetched (a shard's footprint is
        # at most twice its tar here: the tar and its index), so the limit
        # is the larger of that and half the data.
        w = max(max(cfg["workers"]), 1)
        limit = max(self.limit, (ranks * w * 3 + 1) * 2 * (self.total // SHARDS + 512) + (64 << 10))
        procs = []
        for r in range(ranks):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(ranks), LOCAL_RANK=str(r),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT="29700")
            out = os.path.join(self.tmp, "%s-%d.json" % (job, r))
            c = dict({"remote": self.remote, "local": os.path.join(self.tmp, "cache"), "cache_size": limit,
                      "batch_size": B}, **cfg, job=job, out=out)
            procs.append((subprocess.Popen([sys.executable, RANK, json.dumps(c)], env=env, cwd=helpers.HERE), out))
        results = []
        for p, out in procs:
            self.assertEqual(p.wait(timeout=300), 0, "rank process failed")
            with open(out) as f:
                results.append(json.load(f))
        return results

    def test_exactly_once_ranks_workers(self):
        for ranks in (1, 2, 4):
            results = self.run_ranks(ranks, {"workers": [0, 2]}, "once%d-%s" % (ranks, uuid.uuid4().hex[:6]))
            for w in ("0", "2"):
                seen = [i for r in results for b in r[w]["batches"] for i in b]
                self.assertEqual(sorted(seen), list(range(N)), "ranks=%d workers=%s" % (ranks, w))

    def test_resume_on_other_world(self):
        job = uuid.uuid4().hex[:6]
        first = self.run_ranks(2, {"workers": [2], "stop_after": 7}, "ra-" + job)
        state = first[0]["2"]["state"]
        self.assertEqual(state, first[1]["2"]["state"])
        self.assertEqual(state["sample_in_epoch"], 7 * B * 2)
        second = self.run_ranks(4, {"workers": [0], "resume": state}, "rb-" + job)
        seen = [i for r in first for b in r["2"]["batches"] for i in b]
        seen += [i for r in second for b in r["0"]["batches"] for i in b]
        self.assertEqual(sorted(seen), list(range(N)))


if __name__ == "__main__":
    unittest.main()
