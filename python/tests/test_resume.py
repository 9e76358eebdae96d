"""Mid-epoch resumption through real torch DataLoader workers: the sample
count of the StreamingDataLoader for any collate, MosaicML's state dicts
key for key (the reference fixtures written by MosaicML Streaming 0.14),
and every sample exactly once across a checkpointed run and its resume."""

import gc
import json
import os
import unittest
import warnings

import helpers

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = None

import sluice

# CI has ../shared beside the clone; elsewhere the fixture test skips.
FIXTURES = os.path.join(os.path.dirname(helpers.ROOT), "shared", "fixtures", "order")


def ids_of(batch):
    """The ids of a batch, whatever the collate made of it."""
    if isinstance(batch, dict):
        return [int(x) for x in batch["id"]]
    if isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], dict):
        return [int(s["id"]) for s in batch]
    raise AssertionError("unexpected batch %r" % type(batch))


def run(ds, bs, workers, stop=None, collate=None, **kw):
    """Iterates a StreamingDataLoader over ds; with stop, checkpoints after
    that many batches and breaks. Returns (batches of ids, state)."""
    kwargs = dict(batch_size=bs, num_workers=workers, **kw)
    if collate is not None:
        kwargs["collate_fn"] = collate
    loader = sluice.StreamingDataLoader(ds, **kwargs)
    out, state = [], None
    for b in loader:
        out.append(ids_of(b))
        if stop is not None and len(out) == stop:
            state = loader.state_dict()
            break
    del loader
    gc.collect()
    return out, state


def _keep(x):
    return x


@unittest.skipIf(torch is None, "torch missing")
class ResumeTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        cls.n = 117
        cls.remote = os.path.join(cls.tmp, "remote")
        # A str column sorts first: a count that recursed into it counted
        # characters; ~10 samples per shard, so 4 and 7 neither divide nor
        # match the shard sizes.
        cols = {"a_text": "str", "id": "int", "js": "json", "raw": "bytes", "arr": "ndarray:int16:3"}
        samples = ({"a_text": "t%d" % i + "y" * (i % 5), "id": i, "js": {"k": [i, i]}, "raw": b"r%d" % i,
                    "arr": np.array([i, i + 1, i + 2], dtype=np.int16)} for i in range(cls.n))
        helpers.mdswrite.write(cls.remote, cols, samples, size_limit=500)

    def dataset(self, local, **kw):
        kw.setdefault("batch_size", 4)
        return sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, local), **kw)

    def test_count_any_collate(self):
        # One epoch with 2 workers; the state after k batches counts the
        # samples of those batches whatever the collate returned.
        for name, collate in (("default", None), ("identity", _keep), ("lambda", lambda x: x)):
            with self.subTest(collate=name):
                ds = self.dataset("count-" + name)
                got, state = run(ds, 4, 2, stop=5, collate=collate)
                self.assertEqual(sum(map(len, got)), 20)
                self.assertEqual(state["sample_in_epoch"], 20)
                self.assertEqual(state["epoch"], 0)

    def test_count_without_batching(self):
        ds = self.dataset("count-nobatch", batch_size=1)
        loader = sluice.StreamingDataLoader(ds, batch_size=None, num_workers=2)
        for i, s in enumerate(loader):
            if i == 6:
                break
        self.assertEqual(loader.state_dict()["sample_in_epoch"], 7)

    def test_state_before_and_after_iteration(self):
        # MosaicML: before any iteration the epoch is -1; the node count
        # appears as initial_physical_nodes at every point.
        ds = self.dataset("state-points")
        loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=2)
        want = {"epoch": -1, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 9176,
                "initial_physical_nodes": 1}
        self.assertEqual(loader.state_dict(), want)
        n = 0
        for b in loader:
            n += len(b["id"])
            if n == 8:
                self.assertEqual(loader.state_dict(), dict(want, epoch=0, sample_in_epoch=8))
        self.assertEqual(loader.state_dict(), dict(want, epoch=0, sample_in_epoch=self.n))

    def test_exactly_once_across_resume(self):
        # MosaicML's mid-epoch resumption: workers, state mid-epoch, a new
        # dataset and loader from it; together every sample exactly once.
        for workers in (0, 1, 2, 4):
            for shuffle in (False, True):
                for bs, stop in ((4, 7), (7, 3)):
                    with self.subTest(workers=workers, shuffle=shuffle, batch_size=bs):
                        local = "x-%d-%s-%d" % (workers, shuffle, bs)
                        ds = self.dataset(local, shuffle=shuffle, batch_size=bs)
                        first, state = run(ds, bs, workers, stop=stop)
                        self.assertEqual(state["sample_in_epoch"], bs * stop)
                        del ds
                        ds2 = self.dataset(local, shuffle=shuffle, batch_size=bs)
                        loader = sluice.StreamingDataLoader(ds2, batch_size=bs, num_workers=workers)
                        loader.load_state_dict(state)
                        second = [ids_of(b) for b in loader]
                        seen = [x for b in first + second for x in b]
                        self.assertEqual(sorted(seen), list(range(self.n)))
                        self.assertEqual(loader.state_dict()["sample_in_epoch"], self.n)
                        del loader, ds2
                        gc.collect()

    def test_mosaicml_fixture_state_dicts(self):
        # The cases MosaicML Streaming 0.14 itself recorded (one rank):
        # batches before the checkpoint, the state dict, and the batches
        # after resuming from it in a new dataset and loader.
        if not os.path.isdir(FIXTURES):
            if os.environ.get("CI"):
                self.fail("reference fixtures missing: %s" % FIXTURES)
            self.skipTest("reference fixtures missing: %s" % FIXTURES)
        with open(os.path.join(FIXTURES, "state_dicts.json")) as f:
            cases = json.load(f)["cases"]
        remote = os.path.join(FIXTURES, "dataset_a", "data")
        ran = 0
        for i, c in enumerate(cases):
            if c["world_size"] != 1:
                continue
            ran += 1
            p = c["params"]
            kw = {k: p[k] for k in ("shuffle", "shuffle_algo", "shuffle_seed", "num_canonical_nodes",
                                     "shuffle_block_size", "batch_size")}
            with self.subTest(case=i, params=p):
                local = os.path.join(self.tmp, "fixture-%d" % i)
                ds = sluice.StreamingDataset(remote=remote, local=local, **kw)
                before, state = run(ds, p["batch_size"], c["workers_per_rank"], stop=c["batches_consumed_per_rank"])
                self.assertEqual(before, c["batches_before"]["0"])
                self.assertEqual(state, c["state_dict"])
                del ds
                ds2 = sluice.StreamingDataset(remote=remote, local=local, **kw)
                loader = sluice.StreamingDataLoader(ds2, batch_size=p["batch_size"], num_workers=c["workers_per_rank"])
                loader.load_state_dict(state)
                after = [ids_of(b) for b in loader]
                self.assertEqual(after, c["batches_after_resume"]["0"])
                del loader, ds2
                gc.collect()
        self.assertGreater(ran, 0)


if __name__ == "__main__":
    unittest.main()
