"""Several streams, as a user migrating from MosaicML Streaming mixes them:
the weights' rules and errors (raised, as MosaicML raises them, before any
index is read), one local directory per stream, and the batches each rank
gets for every batching method, checked through the client against
MosaicML's verified arrangement (spec §12.5)."""

import json
import os
import subprocess
import sys
import unittest

import helpers

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

import sluice

# spec §12.5: MosaicML's generate_work for two streams (A: 23 samples in
# shards of 6,6,6,5; B: 11 in 6,5), proportions 0.75/0.25, epoch_size 40,
# shuffle, batch 4, 2 canonical nodes, shuffle_block_size 10, one node of
# 2 ranks with 2 DataLoader workers each, epoch 0.
GOLDEN = {
    "random": ([1, 2, 2, 3, 4], [
        18, 19, 20, 4, 11, 8, 7, 6, 27, 23, 29, 24, 21, 5, 22, 3, 28, 9, 10, 26, -1, -1, -1, -1,
        0, 5, 4, 1, 17, 6, 11, 12, 31, 33, 16, 32, 3, 2, 8, 10, 14, 30, 15, 13, -1, -1, -1, -1]),
    "stratified": ([1, 2, 2, 3, 4], [
        18, 1, 19, 2, 7, 12, 6, 17, 5, 16, 3, 8, 21, 3, 22, 5, 10, 15, 11, 14, -1, -1, -1, -1,
        20, 0, 31, 28, 9, 13, 29, 24, 4, 10, 33, 26, 8, 4, 30, 25, 6, 11, 32, 23, -1, -1, -1, -1]),
    "per_stream": ([1, 2, 2, 2, 4], [
        18, 19, 20, 21, 31, 30, 29, 32, 22, 8, 7, 6, 9, 10, 11, 6,
        1, 2, 0, 3, 28, 25, 24, 23, 5, 4, 12, 17, 13, 15, 14, 11]),
    "device_per_stream": ([1, 2, 2, 3, 4], [
        18, 19, 1, 2, 22, 8, 5, 4, 11, 6, 14, 11, 29, 32, 24, 23, 9, 10, 13, 15, 4, 3, 10, 8,
        31, 30, 28, 25, 7, 6, 12, 17, 5, 3, 16, 8, 20, 21, 0, 3, 33, 32, 26, 23, -1, -1, -1, -1]),
    # random resumed at sample_in_epoch 16: the batches not yet consumed.
    "random@16": ([1, 2, 2, 2, 4], [
        11, 8, 7, 6, 27, 23, 29, 24, 28, 9, 10, 26, -1, -1, -1, -1,
        17, 6, 11, 12, 31, 33, 16, 32, 14, 30, 15, 13, -1, -1, -1, -1]),
}

# One rank of the golden run: each case's batches through a
# StreamingDataLoader with 2 workers, as JSON on the last line.
RANK = r"""
import json, os, sys, warnings
sys.path[:0] = %(path)r
warnings.filterwarnings("ignore", message="This DataLoader will create")
import sluice
out = {}
for case in %(cases)r:
    method, _, resume = case.partition("@")
    os.environ["SLUICE_JOB"] = "golden-" + case.replace("@", "-at-")
    streams = [sluice.Stream(local=%(a)r, proportion=0.75), sluice.Stream(local=%(b)r, proportion=0.25)]
    ds = sluice.StreamingDataset(streams=streams, epoch_size=40, shuffle=True, batch_size=4, num_canonical_nodes=2,
                                 shuffle_block_size=10, batching_method=method)
    loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=2)
    if resume:
        loader.load_state_dict({"epoch": 0, "sample_in_epoch": int(resume), "num_canonical_nodes": 2,
                                "shuffle_seed": 9176, "initial_physical_nodes": 1})
    out[case] = [[int(x) for x in b["x"]] for b in loader]
print(json.dumps(out))
"""


