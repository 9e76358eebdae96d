"""MosaicML behaviours a migrating user relies on: a subclass's
__getitem__ or get_item used while iterating (in DataLoader workers too), dataset[list /
ndarray / slice], num_shards, pkl columns refused without
allow_unsafe_types, and a dataset dropped and rebuilt on the same local."""

import gc
import os
import pickle
import unittest
import warnings

import helpers

try:
    import numpy as np
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

import sluice


class Doubled(sluice.StreamingDataset):
    def __getitem__(self, idx):
        s = super().__getitem__(idx)
        return {"id": s["id"], "twice": 2 * s["id"], "at": idx}


class PlusGetItem(sluice.StreamingDataset):
    # MosaicML's Array.__getitem__ calls get_item, and its iteration
    # yields self[i]: overriding get_item alone changes both.
    def get_item(self, idx, retry=7):
        s = super().get_item(idx)
        s["plus"] = int(s["id"]) + 1000
        return s


@unittest.skipIf(torch is None, "torch missing")
class CompatTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 60, size_limit=400)

    def local(self, name):
        return os.path.join(self.tmp, name)

    def test_subclass_getitem_while_iterating(self):
        for workers in (0, 2):
            with self.subTest(workers=workers):
                ds = Doubled(remote=self.remote, local=self.local("sub-%d" % workers), batch_size=4)
                loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=workers)
                seen = []
                for b in loader:
                    self.assertEqual([int(x) for x in b["twice"]], [2 * int(x) for x in b["id"]])
                    self.assertEqual([int(x) for x in b["at"]], [int(x) for x in b["id"]])
                    seen += [int(x) for x in b["id"]]
                self.assertEqual(sorted(seen), list(range(60)))
                del loader, ds
                gc.collect()

    def test_subclass_get_item(self):
        ds = PlusGetItem(remote=self.remote, local=self.local("getitem"), batch_size=4)
        self.assertEqual(ds[3]["plus"], 1003)
        self.assertEqual([s["plus"] for s in ds[[-1, 0]]], [1059, 1000])
        self.assertEqual(sorted(int(s["plus"]) for s in ds), list(range(1000, 1060)))
        # Every way a loader reads: the threaded feed, worker processes,
        # the shared-memory feed (SLUICE_SHM=on), in the training process.
        for shm, feed, workers in (("auto", "auto", 0), ("auto", "threads", 2), ("auto", "workers", 2),
                                   ("on", "threads", 2), ("on", "workers", 2)):
            with self.subTest(shm=shm, feed=feed, workers=workers):
                helpers.set_env(self, {"SLUICE_FEED": feed, "SLUICE_SHM": shm})  # restored after the test
                loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=workers)
                seen = []
                for b in loader:
                    self.assertEqual([int(x) for x in b["plus"]], [int(x) + 1000 for x in b["id"]])
                    seen += [int(x) for x in b["id"]]
                self.assertEqual(sorted(seen), list(range(60)))
                del loader

    def test_getitem_many_and_num_shards(self):
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local("many"), batch_size=4)
        self.assertEqual([s["id"] for s in ds[[3, 1, 59]]], [3, 1, 59])
        self.assertEqual([s["id"] for s in ds[np.array([5, 6])]], [5, 6])
        self.assertEqual([s["id"] for s in ds[2:8:3]], [2, 5])
        self.assertEqual(ds.num_shards, len([f for f in os.listdir(self.remote) if f.endswith(".mds")]))

    def test_pkl_needs_allow_unsafe_types(self):
        remote = os.path.join(self.tmp, "pkl")
        helpers.mdswrite.write(remote, {"id": "int", "obj": "bytes"},
                               ({"id": i, "obj": pickle.dumps(i)} for i in range(5)))
        # Mark the column pkl in the index (the test writer has no pkl codec).
        import json
        p = os.path.join(remote, "index.json")
        with open(p) as f:
            doc = json.load(f)
        for sh in doc["shards"]:
            sh["column_encodings"] = ["int", "pkl"]
        with open(p, "w") as f:
            json.dump(doc, f)
        with self.assertRaises(ValueError):
            sluice.StreamingDataset(remote=remote, local=self.local("pkl-a"))
        ds = sluice.StreamingDataset(remote=remote, local=self.local("pkl-b"), allow_unsafe_types=True)
        self.assertEqual(len(ds), 5)

    def test_index_errors_are_mosaicml_classes(self):
        import json
        cases = (("missing", None, FileNotFoundError), ("empty", "", json.JSONDecodeError),
                 ("bad", "{bad", json.JSONDecodeError), ("noshards", '{"version": 2, "shards": []}', RuntimeError))
        for name, text, exc in cases:
            with self.subTest(case=name):
                remote = os.path.join(self.tmp, "idx-" + name)
                if text is not None:
                    os.makedirs(remote, exist_ok=True)
                    with open(os.path.join(remote, "index.json"), "w") as f:
                        f.write(text)
                with self.assertRaises(exc) as cm:
                    sluice.StreamingDataset(remote=remote, local=self.local("idxc-" + name))
                self.assertIsInstance(cm.exception, sluice.SluiceError)

    def test_batch_size_required_at_iteration(self):
        # MosaicML checks at iteration time that batch_size was given; the
        # error is a ValueError naming what to pass, for a plain iteration,
        # torch's worker processes and Sluice's threaded feed alike.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local("nobatch"))
        self.assertEqual(ds[3]["id"], 3)  # random access needs no batch size
        with self.assertRaisesRegex(ValueError, "batch_size=None.*DataLoader's batch_size"):
            next(iter(ds))
        for feed in ("threads", "workers"):
            with self.subTest(feed=feed):
                old = os.environ.get("SLUICE_FEED")
                os.environ["SLUICE_FEED"] = feed
                try:
                    loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=2)
                    with self.assertRaisesRegex(Exception, "batch_size=None") as cm:
                        next(iter(loader))
                    self.assertIn("2 workers", str(cm.exception))
                    del loader
                finally:
                    if old is None:
                        os.environ.pop("SLUICE_FEED", None)
                    else:
                        os.environ["SLUICE_FEED"] = old

    def test_user_warnings_and_unsupported_shard_api(self):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            ds = sluice.StreamingDataset(remote=self.remote, local=self.local("warn"), batch_size=8, predownload=4,
                                         shuffle=True, shuffle_block_size=2)
        msgs = [str(w.message) for w in got if w.category is UserWarning]
        self.assertTrue(any("predownload (4)" in m for m in msgs), msgs)
        self.assertTrue(any("shuffle_block_size (2)" in m for m in msgs), msgs)
        for call in (lambda: ds.prepare_shard(0), lambda: ds.evict_shard(0), ds.evict_coldest_shard):
            with self.assertRaises(NotImplementedError):
                call()

    def test_deleted_shard_and_removed_local(self):
        # A shard deleted from local between epochs is fetched again; a
        # local removed between two datasets (same agent) is re-created.
        import shutil
        local = self.local("deleted")
        ds = sluice.StreamingDataset(remote=self.remote, local=local, batch_size=4)
        self.assertEqual(sorted(s["id"] for s in ds), list(range(60)))
        shards = sorted(f for f in os.listdir(local) if f.endswith(".mds"))
        os.remove(os.path.join(local, shards[0]))
        self.assertEqual(sorted(s["id"] for s in ds), list(range(60)))
        del ds
        gc.collect()
        shutil.rmtree(local)
        ds = sluice.StreamingDataset(remote=self.remote, local=local, batch_size=4)
        self.assertEqual(sorted(s["id"] for s in ds), list(range(60)))
        self.assertTrue(os.path.isdir(local))

    def test_shard_deleted_during_epoch(self):
        # Every cached shard deleted from local while the epoch is under
        # way (the shard being read, those prefetched): the epoch still
        # yields every sample exactly once.
        remote = os.path.join(self.tmp, "remote-600")
        helpers.write_ids(remote, 600, size_limit=400)
        local = self.local("deleted-mid")
        ds = sluice.StreamingDataset(remote=remote, local=local, batch_size=4, predownload=8)
        ids, removed = [], []
        for s in ds:
            ids.append(int(s["id"]))
            if len(ids) == 5:
                removed = [f for f in os.listdir(local) if f.endswith(".mds")]
                for f in removed:
                    os.remove(os.path.join(local, f))
        self.assertTrue(removed, "no shard was cached after 5 samples")
        self.assertEqual(sorted(ids), list(range(600)))
        # Shards leased when they were deleted were read from their open
        # files; the next epoch fetches them again.
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(600)))
        gone = [f for f in removed if not os.path.exists(os.path.join(local, f))]
        self.assertEqual(gone, [], "deleted shards not fetched again")

    def test_derived_local(self):
        # No local: MosaicML's folder, <tmp>/<blake2s-16 of remote>/<split>.
        import hashlib
        import shutil
        import tempfile
        name = hashlib.blake2s(self.remote.encode("utf-8"), digest_size=16).hexdigest()
        want = os.path.join(tempfile.gettempdir(), name, "")
        shutil.rmtree(os.path.join(tempfile.gettempdir(), name), ignore_errors=True)
        ds = sluice.StreamingDataset(remote=self.remote, batch_size=4)
        self.assertEqual(ds.local, want)
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(60)))
        self.assertTrue([f for f in os.listdir(want) if f.endswith(".mds")], os.listdir(want))

    def test_stream_subclass_refused(self):
        class Custom(sluice.Stream):
            def get_shards(self, world, allow_unsafe_types):
                raise AssertionError("never called")

        class Plain(sluice.Stream):
            pass

        with self.assertRaises(NotImplementedError) as cm:
            sluice.StreamingDataset(streams=[Custom(remote=self.remote, local=self.local("sub-a"))], batch_size=4)
        self.assertIn("get_shards", str(cm.exception))
        with self.assertRaises(ValueError):
            sluice.StreamingDataset(remote=self.remote, local=self.local("sub-b"), batch_size=4, stream_name="custom")
        ds = sluice.StreamingDataset(streams=[Plain(remote=self.remote, local=self.local("sub-c"))], batch_size=4)
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(60)))

    def test_several_datasets_one_cache_with_workers(self):
        local = self.local("several")
        dss = [sluice.StreamingDataset(remote=self.remote, local=local, batch_size=4, shuffle=True, shuffle_seed=s)
               for s in (1, 2, 3)]
        loaders = [sluice.StreamingDataLoader(d, batch_size=4, num_workers=2) for d in dss]
        seen = [[] for _ in loaders]
        for batches in zip(*loaders):
            for i, b in enumerate(batches):
                seen[i] += [int(x) for x in b["id"]]
        for i in range(len(loaders)):
            self.assertEqual(sorted(seen[i]), list(range(60)), i)

    def test_streams_hold_resolved_weights(self):
        # Four equal streams without weights: MosaicML leaves proportion
        # 0.25, repeat 1 and choose = the stream's samples on each.
        streams = []
        for k in range(4):
            remote = os.path.join(self.tmp, "eq-%d" % k)
            helpers.write_ids(remote, 20, size_limit=400)
            streams.append(sluice.Stream(remote=remote, local=self.local("eq-local-%d" % k)))
        ds = sluice.StreamingDataset(streams=streams, batch_size=4)
        for st in streams:
            self.assertAlmostEqual(st.proportion, 0.25)
            self.assertAlmostEqual(st.repeat, 1.0)
            self.assertEqual(st.choose, 20)
        self.assertEqual(ds.epoch_size, 80)
        # The same Streams in a second dataset resolve again from what
        # the user gave.
        ds2 = sluice.StreamingDataset(streams=streams, batch_size=4, shuffle=True)
        self.assertEqual(ds2.epoch_size, 80)

    def test_differing_cache_limit_warns(self):
        local = self.local("limits")
        a = sluice.StreamingDataset(remote=self.remote, local=local, cache_limit="10mb")
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            b = sluice.StreamingDataset(remote=self.remote, local=local, cache_limit="20mb", shuffle=True)
        msgs = [str(w.message) for w in got if issubclass(w.category, UserWarning)]
        self.assertTrue(any("cache_limit=20mb does not apply" in m and "10485760 bytes" in m for m in msgs), msgs)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            c = sluice.StreamingDataset(remote=self.remote, local=local, cache_limit="10mb", shuffle=True)
        self.assertFalse([w for w in got if "does not apply" in str(w.message)])
        self.assertEqual(len(a) + len(b) + len(c), 180)

    def test_break_delete_rebuild_same_local(self):
        # Used to fail with "storage: bucket closed" in most trials.
        for trial in range(5):
            ds = sluice.StreamingDataset(remote=self.remote, local=self.local("rebuild"), batch_size=4,
                                         shuffle=True, shuffle_seed=trial)
            for i, _ in enumerate(ds):
                if i == 7:
                    break
            del ds
            gc.collect()
            ds = sluice.StreamingDataset(remote=self.remote, local=self.local("rebuild"), batch_size=4,
                                         shuffle=True, shuffle_seed=trial + 100)
            self.assertEqual(sorted(s["id"] for s in ds), list(range(60)))
            del ds
            gc.collect()


if __name__ == "__main__":
    unittest.main()
