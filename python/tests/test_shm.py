"""The shared-memory feed (sluice._shm): batches the agent assembles in
memory files. The same batches (ids, values, dtypes) as the mapped-shard
path at 0, 2 and 4 workers, as threads (the feed) and as torch's worker
processes; exactly once per epoch; resume mid-epoch; slots reused and
never overwritten while viewed; no shared-memory residue (/dev/shm, the
agent's descriptors) after SIGKILL of the training process or the agent;
hostile batch headers refused."""

import collections
import gc
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import helpers
import mdswrite

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = np = None

import sluice
from sluice import _agent, _shm, errors


def ids_of(batch):
    return [int(x) for x in batch["id"]]


class Env:
    """Sets environment variables for a with-block."""

    def __init__(self, **kw):
        self.kw = kw

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.kw}
        for k, v in self.kw.items():
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Counting:
    """Counts the feed batches mapped, in this process and in forked
    DataLoader workers (a shared counter)."""

    def __enter__(self):
        self.count = multiprocessing.Value("i", 0)
        self.orig = _shm.Slots.batch
        count, orig = self.count, self.orig

        def batch(slots, hdr, fds):
            b = orig(slots, hdr, fds)
            if b is not None:
                with count.get_lock():
                    count.value += 1
            return b

        _shm.Slots.batch = batch
        return self

    def __exit__(self, *exc):
        _shm.Slots.batch = self.orig


def run(ds, bs, workers, feed, shm, stop=None, keep=False):
    """Iterates a StreamingDataLoader; returns (batches, state at stop)."""
    with Env(SLUICE_FEED=feed, SLUICE_SHM=shm):
        loader = sluice.StreamingDataLoader(ds, batch_size=bs, num_workers=workers)
        out, state = [], None
        for b in loader:
            out.append(b if keep else ids_of(b))
            if stop is not None and len(out) == stop:
                state = loader.state_dict()
                break
        del loader
        gc.collect()
        return out, state


