"""sluice.WebDataset(urls, index=False): tar shards streamed in WebDataset's
sequential way by the agent, without an index (docs/format/wds.md,
"no-index mode"), through real torch DataLoader workers; ranks are placed
by the launcher variables (RANK, WORLD_SIZE), one rank after another."""

import io
import os
import tarfile
import unittest
import uuid
import warnings

import helpers
import sluice
from sluice import errors

try:
    import torch  # noqa: F401
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover
    torch = None

SHARDS = 9
BATCH = 3


def shard_samples(k):
    return 4 + k % 3  # uneven shards: 4, 5, 6 samples


def write_tars(directory):
    os.makedirs(directory, exist_ok=True)
    keys = []
    sid = 0
    for k in range(SHARDS):
        with tarfile.open(os.path.join(directory, "shard-%06d.tar" % k), "w", format=tarfile.USTAR_FORMAT) as tf:
            for _ in range(shard_samples(k)):
                key = "s%06d" % sid
                keys.append(key)
                for ext, data in (("cls", str(sid).encode()), ("bin", bytes([sid % 256]) * (50 + sid % 7))):
                    ti = tarfile.TarInfo("%s.%s" % (key, ext))
                    ti.size = len(data)
                    tf.addfile(ti, io.BytesIO(data))
                sid += 1
    return keys


class _Rank:
    """Places this process at rank r of n for the block's duration."""

    def __init__(self, r, n):
        self.r, self.n = r, n

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK")}
        os.environ.update(RANK=str(self.r), WORLD_SIZE=str(self.n), LOCAL_WORLD_SIZE=str(self.n), LOCAL_RANK=str(self.r))

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@unittest.skipIf(torch is None, "needs torch")
class NoIndexTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "tars")
        cls.keys = write_tars(cls.data)

    def setUp(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        self._job = os.environ.get("SLUICE_JOB")
        self.addCleanup(self._restore_job)

    def _restore_job(self):
        if self._job is None:
            os.environ.pop("SLUICE_JOB", None)
        else:
            os.environ["SLUICE_JOB"] = self._job

    def new_job(self):
        os.environ["SLUICE_JOB"] = uuid.uuid4().hex

    def dataset(self, shuffle=True):
        return sluice.WebDataset(self.data, shardshuffle=shuffle, shuffle_seed=5, batch_size=BATCH, index=False,
                                 timeout=60)

    def check_sample(self, key, cls, data):
        i = int(cls)
        self.assertEqual(key, "s%06d" % i)
        self.assertEqual(data, bytes([i % 256]) * (50 + i % 7))

    def batches(self, ds, workers, limit=None, loader=None):
        pipe = ds.to_tuple("__key__", "cls", "bin", "__url__")
        if loader is None:
            loader = sluice.StreamingDataLoader(pipe, batch_size=BATCH, num_workers=workers)
        out = []
        for keys, cls, data, urls in loader:
            for k, c, d, u in zip(keys, cls, data, urls):
                self.check_sample(k, c, d)
                self.assertTrue(u.startswith(self.data) and u.endswith(".tar"), u)
            out.append(list(keys))
            if limit is not None and len(out) == limit:
                break
        return out, loader

    def epoch(self, ds, ranks, workers):
        """Each rank's keys of one epoch, in order."""
        out = []
        for r in range(ranks):
            with _Rank(r, ranks):
                b, _ = self.batches(ds, workers)
                out.append([k for batch in b for k in batch])
        return out

    def test_exactly_once_ranks_workers(self):
        for ranks in (1, 2):
            for workers in (0, 2):
                with self.subTest(ranks=ranks, workers=workers):
                    self.new_job()
                    ds = self.dataset()
                    for ep in range(2):
                        per_rank = self.epoch(ds, ranks, workers)
                        got = [k for keys in per_rank for k in keys]
                        self.assertEqual(sorted(got), self.keys, "epoch %d" % ep)
                        if ranks == 2:
                            self.assertTrue(all(per_rank), per_rank)

    def test_shard_order(self):
        self.new_job()
        ds = self.dataset()
        e0, e1 = self.epoch(ds, 1, 0)[0], self.epoch(ds, 1, 0)[0]
        self.assertNotEqual(e0, e1, "shardshuffle: the same shard order in epochs 0 and 1")
        # Samples stay in archive order within a shard: every run of a
        # shard's keys is consecutive and increasing.
        self.assertEqual(sorted(e0), self.keys)
        self.new_job()
        again = self.dataset()
        self.assertEqual(self.epoch(again, 1, 0)[0], e0, "the same seed and epoch gave another order")
        self.assertEqual(self.epoch(again, 1, 0)[0], e1)
        self.new_job()
        self.assertEqual(self.epoch(self.dataset(shuffle=False), 1, 0)[0], self.keys)

    def test_resume_same_shape(self):
        for ranks, workers in ((1, 2), (2, 0), (2, 2)):
            with self.subTest(ranks=ranks, workers=workers):
                self.new_job()
                full = []
                ds = self.dataset()
                for r in range(ranks):
                    with _Rank(r, ranks):
                        full.append(self.batches(ds, workers)[0])
                self.new_job()
                ds = self.dataset()
                states = []
                for r in range(ranks):
                    with _Rank(r, ranks):
                        head, loader = self.batches(ds, workers, limit=3)
                        self.assertEqual(head, full[r][:3])
                        states.append(loader.state_dict())
                        del loader
                self.new_job()
                for r in range(ranks):
                    with _Rank(r, ranks):
                        ds = self.dataset()
                        pipe = ds.to_tuple("__key__", "cls", "bin", "__url__")
                        loader = sluice.StreamingDataLoader(pipe, batch_size=BATCH, num_workers=workers)
                        loader.load_state_dict(states[r])
                        rest, _ = self.batches(ds, workers, loader=loader)
                        flat = lambda bs: [k for b in bs for k in b]  # noqa: E731
                        # Exactly the batches the uninterrupted run gave
                        # after its third (with 2 workers the next turn
                        # is worker 1's: the resumed workers swap lists).
                        self.assertEqual(rest, full[r][3:])
                        # The next epoch starts afresh (epoch 1).
                        nxt, _ = self.batches(ds, workers, loader=loader)
                        if ranks == 1:
                            self.assertEqual(sorted(flat(nxt)), self.keys)

    def test_refused_on_other_shape(self):
        self.new_job()
        ds = self.dataset()
        _, loader = self.batches(ds, 2, limit=2)
        state = loader.state_dict()
        del loader
        self.assertEqual(len(state["workers"]), 2)
        self.new_job()
        ds = self.dataset()
        ds.load_state_dict(state)
        with self.assertRaises(errors.InvalidArgumentError) as cm:
            self.batches(ds, 0)
        self.assertIn("resumes only on the shape", str(cm.exception))
        with _Rank(1, 2):
            ds = self.dataset()
            ds.load_state_dict(state)
            with self.assertRaises(errors.InvalidArgumentError):
                self.batches(ds, 2)

    def test_truncated_shard(self):
        bad = os.path.join(self.tmp, "bad")
        write_tars(bad)
        path = os.path.join(bad, "shard-000004.tar")
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[: 512 * 3 + 20])  # cut inside the first sample's second member
        self.new_job()
        ds = sluice.WebDataset(bad, index=False, timeout=60)
        with self.assertRaises(errors.CorruptDataError) as cm:
            list(ds)
        self.assertIn("shard-000004.tar", str(cm.exception))

    def test_no_index_limits(self):
        ds = self.dataset()
        with self.assertRaises(TypeError):
            ds.num_samples
        with self.assertRaises(TypeError):
            ds[0]
        with self.assertRaises(TypeError):
            sluice.WebDataset(self.data, index=False, predownload=8)
        self.assertEqual(ds.metrics(), {})

    def test_plain_loader_workers(self):
        # A plain torch DataLoader (not StreamingDataLoader) works too.
        self.new_job()
        ds = self.dataset()
        keys = []
        for k, _ in DataLoader(ds.to_tuple("__key__", "cls"), batch_size=4, num_workers=2):
            keys.extend(k)
        self.assertEqual(sorted(keys), self.keys)


