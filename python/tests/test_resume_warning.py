"""A resume that is not exactly-once says so: MosaicML plays the same order
silently; Sluice raises a UserWarning naming the cause (the agent's
plan.Epoch.ResumeCheck), and an exact resume warns nothing."""

import gc
import os
import unittest
import warnings

import helpers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

import sluice


@unittest.skipIf(torch is None, "torch missing")
class ResumeWarningTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.mdswrite.write(cls.remote, {"id": "int"}, ({"id": i} for i in range(60)), size_limit=200)

    def resume(self, local, sample_in_epoch):
        # per_stream batching skips whole global batches of the resumed
        # world (4 here): a state saved after 10 samples (say 2 ranks × 5)
        # delivers 2 of them again.
        ds = sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, local), batch_size=4,
                                     shuffle=True, batching_method="per_stream")
        loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=0)
        loader.load_state_dict({"epoch": 0, "sample_in_epoch": sample_in_epoch, "num_canonical_nodes": 1,
                                "shuffle_seed": 9176, "initial_physical_nodes": 1})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            n = sum(len(b["id"]) for b in loader)
        del loader, ds
        gc.collect()
        return n, [str(w.message) for w in caught if issubclass(w.category, UserWarning)
                   and "exactly-once" in str(w.message)]

    def test_inexact_resume_warns(self):
        n, msgs = self.resume("inexact", 10)
        self.assertEqual(n, 52)  # 60 - 8: the 2 samples past the last whole global batch come again
        self.assertEqual(len(msgs), 1, msgs)
        self.assertIn("sample_in_epoch 10 is not a multiple of the global batch size 4", msgs[0])

    def test_exact_resume_is_silent(self):
        n, msgs = self.resume("exact", 8)
        self.assertEqual(n, 52)
        self.assertEqual(msgs, [])


if __name__ == "__main__":
    unittest.main()