def agent_memfds(pid):
    """The memory files the agent process holds open."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("/memfd:"):
                    n += 1
            except OSError:
                pass
    except FileNotFoundError:
        return 0
    return n


@unittest.skipIf(torch is None, "torch missing")
class ShmTest(helpers.AgentCase):
    N = 2000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "data")
        helpers.write_ids(cls.data, cls.N)
        cls.mixed = os.path.join(cls.tmp, "mixed")
        cols = {"id": "int", "text": "str", "i32": "int32", "f16": "float16", "f64": "float64", "u8": "uint8",
                "arr": "ndarray:float32:2,3", "img": "ndarray:uint8:4,4,3", "blob": "bytes", "meta": "json",
                "var": "ndarray:int16"}

        def gen():
            for i in range(300):
                yield {"id": i, "text": "s%d" % i, "i32": np.int32(i * 3 - 500), "f16": np.float16(i / 7),
                       "f64": np.float64(i / 3), "u8": np.uint8(i % 256),
                       "arr": np.arange(6, dtype=np.float32).reshape(2, 3) + i,
                       "img": np.full((4, 4, 3), i % 256, np.uint8), "blob": bytes([i % 256]) * (i % 5),
                       "meta": {"k": i}, "var": np.arange(3, dtype=np.int16) + i}

        mdswrite.write(cls.mixed, cols, gen(), size_limit=4096)

    def dataset(self, **kw):
        kw.setdefault("shuffle", True)
        kw.setdefault("shuffle_seed", 17)
        kw.setdefault("batch_size", 32)
        local = kw.pop("local", self.data)
        return sluice.StreamingDataset(local=local, **kw)

    def test_order_threads_and_processes(self):
        """At 0, 2 and 4 workers, as the feed's threads and as torch's
        worker processes: the shared-memory path yields exactly the
        mapped-shard path's batches, the plan's order, each sample once,
        and it really ran (feed batches counted, in workers too)."""
        for workers in (0, 2, 4):
            want, _ = run(self.dataset(), 32, workers, "workers", "off")
            shape, work = helpers.plan_work(self.data, 32, workers=max(workers, 1), seed=17)
            self.assertEqual(want, helpers.rank_batches(shape, work, 0, 32))
            for feed in ("threads", "workers"):
                with self.subTest(workers=workers, feed=feed), Counting() as c:
                    got, _ = run(self.dataset(), 32, workers, feed, "on")
                    self.assertEqual(got, want)
                    self.assertEqual(sorted(i for b in got for i in b), list(range(self.N)))
                    self.assertGreaterEqual(c.count.value, self.N // 32)

    def test_values_match_default_collate(self):
        """Every column type (collated tensors of each dtype and shape,
        strings, bytes, JSON, variable ndarrays) equals default_collate's
        batch of the mapped-shard path, type for type."""
        for workers, feed in ((2, "threads"), (2, "workers"), (0, "workers")):
            with self.subTest(workers=workers, feed=feed):
                # variable-shape ndarrays do not collate; compare the rest
                a, _ = run(self.dataset(local=self.mixed, batch_size=16), 16, workers, feed, "off", keep=True)
                b, _ = run(self.dataset(local=self.mixed, batch_size=16), 16, workers, feed, "on", keep=True)
                self.assertEqual(len(a), len(b))
                for x, y in zip(a, b):
                    self.assertEqual(list(x), list(y))
                    for k in x:
                        if isinstance(x[k], torch.Tensor):
                            self.assertEqual((x[k].dtype, x[k].shape), (y[k].dtype, y[k].shape), k)
                            self.assertTrue(torch.equal(x[k], y[k]), k)
                        else:
                            self.assertEqual(type(x[k]), type(y[k]), k)
                            self.assertEqual(repr(x[k]), repr(y[k]), k)

    def test_resume_mid_epoch(self):
        """A checkpoint taken on the shared-memory path after 20 batches
        resumes, on it or on the mapped-shard path, with exactly the
        samples not yet seen, in the plan's order."""
        full, _ = run(self.dataset(), 32, 2, "threads", "on")
        first, state = run(self.dataset(), 32, 2, "threads", "on", stop=20)
        self.assertEqual(first, full[:20])
        self.assertEqual(state["sample_in_epoch"], 640)
        seen = [i for b in first for i in b]
        for feed, shm in (("threads", "on"), ("workers", "on"), ("threads", "off")):
            with self.subTest(feed=feed, shm=shm):
                ds = self.dataset()
                ds.load_state_dict(state)
                rest, _ = run(ds, 32, 2, feed, shm)
                flat = [i for b in rest for i in b]
                self.assertEqual(sorted(seen + flat), list(range(self.N)))
                shape, work = helpers.plan_work(self.data, 32, workers=2, seed=17, sample_in_epoch=640)
                self.assertEqual(rest, helpers.rank_batches(shape, work, 0, 32))

    def test_agent_killed_mid_epoch(self):
        """SIGKILL of the agent mid-epoch: the client starts a new one and
        continues after the last batch delivered, the same batches in the
        same order, each sample once."""
        want, _ = run(self.dataset(), 32, 2, "threads", "on")
        got = []
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"), Counting() as c:
            for b in sluice.StreamingDataLoader(self.dataset(), batch_size=32, num_workers=2):
                got.append(ids_of(b))
                if len(got) == 10:
                    pid = helpers.agent_pid(self.agent_dir)
                    os.kill(pid, signal.SIGKILL)
                    deadline = time.monotonic() + 20
                    while helpers.agent_pid(self.agent_dir) == pid and time.monotonic() < deadline:
                        time.sleep(0.02)
            self.assertGreaterEqual(c.count.value, len(want))
        self.assertEqual(got, want)

    def test_held_batches_are_never_overwritten(self):
        """Batches the user keeps stay intact while later ones are written
        (a slot is reused only once nothing views it); slots are reused
        when batches are dropped."""
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"):
            ds = self.dataset(local=self.mixed, batch_size=8)
            kept = [(ids_of(b), b) for b in sluice.StreamingDataLoader(ds, batch_size=8, num_workers=2)]
        for ids, b in kept:
            self.assertEqual(b["arr"][:, 0, 0].tolist(), [float(i) for i in ids])
            self.assertEqual(b["img"][:, 0, 0, 0].tolist(), [i % 256 for i in ids])
        # Dropped batches: few memory files for many batches.
        fds = collections.Counter()
        orig = _shm.Slots.batch

        def batch(slots, hdr, got):
            fds[bool(got)] += 1
            return orig(slots, hdr, got)

        _shm.Slots.batch = batch
        try:
            n, _ = run(self.dataset(batch_size=8), 8, 2, "threads", "on")
        finally:
            _shm.Slots.batch = orig
        self.assertEqual(len(n), self.N // 8)
        self.assertLess(fds[True], 20)

    def test_hostile_headers(self):
        """check_layout refuses every mutated header of a real batch with
        ProtocolError (never another exception, never a read outside)."""
        grabbed = []
        orig = _shm.Slots.batch

        def batch(slots, hdr, fds):
            b = orig(slots, hdr, fds)
            if b is not None and not grabbed:
                grabbed.append((json.loads(json.dumps(hdr)), bytes(b.mem)))
            return b

        _shm.Slots.batch = batch
        try:
            run(self.dataset(local=self.mixed, batch_size=16), 16, 0, "threads", "on", stop=1)
        finally:
            _shm.Slots.batch = orig
        hdr, mem = grabbed[0]
        cols = _shm.check_layout(hdr, mem)
        self.assertEqual(len(cols), 11)
        rnd = random.Random(5)
        values = [-1, 0, 1, 7, len(mem), len(mem) + 1, 1 << 40, "x", None, [], 2.5]
        refused = 0
        for _ in range(3000):
            h = json.loads(json.dumps(hdr))
            m = bytearray(mem)
            what = rnd.randrange(4)
            if what == 0:
                h[rnd.choice(["n", "size", "samples"])] = rnd.choice(values)
            elif what == 1:
                c = rnd.choice(h["columns"])
                c[rnd.choice(["offset", "size", "stride", "index", "shape", "dtype", "kind", "name"])] = rnd.choice(
                    values + ["int64", "var", "fixed", "text", [3, -1], [1 << 30, 1 << 30]])
            elif what == 2:
                for _ in range(8):
                    m[rnd.randrange(len(m))] = rnd.randrange(256)
            else:
                m = m[: rnd.randrange(len(m))]
            try:
                out = _shm.check_layout(h, m)
            except errors.ProtocolError:
                refused += 1
                continue
            # Accepted: every value lies inside the memory.
            for name, enc, kind, dt, shape, off, stride, offs in out:
                end = off + (h["n"] * stride if kind == "fixed" else offs[-1])
                self.assertLessEqual(end, len(m))
        self.assertGreater(refused, 1000)

    def test_auto_takes_it_where_it_measured_faster(self):
        """SLUICE_SHM=auto: the agent's batches for a fixed-shape ndarray
        column or an in-agent transform; the mapped shards for bytes and
        strings only, or with a __getitem__ override (also under a
        cache_limit: test_shm_limit.py); on: wherever equivalent; off:
        never."""
        ids_only = self.dataset()
        mixed = self.dataset(local=self.mixed)

        class Sub(sluice.StreamingDataset):
            def __getitem__(self, i):
                return super().__getitem__(i)

        sub = Sub(local=self.mixed, batch_size=32)
        limited = self.dataset(local=self.mixed, cache_limit="1gb")
        cls = sluice.StreamingDataset
        with Env(SLUICE_SHM="auto"):
            self.assertTrue(_shm.eligible(mixed, cls))
            self.assertFalse(_shm.eligible(ids_only, cls))
            ids_only._feed_transforms = [{"column": "text", "transform": "x"}]
            self.assertTrue(_shm.eligible(ids_only, cls))
            del ids_only._feed_transforms
            self.assertFalse(_shm.eligible(sub, cls))
            self.assertTrue(_shm.eligible(limited, cls))
        with Env(SLUICE_SHM="on"):
            self.assertTrue(_shm.eligible(ids_only, cls))
            self.assertTrue(_shm.eligible(limited, cls))
        with Env(SLUICE_SHM="off"):
            self.assertFalse(_shm.eligible(mixed, cls))
        with Env(SLUICE_SHM="bogus"), self.assertRaises(ValueError):
            _shm.eligible(mixed, cls)
        # A transform the agent does not know is refused by name.
        ds = self.dataset()
        ds._feed_transforms = [{"column": "text", "transform": "nope"}]
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"), self.assertRaisesRegex(errors.SluiceError, "nope"):
            for _ in sluice.StreamingDataLoader(ds, batch_size=32, num_workers=2):
                pass

    def test_old_agent_protocol_falls_back(self):
        """A connection that settled on protocol 1 never asks for feed
        batches: the mapped-shard path serves it."""
        c = _agent.Connection(self.agent_dir)
        try:
            self.assertTrue(_shm.supports(c))
            c.version = 1
            self.assertFalse(_shm.supports(c))
        finally:
            c.close()

    def _kill_trial(self, kill_agent, feed):
        """Runs a training process on the shared-memory path, SIGKILLs it
        (or the agent first), and checks that nothing is left: no new name
        in /dev/shm, and the agent (when alive) holds no memory file."""
        before = helpers.shm_names()
        # The trial's own agent: the memory files counted below are then the
        # dead client's alone. (The class's agent also serves this process,
        # whose earlier tests' loaders may still hold live slots, and after
        # an agent restart their feed threads reconnect and take new ones.)
        agent_dir = tempfile.mkdtemp(prefix="agent-", dir=self.tmp)
        env = dict(os.environ, SLUICE_AGENT_DIR=agent_dir)
        script = textwrap.dedent("""
            import os, sys
            sys.path.insert(0, %r)
            os.environ["SLUICE_FEED"] = %r
            os.environ["SLUICE_SHM"] = "on"
            import sluice
            ds = sluice.StreamingDataset(local=%r, batch_size=8, shuffle=True)
            loader = sluice.StreamingDataLoader(ds, batch_size=8, num_workers=%d)
            n = 0
            held = []
            while True:
                for b in loader:
                    n += 1
                    held = (held + [b])[-3:]
                    if n == 5:
                        print("ready", flush=True)
        """) % (os.path.dirname(sluice.__path__[0]), feed, self.data, 4 if feed == "threads" else 2)
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            line = helpers.readline(p.stdout)
            self.assertEqual(line.strip(), b"ready", p.stderr.read(2000) if not line else line)
            pid = helpers.agent_pid(agent_dir)
            self.assertIsNotNone(pid)
            self.assertGreater(agent_memfds(pid), 0, "the agent holds no slot: the feed did not run")
            if kill_agent:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 20
                while helpers.agent_pid(agent_dir) == pid and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.3)
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            pid = helpers.agent_pid(agent_dir)
            if pid is not None:
                deadline = time.monotonic() + 20
                while agent_memfds(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertEqual(agent_memfds(pid), 0, "the agent kept memory files of a dead client")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()
            helpers.stop_agent(agent_dir)
        self.assertEqual(helpers.shm_names() - before, set())

    def test_no_residue_after_sigkill_of_training(self):
        for feed in ("threads", "workers"):
            with self.subTest(feed=feed):
                self._kill_trial(False, feed)

    def test_no_residue_after_sigkill_of_agent(self):
        for feed in ("threads", "workers"):
            with self.subTest(feed=feed):
                self._kill_trial(True, feed)


if __name__ == "__main__":
    unittest.main()
