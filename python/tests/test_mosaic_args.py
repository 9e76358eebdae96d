"""MosaicML's argument checks, index types and error classes, as a user
migrating from `streaming` meets them: each case is what MosaicML Streaming
raises or warns for the same call (its StreamingDataset, Stream and
Array.__getitem__)."""

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


@unittest.skipIf(torch is None, "torch missing")
class MosaicArgsTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, 60, size_limit=400)
        cls.n = 0

    def local(self):
        type(self).n += 1
        return os.path.join(self.tmp, "local-%d" % self.n)

    def test_download_arguments_are_checked(self):
        # MosaicML: Stream(download_retry=-1) and Stream(download_timeout=0)
        # raise ValueError, and so does the dataset's own (it builds a
        # Stream from them).
        for kw in ({"download_retry": -1}, {"download_timeout": 0}, {"download_timeout": -3.0}):
            with self.subTest(kw=kw):
                with self.assertRaises(ValueError):
                    sluice.Stream(remote=self.remote, **kw)
                with self.assertRaises(ValueError) as cm:
                    sluice.StreamingDataset(remote=self.remote, local=self.local(), **kw)
                self.assertNotIsInstance(cm.exception, sluice.SluiceError)  # refused before the agent
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), download_retry=0, batch_size=4)
        self.assertEqual(len(ds), 60)

    def test_batch_size_must_be_an_int(self):
        # MosaicML raises ValueError for a batch_size that is not an int;
        # Sluice says so when the dataset is built (a bool too, which
        # MosaicML would take as 1).
        for bad in ("4", 4.0, True):
            with self.subTest(batch_size=bad):
                with self.assertRaisesRegex(ValueError, "batch_size must be an int"):
                    sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=bad)
        # numpy integers, as a config may give them, are ints.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=np.int64(4),
                                     shuffle=True, shuffle_seed=np.int64(5), num_canonical_nodes=np.int32(1),
                                     predownload=np.int64(8), sampling_granularity=np.int64(1))
        self.assertEqual(ds.batch_size, 4)
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(60)))
        st = sluice.Stream(remote=self.remote, local=self.local(), download_retry=np.int64(1), choose=np.int64(30))
        self.assertEqual(len(sluice.StreamingDataset(streams=[st], batch_size=4)), 30)

    def test_streams_or_remote_by_truth_value(self):
        # MosaicML's rule is bool(streams) == (bool(remote) or bool(local)):
        # an empty streams list beside a remote reads the remote, and empty
        # strings are no location at all.
        ds = sluice.StreamingDataset(streams=[], remote=self.remote, local=self.local(), batch_size=4)
        self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(60)))
        for kw in ({"remote": "", "local": ""}, {"streams": []}, {}):
            with self.subTest(kw=kw):
                with self.assertRaisesRegex(ValueError, "either `streams` or `remote`/`local`"):
                    sluice.StreamingDataset(**kw)
        with self.assertRaises(ValueError):
            sluice.StreamingDataset(streams=[sluice.Stream(remote=self.remote, local=self.local())],
                                    remote=self.remote)

    def test_float_sizes_and_py1b_deprecation(self):
        # MosaicML's number_abbrev_to_int and bytes_to_int take floats.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), epoch_size=30.0, cache_limit=1e6,
                                     batch_size=4)
        self.assertEqual(ds.epoch_size, 30)
        self.assertEqual(len(list(ds)), 30)
        # Spaces inside the abbreviation, as MosaicML's parsers allow.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), epoch_size=" 0.03 k", cache_limit=" 1 mb ",
                                     batch_size=4)
        self.assertEqual(ds.epoch_size, 30)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            sluice.StreamingDataset(remote=self.remote, local=self.local(), shuffle=True, shuffle_algo="py1b",
                                    batch_size=4)
        self.assertTrue([w for w in got if w.category is DeprecationWarning and "py1b" in str(w.message)],
                        [str(w.message) for w in got])

    def test_getitem_index_types(self):
        # MosaicML's Array.__getitem__ takes ints (Python, numpy), slices,
        # lists and arrays, and raises ValueError for anything else; a
        # float is never truncated to a sample.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=4)
        for bad in (2.7, "3", None, 3.0):
            with self.subTest(index=bad):
                with self.assertRaisesRegex(ValueError, "Unsupported argument type"):
                    ds[bad]
        self.assertEqual(ds[np.int64(5)]["id"], 5)
        self.assertEqual(ds[torch.tensor(7)]["id"], 7)
        self.assertEqual([[s["id"] for s in row] for row in ds[np.array([[1, 2], [3, 4]])]], [[1, 2], [3, 4]])
        self.assertEqual(ds[-1]["id"], 59)
        with self.assertRaisesRegex(IndexError, "-61"):
            ds[-61]
        with self.assertRaises(IndexError):
            ds[60]

    def bad_digests(self, name):
        """A remote of 20 samples whose index gives every shard a wrong
        sha1 digest."""
        bad = os.path.join(self.tmp, name)
        helpers.write_ids(bad, 20, size_limit=400)
        p = os.path.join(bad, "index.json")
        with open(p) as f:
            doc = json.load(f)
        for sh in doc["shards"]:
            sh["raw_data"]["hashes"] = {"sha1": "00" * 20}
        with open(p, "w") as f:
            json.dump(doc, f)
        return bad

    def test_validate_hash_errors_are_value_errors(self):
        # MosaicML raises ValueError for a hash the index does not carry and
        # for a checksum failure; an unknown algorithm fails there too.
        with self.assertRaisesRegex(ValueError, "bogus"):
            sluice.StreamingDataset(remote=self.remote, local=self.local(), validate_hash="bogus", batch_size=4)
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), validate_hash="sha1", batch_size=4)
        with self.assertRaisesRegex(ValueError, "no sha1 digest"):
            list(ds)
        bad = self.bad_digests("bad-digest")
        ds = sluice.StreamingDataset(remote=bad, local=self.local(), validate_hash="sha1", batch_size=4,
                                     download_retry=1)
        with self.assertRaisesRegex(sluice.CorruptDataError, "checksum failure"):
            list(ds)

    def test_validate_hash_of_a_later_dataset_over_the_same_local(self):
        # Two datasets over one local, the first without validate_hash: the
        # second's check applies to the shards downloaded after it opened
        # (a shard already there is not checked again, as in MosaicML).
        # Before, the first dataset's registration decided for both, and
        # the damaged digests went unnoticed.
        bad = self.bad_digests("bad-digest-later")
        local = self.local()
        first = sluice.StreamingDataset(remote=bad, local=local, batch_size=4)
        self.assertEqual(first[0]["id"], 0)
        ds = sluice.StreamingDataset(remote=bad, local=local, validate_hash="sha1", batch_size=4, download_retry=1)
        with self.assertRaisesRegex(sluice.CorruptDataError, "checksum failure"):
            list(ds)

    def test_layout_attributes(self):
        # MosaicML's per-shard and per-stream int64 arrays, over two
        # streams of 60 (5 shards) and 30 samples (3 shards).
        other = os.path.join(self.tmp, "remote-30")
        helpers.write_ids(other, 30, size_limit=400)
        streams = [sluice.Stream(remote=self.remote, local=self.local()), sluice.Stream(remote=other, local=self.local())]
        ds = sluice.StreamingDataset(streams=streams, batch_size=4)
        self.assertIsInstance(ds.samples_per_shard, np.ndarray)
        self.assertEqual(ds.samples_per_shard.dtype, np.int64)
        self.assertEqual(ds.samples_per_shard.tolist(), [12] * 7 + [6])
        self.assertEqual(ds.sample_offset_per_shard.tolist(), [0, 12, 24, 36, 48, 60, 72, 84])
        self.assertEqual(ds.num_streams, 2)
        self.assertEqual(ds.shards_per_stream.tolist(), [5, 3])
        self.assertEqual(ds.shard_offset_per_stream.tolist(), [0, 5])
        self.assertEqual(ds.samples_per_stream.tolist(), [60, 30])
        self.assertEqual(ds.sample_offset_per_stream.tolist(), [0, 60])
        self.assertEqual(ds.stream_per_shard.tolist(), [0] * 5 + [1] * 3)
        one = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=4)
        self.assertEqual((one.num_streams, one.samples_per_stream.tolist(), one.shards_per_stream.tolist()),
                         (1, [60], [5]))

    def test_streams_hold_dataset_defaults(self):
        # MosaicML: remote/local become one Stream in ds.streams, and each
        # Stream takes the dataset's download settings where it was given
        # none (split '' when none), a later dataset's again.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=4, download_timeout=45)
        self.assertEqual(len(ds.streams), 1)
        st = ds.streams[0]
        self.assertEqual((st.remote, st.split, st.download_retry, st.download_timeout, st.keep_zip, st.choose),
                         (self.remote, "", 2, 45, False, 60))
        s = sluice.Stream(remote=self.remote, local=self.local(), download_retry=5)
        sluice.StreamingDataset(streams=[s], batch_size=4, download_timeout=30, validate_hash="sha1")
        self.assertEqual((s.download_retry, s.download_timeout, s.validate_hash, s.split), (5, 30, "sha1", ""))
        ds = sluice.StreamingDataset(streams=[s], batch_size=4, download_timeout=20)
        self.assertEqual((s.download_retry, s.download_timeout, s.validate_hash), (5, 20, None))
        # What the second dataset sends is what the user gave it, not the
        # first dataset's defaults the Stream holds.
        self.assertEqual(ds._wire["streams"], [{"remote": self.remote, "local": s.local, "download_retry": 5}])

    def test_local_dataset(self):
        # MosaicML's `from streaming import LocalDataset`: a map-style
        # dataset over shards on local disk, for any sampler.
        root = os.path.join(self.tmp, "localds")
        helpers.write_ids(os.path.join(root, "train"), 60, size_limit=400)
        ds = sluice.LocalDataset(root, split="train")
        self.assertIsInstance(ds, torch.utils.data.Dataset)
        self.assertNotIsInstance(ds, torch.utils.data.IterableDataset)
        self.assertEqual((len(ds), ds.size, ds.num_samples, ds.split), (60, 60, 60, "train"))
        self.assertEqual((ds[5]["id"], ds[-1]["id"], ds.get_item(7)["id"]), (5, 59, 7))
        self.assertEqual([s["id"] for s in ds[[3, 1]]], [3, 1])
        with self.assertRaises(IndexError):
            ds[60]
        loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
        seen = [int(x) for b in loader for x in b["id"]]
        self.assertEqual(sorted(seen), list(range(60)))
        self.assertNotEqual(seen, list(range(60)))  # the sampler's order
        with self.assertRaises(FileNotFoundError):
            sluice.LocalDataset(os.path.join(self.tmp, "no-such-dataset"))

    def test_state_dict_nodes_with_replication(self):
        # MosaicML's state dict (and default num_canonical_nodes) count the
        # nodes of the replicated world: 16 ranks, 8 a node, replication 2
        # are 8 ranks, 1 node of 8.
        cases = ((8, None, 2), (8, 2, 1), (4, 2, 2), (8, 4, 1), (4, 1, 4))
        for lws, replication, nodes in cases:
            with self.subTest(local_world_size=lws, replication=replication):
                helpers.set_env(self, {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": str(lws), "RANK": "0",
                                       "LOCAL_RANK": "0"})
                ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=1,
                                             replication=replication)
                sd = ds.state_dict(0, False)
                self.assertEqual((sd["initial_physical_nodes"], sd["num_canonical_nodes"]), (nodes, nodes))

    def test_missing_local_index_is_a_runtime_error(self):
        # MosaicML: a stream with no remote whose local has no index.json
        # raises RuntimeError; with a remote, the download's
        # FileNotFoundError. Sluice's error is a FileNotFoundError in both.
        missing = os.path.join(self.tmp, "no-index")
        os.makedirs(missing, exist_ok=True)
        for kw in ({"local": missing}, {"streams": [sluice.Stream(local=missing)]}):
            with self.subTest(kw=list(kw)):
                with self.assertRaises(RuntimeError) as cm:
                    sluice.StreamingDataset(batch_size=4, **kw)
                self.assertIsInstance(cm.exception, FileNotFoundError)
        with self.assertRaises(FileNotFoundError) as cm:
            sluice.StreamingDataset(remote=missing, local=self.local(), batch_size=4)
        self.assertNotIsInstance(cm.exception, RuntimeError)

    def test_next_epoch(self):
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local(), batch_size=4)
        self.assertEqual(ds.next_epoch, 0)
        self.assertEqual(len(list(ds)), 60)
        self.assertEqual(ds.next_epoch, 1)


if __name__ == "__main__":
    unittest.main()
