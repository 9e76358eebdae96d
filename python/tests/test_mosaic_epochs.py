"""Epoch edges of MosaicML's resumption, as a training loop meets them: a
checkpoint taken after the last batch of an epoch, a run started at a
chosen epoch through load_state_dict (MosaicML's next_epoch setter is not
provided), and a new epoch begun while an earlier iterator is still open."""

import os
import unittest
import warnings

import helpers

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

import sluice


def ids(loader):
    return [int(x) for b in loader for x in b["id"]]


@unittest.skipIf(torch is None, "torch missing")
class EpochEdgesTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 60, size_limit=400)

    def dataset(self, local):
        return sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, local), batch_size=4,
                                       shuffle=True)

    def test_checkpoint_after_the_last_batch(self):
        # MosaicML: the state after a whole epoch is that epoch at its
        # end; a run resumed from it yields nothing in its first
        # iteration (the epoch is over) and the next epoch in the one
        # after, the same as the uninterrupted run's.
        for workers in (0, 2):
            with self.subTest(workers=workers):
                ds = self.dataset("end-%d" % workers)
                loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=workers)
                self.assertEqual(sorted(ids(loader)), list(range(60)))
                state = loader.state_dict()
                self.assertEqual((state["epoch"], state["sample_in_epoch"]), (0, 60))
                ds2 = self.dataset("end-%d" % workers)
                resumed = sluice.StreamingDataLoader(ds2, batch_size=4, num_workers=workers)
                resumed.load_state_dict(state)
                self.assertEqual(ids(resumed), [])
                self.assertEqual(resumed.state_dict(), state)
                again = ids(resumed)
                self.assertEqual(again, ids(loader))
                self.assertEqual(sorted(again), list(range(60)))
                self.assertEqual(resumed.state_dict(), dict(state, epoch=1))

    def test_start_at_a_chosen_epoch(self):
        # In place of MosaicML's next_epoch setter: a state at sample 0 of
        # epoch 3 gives epoch 3's order, and next_epoch 4 after it.
        ds = self.dataset("chosen")
        ds.load_state_dict({"epoch": 3, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 9176})
        got = [int(s["id"]) for s in ds]
        shape, work = helpers.plan_work(self.remote, 4, epoch=3)
        self.assertEqual(got, helpers.worker_ids(shape, work, 0, 0))
        self.assertNotEqual(got, helpers.worker_ids(*helpers.plan_work(self.remote, 4, epoch=0), 0, 0))
        self.assertEqual(ds.next_epoch, 4)
        self.assertEqual(ds.state_dict(0, False)["epoch"], 3)
        with self.assertRaises(AttributeError):
            ds.next_epoch = 5

    def test_a_new_iteration_ends_the_earlier_one(self):
        # MosaicML: __iter__ on a dataset whose earlier iterator is still
        # open ends that iterator (it yields nothing more) and begins the
        # next epoch. Sluice let both run, and the earlier one held its
        # leases: under a cache_limit the agent accepts, the new epoch
        # waited for them (30.8 s for 400 samples where 0.5 s is usual),
        # or at the smallest accepted limit failed after stall_timeout.
        remote = os.path.join(self.tmp, "remote-400")
        helpers.write_ids(remote, 400, size_limit=1000)
        local = os.path.join(self.tmp, "tight")
        # The smallest limit the agent accepts, from its own refusals (a
        # fresh local each time: a cache keeps its first limit).
        smallest = 1
        for k in range(4):
            try:
                iter(sluice.StreamingDataset(remote=remote, local="%s-probe-%d" % (local, k), batch_size=4,
                                             cache_limit=smallest)).close()
                break
            except sluice.CacheLimitError as e:
                smallest = int(str(e).split("at least ")[1].split(" bytes")[0])
        ds = sluice.StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, cache_limit=smallest,
                                     stall_timeout=20)
        first = iter(ds)
        head = [int(next(first)["id"]) for _ in range(5)]
        self.assertEqual(len(set(head)), 5)
        second = [int(s["id"]) for s in ds]
        self.assertEqual(sorted(second), list(range(400)))
        self.assertEqual(list(first), [])
        self.assertEqual(ds.state_dict(0, False)["epoch"], 1)
        # An iterator that is exhausted or closed is left alone, and the
        # epochs go on.
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(400)))
        self.assertEqual(ds.next_epoch, 3)


if __name__ == "__main__":
    unittest.main()