@unittest.skipIf(torch is None, "torch missing")
class StreamsTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The spec's two streams; column x holds the global sample ID.
        cls.a = os.path.join(cls.tmp, "a")
        cls.b = os.path.join(cls.tmp, "b")
        for path, ids in ((cls.a, range(23)), (cls.b, range(23, 34))):
            with sluice.MDSWriter(out=path, columns={"x": "int"}, size_limit=240) as w:
                for i in ids:
                    w.write({"x": i})
        cls.n = 0

    def local(self):
        type(self).n += 1
        return os.path.join(self.tmp, "local-%d" % self.n)

    def test_golden_batches_of_every_batching_method(self):
        # Two ranks of one node, as torchrun starts them, each reading
        # through a StreamingDataLoader with 2 workers: every rank's
        # batches are MosaicML's for every batching method, and for a
        # resumed random epoch.
        sizes = [[s["samples"] for s in json.load(open(os.path.join(d, "index.json")))["shards"]]
                 for d in (self.a, self.b)]
        self.assertEqual(sizes, [[6, 6, 6, 5], [6, 5]])
        code = RANK % {"path": sys.path[:2], "cases": list(GOLDEN), "a": self.a, "b": self.b}
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
            procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))
        got = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, err.decode()[-3000:])
            got.append(json.loads(out.decode().strip().splitlines()[-1]))
        for case, (shape, work) in GOLDEN.items():
            for rank in range(2):
                with self.subTest(case=case, rank=rank):
                    self.assertEqual(got[rank][case], helpers.rank_batches(shape, work, rank, 4))

    def test_weights_checked_before_any_index_is_read(self):
        # MosaicML validates the streams' weights before it loads them:
        # proportion on some streams and not on others is a ValueError
        # naming the first stream that differs from stream 0, even where
        # no index could be read (here none exists).
        S = sluice.Stream
        nowhere = os.path.join(self.tmp, "nowhere")
        cases = [
            ([S(remote=nowhere + "-1", local=self.local(), proportion=0.5), S(remote=nowhere + "-2", local=self.local())], 1),
            ([S(remote=nowhere + "-1", local=self.local()), S(remote=nowhere + "-2", local=self.local(), proportion=2)], 1),
            ([S(remote=nowhere + "-1", local=self.local(), repeat=2), S(remote=nowhere + "-2", local=self.local(), choose=3),
              S(remote=nowhere + "-3", local=self.local(), proportion=0.1)], 2),
        ]
        for streams, bad in cases:
            with self.subTest(weights=[s._given for s in streams]):
                with self.assertRaisesRegex(ValueError, r"proportion.*stream %d" % bad) as cm:
                    sluice.StreamingDataset(streams=streams, batch_size=4)
                self.assertNotIsInstance(cm.exception, FileNotFoundError)
        # Streams reused from an earlier dataset hold resolved weights on
        # every attribute: the check is on the weights given.
        a = S(remote=self.a, local=self.local(), repeat=2)
        b = S(remote=self.b, local=self.local())
        self.assertEqual(sluice.StreamingDataset(streams=[a, b], batch_size=4).epoch_size, 57)
        self.assertEqual(sluice.StreamingDataset(streams=[a, b], batch_size=4).epoch_size, 57)

    def test_methods_checked_before_any_index_is_read(self):
        # sampling_method and batching_method are checked when the dataset
        # is built, before its indexes are read, as MosaicML does.
        nowhere = os.path.join(self.tmp, "nowhere")
        for kw in ({"sampling_method": "random"}, {"batching_method": "balanced"}, {"sampling_method": "Fixed"}):
            with self.subTest(kw=kw):
                with self.assertRaisesRegex(ValueError, list(kw)[0]) as cm:
                    sluice.StreamingDataset(remote=nowhere, local=self.local(), batch_size=4, **kw)
                self.assertNotIsInstance(cm.exception, FileNotFoundError)

    def test_one_local_per_dataset(self):
        # Two live datasets of different remotes in one local directory:
        # the agent refuses the second (MosaicML: ValueError, "Reused local
        # directory"). The indexes are byte for byte the same, so before
        # the second read the first's shards: ids 0-29 instead of 1000-1029.
        twin = os.path.join(self.tmp, "twin-ds")
        helpers.write_ids(twin + "-1", 30, size_limit=200, text=False)
        import mdswrite

        mdswrite.write(twin + "-2", {"id": "int"}, ({"id": 1000 + i} for i in range(30)), size_limit=200)
        shared = self.local()
        first = sluice.StreamingDataset(remote=twin + "-1", local=shared, batch_size=4)
        self.assertEqual(sorted(int(s["id"]) for s in first), list(range(30)))
        with self.assertRaisesRegex(ValueError, "reused local directory") as cm:
            second = sluice.StreamingDataset(remote=twin + "-2", local=shared, batch_size=4)
            sorted(int(s["id"]) for s in second)
        self.assertIn(os.path.abspath(shared), str(cm.exception))
        # Its own local: its own samples.
        second = sluice.StreamingDataset(remote=twin + "-2", local=self.local(), batch_size=4)
        self.assertEqual(sorted(int(s["id"]) for s in second), list(range(1000, 1030)))
        del first

    def test_one_local_per_stream(self):
        # Two streams of different remotes in one local directory would
        # share its index.json and shards: MosaicML refuses it (ValueError).
        # Here the indexes are byte for byte the same (same shard sizes, no
        # hashes), so nothing else could notice: the second stream's
        # samples would be the first's.
        twin = os.path.join(self.tmp, "twin")
        helpers.write_ids(twin + "-1", 30, size_limit=200, text=False)
        import mdswrite

        mdswrite.write(twin + "-2", {"id": "int"}, ({"id": 1000 + i} for i in range(30)), size_limit=200)
        with open(twin + "-1/index.json") as f1, open(twin + "-2/index.json") as f2:
            self.assertEqual(f1.read(), f2.read())
        shared = self.local()
        for streams in ([sluice.Stream(remote=twin + "-1", local=shared), sluice.Stream(remote=twin + "-2", local=shared)],
                        [sluice.Stream(remote=twin + "-1", local=shared),
                         sluice.Stream(remote=twin + "-2", local=shared + "/x/.."),
                         sluice.Stream(remote=twin + "-2", local=self.local())],
                        [sluice.Stream(remote=twin + "-1", local=shared), sluice.Stream(local=shared)]):
            with self.subTest(remotes=[s.remote for s in streams]):
                with self.assertRaisesRegex(ValueError, "same local directory") as cm:
                    sluice.StreamingDataset(streams=streams, batch_size=4)
                self.assertIn(os.path.abspath(shared), str(cm.exception))
                # A stream without a remote is said to have none (not "None").
                self.assertNotIn("None", str(cm.exception))
        # Each in its own local: every sample of both, once.
        ds = sluice.StreamingDataset(streams=[sluice.Stream(remote=twin + "-1", local=self.local()),
                                              sluice.Stream(remote=twin + "-2", local=self.local())], batch_size=4)
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(30)) + list(range(1000, 1030)))
        # Different splits of one local are different directories.
        root = os.path.join(self.tmp, "splits")
        helpers.write_ids(os.path.join(root, "p"), 20, size_limit=200, text=False)
        helpers.write_ids(os.path.join(root, "q"), 10, size_limit=200, text=False)
        ds = sluice.StreamingDataset(streams=[sluice.Stream(remote=root, local=shared, split="p"),
                                              sluice.Stream(remote=root, local=shared, split="q")], batch_size=4)
        self.assertEqual(ds.num_samples, 30)
        # The same remote twice in one local reads the same data: Sluice
        # takes it (each sample twice), where MosaicML refuses it.
        same = self.local()
        ds = sluice.StreamingDataset(streams=[sluice.Stream(remote=self.a, local=same),
                                              sluice.Stream(remote=self.a, local=same)], batch_size=4)
        self.assertEqual(sorted(int(s["x"]) for s in ds), sorted(list(range(23)) * 2))
        same = self.local()
        ds = sluice.StreamingDataset(streams=[sluice.Stream(remote="file://" + self.a + "/", local=same),
                                              sluice.Stream(remote="file://" + self.a, local=same)], batch_size=4)
        self.assertEqual(ds.num_samples, 46)

    def test_stream_split_is_a_string(self):
        # MosaicML's Stream holds split or '' from the start.
        self.assertEqual(sluice.Stream(remote=self.a).split, "")
        self.assertEqual(sluice.Stream(remote=self.a, split="train").split, "train")

    def test_epoch_size_forms(self):
        # epoch_size as MosaicML takes it (an int, a float truncated, an
        # abbreviation), over two streams without weights: split in
        # proportion to their sizes.
        for given, want in ((40, 40), (40.9, 40), ("40", 40), ("0.04k", 40), (" 0.1 K", 100), (0, 34), ("0", 34)):
            with self.subTest(epoch_size=given):
                ds = sluice.StreamingDataset(streams=[sluice.Stream(local=self.a), sluice.Stream(local=self.b)],
                                             epoch_size=given, batch_size=4)
                self.assertEqual((ds.epoch_size, len(ds)), (want, want))
                self.assertEqual(sum(s.choose for s in ds.streams), want)
        with self.assertRaisesRegex(ValueError, "epoch_size"):
            sluice.StreamingDataset(streams=[sluice.Stream(local=self.a)], epoch_size=-1, batch_size=4)


if __name__ == "__main__":
    unittest.main()
