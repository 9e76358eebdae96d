"""A StreamingDataset subclass's per-sample code (MosaicML's way to add
transforms: override __getitem__ or get_item) runs where torch's DataLoader
runs it, in worker processes: torch.utils.data.get_worker_info() names the
worker there, and random augmentation repeats from run to run under
torch.manual_seed, as with MosaicML."""

import os
import random
import unittest
import warnings

import helpers

try:
    import torch
    from torch.utils.data import get_worker_info
except ImportError:  # pragma: no cover
    torch = None

import sluice
from sluice import _feed


class Augmented(sluice.StreamingDataset):
    """A transform drawing from torch's and Python's RNGs, recording the
    DataLoader worker it ran in (-1: none)."""

    def __getitem__(self, idx):
        s = super().__getitem__(idx)
        info = get_worker_info()
        return {"id": s["id"], "noise": float(torch.rand(1)), "coin": random.random(),
                "worker": -1 if info is None else info.id}


class Tokenized(sluice.StreamingDataset):
    def get_item(self, idx, retry=7):
        s = super().get_item(idx)
        info = get_worker_info()
        return {"id": s["id"], "worker": -1 if info is None else info.id}


@unittest.skipIf(torch is None, "torch missing")
class SubclassWorkersTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 64, size_limit=400)
        cls.n = 0
        cls._feed_env = os.environ.pop("SLUICE_FEED", None)

    @classmethod
    def tearDownClass(cls):
        if cls._feed_env is not None:
            os.environ["SLUICE_FEED"] = cls._feed_env
        super().tearDownClass()

    def run_epoch(self, cls, workers=2):
        type(self).n += 1
        torch.manual_seed(1234)
        random.seed(1234)
        ds = cls(remote=self.remote, local=os.path.join(self.tmp, "local-%d" % self.n), batch_size=4, shuffle=True)
        loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=workers)
        rows = []
        for b in loader:
            for i in range(len(b["id"])):
                rows.append(tuple(float(b[k][i]) for k in sorted(b)))
        self.assertEqual(loader.state_dict()["sample_in_epoch"], 64)
        return sorted(rows)

    def test_transforms_run_in_worker_processes(self):
        first = self.run_epoch(Augmented)
        # keys sorted: coin, id, noise, worker
        self.assertEqual(sorted(int(r[1]) for r in first), list(range(64)))
        self.assertEqual({int(r[3]) for r in first}, {0, 1})
        # The same seeds give the same augmentation, sample for sample.
        self.assertEqual(self.run_epoch(Augmented), first)
        # keys sorted: id, worker
        tok = self.run_epoch(Tokenized)
        self.assertEqual(sorted(int(r[0]) for r in tok), list(range(64)))
        self.assertEqual({int(r[1]) for r in tok}, {0, 1})

    def test_feed_left_to_subclasses_only_when_asked(self):
        plain = sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, "plain"), batch_size=4)
        aug = Augmented(remote=self.remote, local=os.path.join(self.tmp, "aug"), batch_size=4)
        tok = Tokenized(remote=self.remote, local=os.path.join(self.tmp, "tok"), batch_size=4)
        self.assertTrue(_feed.eligible(sluice.StreamingDataLoader(plain, batch_size=4, num_workers=2),
                                       sluice.StreamingDataset))
        for ds in (aug, tok):
            self.assertFalse(_feed.eligible(sluice.StreamingDataLoader(ds, batch_size=4, num_workers=2),
                                            sluice.StreamingDataset))
        # SLUICE_FEED=threads still runs them on the feed, where the user
        # asked for it (no worker there).
        os.environ["SLUICE_FEED"] = "threads"
        try:
            self.assertTrue(_feed.eligible(sluice.StreamingDataLoader(aug, batch_size=4, num_workers=2),
                                           sluice.StreamingDataset))
            self.assertEqual({int(r[3]) for r in self.run_epoch(Augmented)}, {-1})
        finally:
            os.environ.pop("SLUICE_FEED", None)


if __name__ == "__main__":
    unittest.main()
