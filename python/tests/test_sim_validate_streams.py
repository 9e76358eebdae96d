"""`sluice simulate --stream` against the Python client reading a mixed
dataset: two MosaicML streams with proportions, on the real S3 server behind
the shaping proxy of test_sim_validate, read by a real torch DataLoader with
worker processes through the real agent. The epoch's samples, and the
requests and bytes the store served, must equal the simulation's: the
simulator splits the shards into the same streams for the real planner, and
counts each stream's index read as the agent's open does."""

import json
import os
import subprocess
import time
import unittest
import uuid
import warnings

import helpers
from test_sim_validate import BANDWIDTH, BATCH, EVICT_TOL, LATENCY, STEP, WORKERS, ShapingProxy, write_dataset

import mdswrite
import sluice

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover - torch is a CI dependency
    torch = None


def write_small(directory):
    """120 samples of 3000 bytes with ids from 10,000, in shards of at most
    80 KB: the second stream, its shards and ids unlike the first's."""
    cols = {"id": "int", "data": "bytes"}
    samples = ({"id": 10_000 + i, "data": bytes((3 * i + j) % 251 for j in range(3000))} for i in range(120))
    return mdswrite.write(directory, cols, samples, size_limit=80_000)


PROPORTIONS = (0.75, 0.25)


@unittest.skipIf(torch is None, "torch missing")
class SimulateStreamsValidateTest(helpers.AgentCase):
    def setUp(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        s3 = helpers.s3_env(self)
        env = s3[1]
        self.srcs = []
        self.remotes = []
        for name, write in (("a", write_dataset), ("b", write_small)):
            src = os.path.join(self.tmp, "src-%s-%s" % (name, uuid.uuid4().hex))
            write(src)
            self.srcs.append(src)
            self.remotes.append(helpers.upload_s3(self, src, "simstreams-" + name, s3))
        self.proxy = ShapingProxy(env["S3_ENDPOINT_URL"])
        self.addCleanup(self.proxy.close)
        helpers.set_env(self, dict(env, S3_ENDPOINT_URL=self.proxy.url, SLUICE_JOB=uuid.uuid4().hex))

    def simulate(self, cache_limit=None, ordered=False):
        args = [helpers.binary(), "simulate", "--batch-size", str(BATCH), "--shuffle", "--shuffle-algo", "py1s",
                "--shuffle-seed", "7", "--workers-per-rank", str(WORKERS), "--prefetch-factor", "2",
                "--latency", "%dms" % (LATENCY * 1000), "--bandwidth-per-node", str(BANDWIDTH),
                "--step-time", "%dms" % (STEP * 1000), "--json"]
        for src, p in zip(self.srcs, PROPORTIONS):
            args += ["--stream", "%s,proportion=%g" % (src, p)]
        if cache_limit:
            args += ["--cache-limit", str(cache_limit)]
        if ordered:
            args.append("--order-admissions")
        out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=120).stdout
        return json.loads(out)["report"]

    def measure(self, cache_limit=None, ordered=False):
        """One epoch through torch's DataLoader with WORKERS worker
        processes: the number of samples, the ids of each stream, and the
        requests and bytes the proxy served meanwhile."""
        cache = os.path.join(self.tmp, "cache-" + uuid.uuid4().hex)
        r0, b0 = self.proxy.counts()  # the indexes are read as the dataset opens
        streams = [sluice.Stream(remote=r, local=os.path.join(cache, n), proportion=p)
                   for r, n, p in zip(self.remotes, ("a", "b"), PROPORTIONS)]
        ds = sluice.StreamingDataset(streams=streams, batch_size=BATCH, shuffle=True, shuffle_algo="py1s",
                                     shuffle_seed=7, cache_limit=cache_limit, order_admissions=ordered)
        loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, prefetch_factor=2, timeout=60)
        ids = []
        for batch in loader:
            ids.extend(int(i) for i in batch["id"])
            time.sleep(STEP)
        r1, b1 = self.proxy.counts()
        if os.environ.get("SLUICE_SIM_DEBUG"):
            for meth, path, _ in self.proxy.log[-(r1 - r0):]:
                print("    %s %s" % (meth, path))
        return ids, r1 - r0, b1 - b0

    def check(self, cache_limit=None, ordered=False, exact=True):
        rep = self.simulate(cache_limit, ordered)
        if os.environ.get("SLUICE_SIM_DEBUG"):
            print(json.dumps(rep, indent=1)[:3000])
        ids, requests, nbytes = self.measure(cache_limit, ordered)
        print("\n  %d samples in %d requests, %d bytes (simulated %d in %d, %d)" % (
            len(ids), requests, nbytes, rep["samples"], rep["store_requests"], rep["store_bytes"]))
        self.assertEqual(len(ids), rep["samples"])
        # MosaicML's proportions: 0.75 and 0.25 of the 360 samples of the
        # two streams (the epoch padded to whole batches of every worker
        # with repeats): all 240 of the first (ids below 10,000), drawn
        # 270 times, and 90 of the second's 120.
        first = {i for i in ids if i < 10_000}
        self.assertEqual((len(first), len(set(ids)) - len(first)), (240, 90))
        if exact:
            self.assertEqual((requests, nbytes), (rep["store_requests"], rep["store_bytes"]),
                             "store requests and bytes, measured vs simulated")
        else:
            # The workers race for room (test_sim_validate's
            # test_workers_evicting).
            off = abs(nbytes - rep["store_bytes"]) / rep["store_bytes"]
            self.assertLessEqual(off, EVICT_TOL, "store bytes under evictions: measured %d (%d requests), "
                                 "simulated %d (%d)" % (nbytes, requests, rep["store_bytes"], rep["store_requests"]))

    def test_streams_workers(self):
        # Every shard of both streams once, plus each stream's index.
        self.check()

    def test_streams_workers_evicting(self):
        # The same cache, the workers not taking turns: within the bound
        # the single dataset's validation allows.
        self.check(cache_limit=600_000, exact=False)

    def test_streams_workers_evicting_ordered(self):
        # A cache of a few shards over both streams' folders (the agent
        # caches the streams under their common directory, one limit): the
        # epoch downloads shards again, the workers taking their shard
        # changes in turn, so what is fetched again is the plan's.
        self.check(cache_limit=600_000, ordered=True)


if __name__ == "__main__":
    unittest.main()
