"""StreamingDataset in one process against a real agent."""

import io
import json
import os
import signal
import subprocess
import sys
import time
import unittest

import helpers
import mdswrite
import sluice
from sluice import _agent

try:
    import numpy as np
    from PIL import Image
except ImportError:  # pragma: no cover
    np = Image = None


def stats(start=False):
    c = _agent.Connection(start=start, timeout=10)
    try:
        return c.call({"op": "stats"}, "stats")
    finally:
        c.close()


def wait_idle(deadline_s=10):
    """Waits until the agent holds no iterations or leases beyond the probe."""
    end = time.monotonic() + deadline_s
    while True:
        s = stats()
        if s["leases"] == 0 and s["iterations"] == 0:
            return s
        if time.monotonic() > end:
            raise AssertionError("agent still busy: %r" % s)
        time.sleep(0.02)


class SingleProcessTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 203)

    def dataset(self, **kw):
        kw.setdefault("remote", self.remote)
        kw.setdefault("local", os.path.join(self.tmp, "cache"))
        kw.setdefault("batch_size", 4)
        kw.setdefault("shuffle", True)
        return sluice.StreamingDataset(**kw)

    def test_epochs_follow_plan(self):
        ds = self.dataset()
        self.assertEqual(len(ds), 203)
        self.assertEqual(ds.num_samples, 203)
        for epoch in range(2):
            got = [s["id"] for s in ds]
            shape, work = helpers.plan_work(self.remote, 4, epoch=epoch)
            self.assertEqual(got, helpers.worker_ids(shape, work, 0, 0), "epoch %d" % epoch)
            self.assertEqual(sorted(got), list(range(203)))

    def test_tight_cache_limit(self):
        # Room for a few shards only: the iteration still completes, in
        # order, with eviction between batches.
        tight = os.path.join(self.tmp, "tight")
        helpers.write_ids(tight, 400, size_limit=1 << 10)
        biggest = max(os.path.getsize(os.path.join(tight, f)) for f in os.listdir(tight) if f.endswith(".mds"))
        index = os.path.getsize(os.path.join(tight, "index.json"))
        ds = self.dataset(remote=tight, local=os.path.join(self.tmp, "tight-cache"), cache_limit=index + 6 * biggest)
        got = [s["id"] for s in ds]
        shape, work = helpers.plan_work(tight, 4)
        self.assertEqual(got, helpers.worker_ids(shape, work, 0, 0))

    def test_inline_and_small_fetches(self):
        a = [s["id"] for s in self.dataset(inline_max=1 << 20, fetch_size=3)]
        b = [s["id"] for s in self.dataset(fetch_size=1)]
        self.assertEqual(a, b)

    def test_streams(self):
        other = os.path.join(self.tmp, "other")
        helpers.write_ids(other, 50)
        ds = sluice.StreamingDataset(
            streams=[sluice.Stream(remote=self.remote, local=os.path.join(self.tmp, "s1"), proportion=0.5),
                     sluice.Stream(remote=other, local=os.path.join(self.tmp, "s2"), proportion=0.5)],
            epoch_size=100, batch_size=4, shuffle=True)
        got = [s["id"] for s in ds]
        self.assertEqual(len(got), 100)
        out = subprocess.run([helpers.binary(), "plan", "--json", "--batch-size", "4", "--shuffle", "--epoch-size", "100",
                              "--stream", self.remote + ",proportion=0.5", "--stream", other + ",proportion=0.5"],
                             check=True, stdout=subprocess.PIPE).stdout
        doc = json.loads(out)
        want_ids = helpers.worker_ids(doc["work_shape"], doc["work"], 0, 0)
        # Global IDs of the second stream start after the first's 203.
        self.assertEqual(got, [i if i < 203 else i - 203 for i in want_ids])

    def test_getitem(self):
        ds = self.dataset()
        self.assertEqual(ds[17], {"id": 17, "text": "sample 17 xxxx"})
        self.assertEqual(ds[-1]["id"], 202)
        with self.assertRaises(IndexError):
            ds[203]

    def test_state_dict_before_and_after(self):
        ds = self.dataset()
        st = ds.state_dict(0, False)
        self.assertEqual(st["epoch"], -1)
        self.assertEqual((st["num_canonical_nodes"], st["shuffle_seed"], st["initial_physical_nodes"]), (1, 9176, 1))
        it = iter(ds)
        for _ in range(10):
            next(it)
        st = ds.state_dict(10, False)
        self.assertEqual((st["epoch"], st["sample_in_epoch"]), (0, 10))
        rest = [s["id"] for s in it]
        ds2 = self.dataset()
        ds2.load_state_dict(st)
        self.assertEqual([s["id"] for s in ds2], rest)

    def test_many_column_types(self):
        if np is None:
            self.skipTest("numpy/Pillow missing")
        buf = io.BytesIO()
        Image.new("RGB", (5, 3), (200, 10, 30)).save(buf, format="PNG")
        png = buf.getvalue()
        cols = {"i": "int", "s": "str", "b": "bytes", "u": "uint16", "f": "float32", "j": "json",
                "si": "str_int", "sf": "str_float", "a": "ndarray:int16:2,3", "d": "ndarray", "img": "png"}
        samples = []
        for k in range(20):
            samples.append({"i": -k, "s": "ü%d" % k, "b": bytes([k] * k), "u": 60000 + k, "f": k / 4,
                            "j": {"k": k, "l": [k, None]}, "si": 10 ** 30 + k, "sf": k / 3,
                            "a": np.arange(6, dtype=np.int16).reshape(2, 3) * k,
                            "d": np.full((k % 3 + 1,), k, dtype=np.uint8), "img": png})
        remote = os.path.join(self.tmp, "typed")
        mdswrite.write(remote, cols, samples, size_limit=1 << 12)
        ds = self.dataset(remote=remote, local=os.path.join(self.tmp, "typed-cache"), shuffle=False)
        got = list(ds)
        self.assertEqual(len(got), 20)
        for k, g in enumerate(got):
            w = samples[k]
            for c in ("i", "s", "b", "u", "j", "si"):
                self.assertEqual(g[c], w[c], c)
            self.assertIsInstance(g["u"], np.uint16)
            self.assertAlmostEqual(float(g["f"]), w["f"])
            self.assertEqual(g["sf"], w["sf"])
            np.testing.assert_array_equal(g["a"], w["a"])
            np.testing.assert_array_equal(g["d"], w["d"])
            self.assertEqual((g["img"].format, g["img"].size, g["img"].getpixel((0, 0))), ("PNG", (5, 3), (200, 10, 30)))

    def test_errors(self):
        with self.assertRaises(sluice.DatasetNotFoundError):
            self.dataset(remote=os.path.join(self.tmp, "missing"), local=os.path.join(self.tmp, "c2"))
        with self.assertRaises(sluice.InvalidArgumentError):
            self.dataset(shuffle_algo="nope")
        with self.assertRaises(ValueError):
            sluice.StreamingDataset(remote=self.remote, streams=[sluice.Stream(remote=self.remote)])
        # A shard whose offset table is garbage: the reader rejects it.
        bad = os.path.join(self.tmp, "corrupt")
        helpers.write_ids(bad, 30)
        with open(os.path.join(bad, "shard.00000.mds"), "r+b") as f:
            f.seek(4)
            f.write(b"\xff" * 8)
        ds = self.dataset(remote=bad, local=os.path.join(self.tmp, "corrupt-cache"), shuffle=False)
        t0 = time.monotonic()
        with self.assertRaises(sluice.CorruptDataError) as cm:
            list(ds)
        self.assertIn("shard.00000.mds", str(cm.exception))
        self.assertLess(time.monotonic() - t0, 20)
        # A shard shorter than the index says: the download fails clearly.
        short = os.path.join(self.tmp, "short")
        helpers.write_ids(short, 30)
        with open(os.path.join(short, "shard.00000.mds"), "r+b") as f:
            f.truncate(20)
        ds = self.dataset(remote=short, local=os.path.join(self.tmp, "short-cache"), shuffle=False)
        with self.assertRaises(sluice.SluiceError) as cm:
            list(ds)
        self.assertIn("shard.00000.mds", str(cm.exception))

    def test_abandoned_iteration_releases_leases(self):
        ds = self.dataset()
        it = iter(ds)
        next(it)
        self.assertGreater(stats()["leases"], 0)
        it.close()
        wait_idle()