@unittest.skipIf(torch is None, "needs torch")
class NoIndexS3Test(helpers.AgentCase):
    """From the real S3 server (.ci/with-services.sh), through the agent's
    cache under a limit smaller than the data."""

    def setUp(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        s3 = helpers.s3_env(self)
        helpers.set_env(self, dict(s3[1], SLUICE_JOB=uuid.uuid4().hex))
        src = os.path.join(self.tmp, "src-" + uuid.uuid4().hex)
        self.keys = write_tars(src)
        prefix = helpers.upload_s3(self, src, "wds-noindex", s3)
        self.remote = prefix + "/shard-{000000..%06d}.tar" % (SHARDS - 1)
        sizes = [os.path.getsize(os.path.join(src, f)) for f in os.listdir(src)]
        self.limit = 6 * max(sizes)
        self.assertLess(self.limit, sum(sizes))
        self.cache = os.path.join(self.tmp, "cache-" + uuid.uuid4().hex)

    def test_exactly_once_under_limit(self):
        for ranks, workers in ((1, 2), (2, 0)):
            with self.subTest(ranks=ranks, workers=workers):
                ds = sluice.WebDataset(self.remote, shardshuffle=True, cache_dir=self.cache, cache_size=self.limit,
                                       index=False, timeout=60)
                for ep in range(2):
                    got = []
                    for r in range(ranks):
                        with _Rank(r, ranks):
                            loader = DataLoader(ds.to_tuple("__key__", "cls", "__url__"), batch_size=BATCH,
                                                num_workers=workers)
                            for keys, cls, urls in loader:
                                for k, c, u in zip(keys, cls, urls):
                                    self.assertEqual(k, "s%06d" % int(c))
                                    self.assertTrue(u.startswith("s3://") and u.endswith(".tar"), u)
                                got.extend(keys)
                    self.assertEqual(sorted(got), self.keys, "epoch %d" % ep)
        used = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.cache) for f in fs)
        self.assertLessEqual(used, self.limit + (1 << 20))
        # The shards came through the cache, and the limit made it fetch
        # some again in later epochs.
        from sluice import _agent

        stats = _agent.Connection(timeout=30).call({"op": "stats"}, "stats")
        self.assertGreater(stats["downloads"], SHARDS, stats)


if __name__ == "__main__":
    unittest.main()
