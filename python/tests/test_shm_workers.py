"""Large tensors out of real DataLoader worker processes through the
worker's reused memory files (sluice._wslots), where the threaded feed
cannot serve (a custom collate_fn, a worker_init_fn): the same batches as
torch's own path (values, dtypes, shapes), in the plan's order, each
sample once; the slots really used and reused; batches a user keeps are
never overwritten (with every slot viewed, tensors take torch's path);
nothing left in /dev/shm."""

import gc
import os
import unittest

import helpers
import mdswrite
from test_shm import Env

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = np = None

import sluice
from sluice import _wslots

N = 600
BS = 8


def collate(samples):
    """A custom collate: large float32 and uint8 tensors, a small int64 one."""
    return {
        "id": torch.tensor([s["id"] for s in samples]),
        "x": torch.stack([torch.from_numpy(s["x"]) for s in samples]),
        "u": torch.stack([torch.from_numpy(s["u"]) for s in samples]),
        "pair": (torch.stack([torch.from_numpy(s["x"][0]) for s in samples]), [s["id"] for s in samples]),
    }


def init_worker(_):
    pass


class Rebuilds:
    """Counts the tensors this process rebuilt from worker slots."""

    def __enter__(self):
        self.start = _wslots.received
        return self

    @property
    def n(self):
        return _wslots.received - self.start

    def __exit__(self, *exc):
        pass


def shm_names():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


@unittest.skipIf(torch is None, "needs torch and numpy")
class WorkerSlotsTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "data")
        mdswrite.write(cls.data, {"id": "int", "x": "ndarray:float32:3,64,64", "u": "ndarray:uint8:96,96,3"},
                       ({"id": i, "x": np.full((3, 64, 64), i, np.float32), "u": np.full((96, 96, 3), i % 251, np.uint8)}
                        for i in range(N)), size_limit=1 << 20)

    def epoch(self, slots, keep=False, **kw):
        """The epoch's batches (2 worker processes) with SLUICE_WORKER_SLOTS=slots."""
        with Env(SLUICE_WORKER_SLOTS=str(slots), SLUICE_FEED="auto"):
            ds = sluice.StreamingDataset(local=self.data, batch_size=BS, shuffle=True, shuffle_seed=3)
            out = []
            for b in sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2, collate_fn=collate, **kw):
                out.append(b if keep else {k: (v[0].clone(), v[1]) if k == "pair" else v.clone() for k, v in b.items()})
            gc.collect()
            return out

    def check_values(self, batches):
        for b in batches:
            ids = b["id"].tolist()
            self.assertEqual(b["x"].dtype, torch.float32)
            self.assertEqual(tuple(b["x"].shape), (len(ids), 3, 64, 64))
            self.assertEqual(b["u"].dtype, torch.uint8)
            self.assertEqual(tuple(b["u"].shape), (len(ids), 96, 96, 3))
            self.assertEqual(b["pair"][1], ids)
            for j, i in enumerate(ids):
                self.assertTrue(bool((b["x"][j] == i).all()), "sample %d: x overwritten or wrong" % i)
                self.assertTrue(bool((b["u"][j] == i % 251).all()), "sample %d: u overwritten or wrong" % i)
                self.assertTrue(bool((b["pair"][0][j] == i).all()), "sample %d: pair wrong" % i)

    def test_same_batches_as_torch_in_plan_order(self):
        before = shm_names()
        torch_path = self.epoch(0)
        with Rebuilds() as r:
            slots = self.epoch(16)
        # Most of the three large tensors of each batch came through slots.
        self.assertGreaterEqual(r.n, 2 * len(slots))
        shape, work = helpers.plan_work(self.data, BS, workers=2, seed=3)
        want = helpers.rank_batches(shape, work, 0, BS)
        self.assertEqual([b["id"].tolist() for b in slots], want)
        self.assertEqual(len(torch_path), len(slots))
        for a, b in zip(torch_path, slots):
            self.assertEqual(list(a), list(b))
            for k in ("id", "x", "u"):
                self.assertEqual((a[k].dtype, a[k].shape), (b[k].dtype, b[k].shape), k)
                self.assertTrue(torch.equal(a[k], b[k]), k)
            self.assertTrue(torch.equal(a["pair"][0], b["pair"][0]))
            self.assertEqual(a["pair"][1], b["pair"][1])
        self.check_values(slots)
        # The slots were reused: few mapped per worker, not one per batch.
        self.assertLessEqual(len(_wslots._maps), 2 * 16)
        self.assertEqual(shm_names(), before)

    def test_kept_batches_are_never_overwritten(self):
        # Every batch of the epoch kept: the slots fill, later tensors take
        # torch's path, and every value is still its sample's.
        with Rebuilds() as r:
            kept = self.epoch(4, keep=True)
        self.assertEqual(sorted(i for b in kept for i in b["id"].tolist()), list(range(N)))
        self.assertGreater(r.n, 0)
        self.assertLess(r.n, 3 * len(kept), "every tensor came through a slot though all were held")
        self.check_values(kept)

    def test_forked_child_does_not_free_the_parents_slots(self):
        # A child forked from the training process (a fork-based saver, a
        # helper process) that drops its copy of a batch must not mark the
        # batch's slots free: the parent still views them, and the worker
        # would write later batches into them.
        with Env(SLUICE_WORKER_SLOTS="16", SLUICE_FEED="auto"), Rebuilds() as r:
            ds = sluice.StreamingDataset(local=self.data, batch_size=BS, shuffle=True, shuffle_seed=3)
            it = iter(sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=2, collate_fn=collate))
            kept = [next(it), next(it)]
            self.assertGreater(r.n, 0)
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                try:
                    del kept[:]
                    gc.collect()
                finally:
                    os._exit(0)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
            rest = list(it)
            self.assertGreater(len(rest), 10)
            self.check_values(kept)
            self.check_values(rest)

    def test_worker_init_fn(self):
        with Rebuilds() as r:
            got = self.epoch(16, worker_init_fn=init_worker)
        self.assertGreater(r.n, 0)
        self.assertEqual(sorted(i for b in got for i in b["id"].tolist()), list(range(N)))
        self.check_values(got)

    def test_off(self):
        with Rebuilds() as r:
            got = self.epoch(0)
        self.assertEqual(r.n, 0)
        self.check_values(got)
        with Env(SLUICE_WORKER_SLOTS="many"), self.assertRaisesRegex(ValueError, "SLUICE_WORKER_SLOTS"):
            _wslots._slots()


if __name__ == "__main__":
    unittest.main()