class AgentLifecycleTest(helpers.AgentCase):
    idle = "2s"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 150)

    def dataset(self, **kw):
        return sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, "cache"),
                                       batch_size=4, shuffle=True, **kw)

    def test_concurrent_starts_one_agent(self):
        helpers.stop_agent(self.agent_dir)
        code = ("import sys, helpers; from sluice import _agent; c = _agent.Connection(); "
                "print(c.agent_pid, flush=True); sys.stdin.read()")
        procs = [subprocess.Popen([sys.executable, "-c", code], cwd=helpers.HERE, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE) for _ in range(4)]
        try:
            pids = {int(helpers.readline(p.stdout)) for p in procs}
            self.assertEqual(len(pids), 1, pids)
            self.assertEqual(pids, {helpers.agent_pid(self.agent_dir)})
            st = os.stat(os.path.join(self.agent_dir, "agent.sock"))
            self.assertEqual(st.st_mode & 0o777, 0o600)
            self.assertEqual(os.stat(self.agent_dir).st_mode & 0o777, 0o700)
        finally:
            for p in procs:
                p.stdin.close()
                p.wait(timeout=30)

    def test_killed_agent_recovers_mid_epoch(self):
        ds = self.dataset()
        want = [s["id"] for s in ds]  # epoch 0 on an undisturbed agent
        ds = self.dataset(fetch_size=16)  # many requests, so one meets the kill
        it = iter(ds)
        got = [next(it)["id"] for _ in range(37)]
        old = helpers.agent_pid(self.agent_dir)
        os.kill(old, signal.SIGKILL)
        end = time.monotonic() + 10
        while helpers.agent_pid(self.agent_dir) == old and time.monotonic() < end:
            time.sleep(0.01)
        # Samples of the batch already received come first; the request
        # after them finds the agent gone, starts a new one and continues.
        t0 = time.monotonic()
        new = None
        for s in it:
            got.append(s["id"])
            if new is None:
                new = helpers.agent_pid(self.agent_dir)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(got, want)
        self.assertIsNotNone(new)
        self.assertNotEqual(new, old)

    def test_dead_agent_without_binary_is_a_clear_error(self):
        ds = self.dataset(fetch_size=16)
        it = iter(ds)
        next(it)
        saved = os.environ["SLUICE_BIN"]
        os.environ["SLUICE_BIN"] = os.path.join(self.tmp, "no-such-binary")
        try:
            helpers.stop_agent(self.agent_dir, signal.SIGKILL)
            t0 = time.monotonic()
            with self.assertRaises(sluice.AgentError):
                list(it)
            self.assertLess(time.monotonic() - t0, 15)
        finally:
            os.environ["SLUICE_BIN"] = saved

    def test_idle_agent_exits(self):
        ds = self.dataset()
        pid = helpers.agent_pid(self.agent_dir)
        ds._conn.close()
        end = time.monotonic() + 15
        while helpers.agent_pid(self.agent_dir) == pid and time.monotonic() < end:
            time.sleep(0.05)
        self.assertIsNone(helpers.agent_pid(self.agent_dir))
        self.assertFalse(os.path.exists(os.path.join(self.agent_dir, "agent.sock")))
        # The next client starts a new one.
        self.assertEqual(len(list(self.dataset())), 150)


if __name__ == "__main__":
    unittest.main()
