"""Live metrics from Python: StreamingDataset.metrics() (the agent's figures
for this rank, flat W&B keys) and StreamingDataLoader's per-step input wait,
with 0 and 2 real torch DataLoader workers and the threaded feed; store
retries counted through a real HTTP server that fails shard downloads."""

import gc
import http.server
import json
import os
import threading
import time
import unittest

import helpers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

import sluice
from sluice import _feed, _metrics

N = 240
BS = 8


def _sleepy_collate(delay):
    from torch.utils.data._utils.collate import default_collate

    def collate(samples):
        time.sleep(delay)
        return default_collate(samples)

    return collate


@unittest.skipIf(torch is None, "torch not installed")
class TestLoaderMetrics(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        cls.shards = helpers.write_ids(cls.remote, N, text=False)

    def setUp(self):
        self._feed = os.environ.get("SLUICE_FEED")

    def tearDown(self):
        if self._feed is None:
            os.environ.pop("SLUICE_FEED", None)
        else:
            os.environ["SLUICE_FEED"] = self._feed
        gc.collect()

    def run_loader(self, workers, feed, local, collate_delay=0.0, step=0.005):
        os.environ["SLUICE_FEED"] = feed
        ds = sluice.StreamingDataset(remote=self.remote, local=local, batch_size=BS)
        kw = {"collate_fn": _sleepy_collate(collate_delay)} if collate_delay else {}
        loader = sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=workers, **kw)
        before = ds.metrics()
        waits, ids = [], []
        for batch in loader:
            waits.append(loader.input_wait)
            ids.extend(int(x) for x in batch["id"])
            time.sleep(step)  # the step's compute
        return ds, loader, before, waits, ids

    def check_common(self, ds, loader, before, waits, ids, workers):
        self.assertEqual(sorted(ids), list(range(N)))
        m = loader.metrics()
        after = ds.metrics()
        steps = N // BS
        self.assertEqual(len(waits), steps)
        self.assertEqual(m["sluice/steps"], steps)
        self.assertTrue(all(w >= 0 for w in waits), waits)
        self.assertAlmostEqual(m["sluice/input_wait_seconds_total"], sum(waits), places=6)
        self.assertAlmostEqual(m["sluice/input_wait_seconds"], waits[-1], places=9)
        self.assertAlmostEqual(loader.input_wait_total, sum(waits), places=6)
        self.assertTrue(0.0 <= m["sluice/input_wait_fraction"] < 1.0, m)
        self.assertEqual(m["sluice/input_wait_fraction"], loader.input_wait_fraction)
        # The agent's figures for this rank: every sample of the epoch was
        # handed to its workers once, with their bytes.
        self.assertEqual(after["sluice/samples"] - before["sluice/samples"], N, after)
        self.assertEqual(after["sluice/bytes"] - before["sluice/bytes"], N * 8)  # one int64 column
        self.assertGreaterEqual(after["sluice/workers"], max(workers, 1))
        self.assertGreaterEqual(after["sluice/cache_hits"] + after["sluice/cache_misses"]
                                - before["sluice/cache_hits"] - before["sluice/cache_misses"], self.shards)
        self.assertGreater(after["sluice/time_to_first_sample_seconds"], 0)
        self.assertEqual(after["sluice/time_to_first_batch_seconds"], loader.time_to_first_batch)
        self.assertGreater(loader.time_to_first_batch, 0)
        for k, v in after.items():
            self.assertTrue(k.startswith("sluice/"), k)
            self.assertIsInstance(v, (int, float), k)
        json.dumps(m)  # plain numbers, ready for wandb.log
        return after

    def test_no_workers_waits_are_the_loader_work(self):
        # num_workers=0: torch's loop collates in the training process
        # when the loop asks for a batch, so each step's input wait holds
        # the collate's 20 ms; the 5 ms steps are the rest.
        local = os.path.join(self.tmp, "cache0")
        ds, loader, before, waits, ids = self.run_loader(0, "auto", local, collate_delay=0.02)
        after = self.check_common(ds, loader, before, waits, ids, 0)
        self.assertTrue(all(w >= 0.02 for w in waits), waits)
        self.assertGreater(loader.input_wait_fraction, 0.5)
        # A cold cache: every shard downloaded once, then held.
        self.assertEqual(after["sluice/downloads"], self.shards)
        self.assertGreater(after["sluice/cache_bytes"], 0)
        self.assertEqual(after["sluice/cache_limit_bytes"], 0)

    def test_two_worker_processes(self):
        local = os.path.join(self.tmp, "cache2")
        ds, loader, before, waits, ids = self.run_loader(2, "workers", local)
        self.check_common(ds, loader, before, waits, ids, 2)
        # The loop sleeps 5 ms a step; its waits are what is left.
        self.assertGreater(loader._input.compute_total, 0.005 * (len(waits) - 1))

    def test_threaded_feed(self):
        local = os.path.join(self.tmp, "cachet")
        ds, loader, before, waits, ids = self.run_loader(2, "threads", local)
        self.assertTrue(_feed.eligible(loader, sluice.StreamingDataset))  # threads, not processes
        self.check_common(ds, loader, before, waits, ids, 2)

    def test_second_epoch_accumulates(self):
        local = os.path.join(self.tmp, "cachee")
        os.environ["SLUICE_FEED"] = "workers"
        ds = sluice.StreamingDataset(remote=self.remote, local=local, batch_size=BS)
        loader = sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2)
        for _ in range(2):
            for _ in loader:
                pass
        m = loader.metrics()
        self.assertEqual(m["sluice/steps"], 2 * (N // BS))
        self.assertEqual(m["sluice/samples"], 2 * N)


class _FailingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory; fails the first `fail` GETs of shard files with
    a 500."""

    lock = threading.Lock()
    fail = 0
    failed = 0

    def do_GET(self):
        if self.path.endswith(".mds"):
            with self.lock:
                cls = type(self)
                if cls.failed < cls.fail:
                    cls.failed += 1
                    self.send_error(500, "injected failure")
                    return
        super().do_GET()

    def log_message(self, *args):
        pass


class TestRetriesMetric(helpers.AgentCase):
    def test_store_retries_reach_python(self):
        remote = os.path.join(self.tmp, "served")
        shards = helpers.write_ids(remote, 64, text=False)
        handler = type("H", (_FailingHandler,), {"fail": 3, "failed": 0})

        def make(*a, **kw):
            return handler(*a, directory=remote, **kw)

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            url = "http://127.0.0.1:%d" % srv.server_address[1]
            ds = sluice.StreamingDataset(remote=url, local=os.path.join(self.tmp, "servedcache"), batch_size=4)
            before = ds.metrics()
            got = sorted(int(s["id"]) for s in ds)
            after = ds.metrics()
        finally:
            srv.shutdown()
            srv.server_close()
        self.assertEqual(got, list(range(64)))
        self.assertEqual(handler.failed, 3)
        self.assertEqual(after["sluice/store_retries"] - before["sluice/store_retries"], 3, after)
        self.assertEqual(after.get("sluice/store_retries/get/server", 0)
                         - before.get("sluice/store_retries/get/server", 0), 3, after)
        self.assertEqual(after["sluice/downloads"], shards)
        self.assertEqual(after["sluice/samples"], 64)
        # The dataset's store requests and their latency: index.json's GET
        # (whose answer says what a HEAD would: no HEAD), every shard's,
        # and the three failed attempts, each a request and an error.
        self.assertEqual(after["sluice/store_requests/get"], 1 + shards + 3, after)
        self.assertEqual(after["sluice/store_errors/get"], 3, after)
        self.assertGreater(after["sluice/store_request_seconds/get"], 0.0, after)
        self.assertAlmostEqual(after["sluice/store_request_mean_seconds/get"],
                               after["sluice/store_request_seconds/get"] / (1 + shards + 3), places=9)
        self.assertNotIn("sluice/store_requests/stat", after)


class TestWebDatasetMetrics(helpers.AgentCase):
    def test_webdataset_metrics(self):
        import io
        import tarfile

        src = os.path.join(self.tmp, "tars")
        os.makedirs(src)
        for shard in range(2):
            with tarfile.open(os.path.join(src, "shard-%d.tar" % shard), "w") as tf:
                for i in range(10):
                    data = b"sample %d" % (shard * 10 + i)
                    ti = tarfile.TarInfo("%06d.txt" % (shard * 10 + i))
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
        ds = sluice.WebDataset(src, cache_dir=os.path.join(self.tmp, "tarcache"))
        before = ds.metrics()
        self.assertEqual(len(list(ds)), 20)
        after = ds.metrics()
        self.assertEqual(after["sluice/samples"] - before["sluice/samples"], 20, after)
        self.assertGreater(after["sluice/bytes"], 0)


class TestFlatten(unittest.TestCase):
    def test_flatten_keys(self):
        out = _metrics.flatten_agent({"samples": 5, "wait_seconds": 0.25, "store_retries": 2,
                                      "retries_by": [{"op": "get", "cause": "stall", "n": 2}]})
        self.assertEqual(out["sluice/samples"], 5)
        self.assertEqual(out["sluice/wait_seconds"], 0.25)
        self.assertEqual(out["sluice/store_retries/get/stall"], 2)
        self.assertEqual(out["sluice/downloads"], 0)

    def test_timer_fraction(self):
        t = _metrics.InputTimer()
        self.assertEqual(t.fraction(), 0.0)
        t.begin()
        time.sleep(0.01)
        self.assertTrue(t.got())
        time.sleep(0.01)
        t.asked()
        self.assertFalse(t.got())
        self.assertEqual(t.steps, 2)
        f = t.fraction()
        self.assertTrue(0.0 < f < 1.0, f)
        self.assertGreaterEqual(t.wait_total, 0.01)
        self.assertGreaterEqual(t.compute_total, 0.01)


if __name__ == "__main__":
    unittest.main()
