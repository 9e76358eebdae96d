"""Split-format datasets (JSON lines, CSV, TSV; spec §7) read through the
Python client give exactly the values `sluice dump` prints, and the
small-tensor pickling of DataLoader workers round-trips tensors."""

import json
import os
import struct
import subprocess
import unittest

import helpers
import mdswrite
import sluice
from sluice import _worker

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover
    torch = None

COLUMNS = {"id": "int", "name": "str", "score": "float"}


def samples(n):
    for i in range(n):
        yield {"id": i, "name": "name %d é\u2603 %s" % (i, "y" * (i % 7)), "score": (i - 40) / 3.0 if i % 5 else 1e300 * (i - 50)}


def dumped(directory):
    """`sluice dump` of directory as a list of {column: Python value}."""
    out = subprocess.run([helpers.binary(), "dump", directory], check=True, stdout=subprocess.PIPE).stdout
    rows = []
    for line in out.decode().splitlines():
        doc = json.loads(line)
        if doc["i"] != len(rows):
            raise AssertionError("dump line %d has i=%d" % (len(rows), doc["i"]))
        row = {}
        for name, col in doc["cols"].items():
            v = col["v"]
            if isinstance(v, dict) and "bits" in v:
                v = struct.unpack(">d", bytes.fromhex(v["bits"]))[0]
            row[name] = v
        rows.append(row)
    return rows


class SplitFormatTest(helpers.AgentCase):
    N = 157

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dirs = {}
        for fmt in ("json", "csv", "tsv"):
            d = os.path.join(cls.tmp, fmt)
            shards = mdswrite.write_split(d, fmt, COLUMNS, samples(cls.N), size_limit=1500)
            assert shards > 3, shards
            cls.dirs[fmt] = d

    def check(self, fmt):
        want = dumped(self.dirs[fmt])
        self.assertEqual(len(want), self.N)
        ds = sluice.StreamingDataset(remote=self.dirs[fmt], local=os.path.join(self.tmp, "cache-" + fmt), batch_size=8)
        got = list(ds)
        self.assertEqual(len(got), self.N)
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(g, w, "%s sample %d" % (fmt, i))
            for k, v in g.items():
                self.assertIs(type(v), type(w[k]), "%s sample %d column %s" % (fmt, i, k))
        self.assertEqual(ds[self.N - 1], want[self.N - 1])
        self.assertEqual(ds[3], want[3])
        return want

    def test_json(self):
        want = self.check("json")
        self.assertEqual(want[5]["score"], 1e300 * -45)

    def test_csv(self):
        self.check("csv")

    def test_tsv(self):
        self.check("tsv")

    @unittest.skipIf(torch is None, "needs torch")
    def test_csv_dataloader_two_workers(self):
        want = dumped(self.dirs["csv"])
        ds = sluice.StreamingDataset(remote=self.dirs["csv"], local=os.path.join(self.tmp, "cache-csv-dl"), batch_size=8)
        seen = {}
        for b in DataLoader(ds, batch_size=8, num_workers=2):
            self.assertEqual(b["id"].dtype, torch.int64)
            self.assertEqual(b["score"].dtype, torch.float64)
            # Small tensors left the worker by value (sluice._worker).
            self.assertFalse(b["id"].is_shared())
            for j, i in enumerate(b["id"].tolist()):
                self.assertNotIn(i, seen)
                seen[i] = {"id": i, "name": b["name"][j], "score": b["score"][j].item()}
        self.assertEqual([seen[i] for i in range(self.N)], want)


def _scribble(batch):
    """A collate_fn that writes into the arrays it got (in the worker)."""
    out = []
    for s in batch:
        a = s["data"]
        out.append((s["id"], a.copy(), a.flags.writeable, a.flags.owndata))
        a[...] = -1
    return out


@unittest.skipIf(torch is None, "needs torch")
class WorkerArrayTest(helpers.AgentCase):
    """In DataLoader workers ndarray values view a copy-on-write mapping of
    the shard: writable, correct, and writes never reach the cache."""

    def test_writable_views_leave_shard_intact(self):
        import numpy as np

        remote = os.path.join(self.tmp, "nd")
        local = os.path.join(self.tmp, "cache-nd")
        want = {i: (np.arange(12, dtype=np.int32).reshape(3, 4) * (i + 1)) for i in range(300)}
        mdswrite.write(remote, {"id": "int", "data": "ndarray:int32:3,4"}, ({"id": i, "data": want[i]} for i in range(300)),
                       size_limit=1 << 12)
        ds = sluice.StreamingDataset(remote=remote, local=local, batch_size=10, shuffle=True)
        loader = DataLoader(ds, batch_size=10, num_workers=2, collate_fn=_scribble, persistent_workers=True)
        for epoch in range(2):
            seen = set()
            for batch in loader:
                for i, arr, writable, owndata in batch:
                    self.assertTrue(writable)
                    self.assertFalse(owndata)  # a view of the mapping, no copy
                    np.testing.assert_array_equal(arr, want[i])
                    seen.add(i)
            self.assertEqual(seen, set(range(300)), "epoch %d" % epoch)
        shards = [f for f in os.listdir(remote) if f.endswith(".mds")]
        self.assertGreater(len(shards), 3)
        for f in shards:
            with open(os.path.join(local, f), "rb") as fh, open(os.path.join(remote, f), "rb") as orig:
                self.assertEqual(fh.read(), orig.read(), f)
        # In the main process values are ordinary writable copies.
        s = next(iter(ds))
        self.assertTrue(s["data"].flags.writeable and s["data"].flags.owndata)


@unittest.skipIf(torch is None, "needs torch")
class SmallTensorPicklingTest(unittest.TestCase):
    def setUp(self):
        from multiprocessing.reduction import ForkingPickler

        self.reducers = ForkingPickler._extra_reducers
        self.saved = self.reducers.get(torch.Tensor)
        self.addCleanup(self.reducers.__setitem__, torch.Tensor, self.saved)

    def roundtrip(self, t):
        red = self.reducers[torch.Tensor](t)
        return red, red[0](*red[1])

    def test_small_tensors_by_value(self):
        self.assertTrue(_worker.install_small_tensor_pickling(1024))
        self.assertTrue(_worker.install_small_tensor_pickling(1024))  # idempotent
        base = torch.arange(24, dtype=torch.int64).reshape(4, 6)
        cases = [
            base,
            base.t(),  # not contiguous
            torch.tensor(7),  # 0-dim
            torch.empty(0, 3),
            torch.tensor([True, False, True]),
            torch.arange(10, dtype=torch.bfloat16),
            torch.tensor([1 + 2j, 3 - 4j]).conj(),
            torch.arange(6, dtype=torch.float32).neg(),
        ]
        for t in cases:
            red, back = self.roundtrip(t)
            self.assertIs(red[0], _worker._rebuild_small, t)
            self.assertEqual(back.dtype, t.dtype)
            self.assertEqual(back.shape, t.shape)
            self.assertTrue(torch.equal(back, t.resolve_conj()), t)
            self.assertFalse(back.is_shared())
            back.zero_()  # writable

    def test_large_and_special_tensors_keep_torch_path(self):
        self.assertTrue(_worker.install_small_tensor_pickling(1024))
        for t in (torch.zeros(257, dtype=torch.float32), torch.zeros(3, requires_grad=True)):
            red = self.reducers[torch.Tensor](t)
            self.assertIsNot(red[0], _worker._rebuild_small)
            self.assertIs(red[0], self.saved(t)[0])

    def test_limit_zero_is_off(self):
        self.assertFalse(_worker.install_small_tensor_pickling(0))
        self.assertIs(self.reducers.get(torch.Tensor), self.saved)


if __name__ == "__main__":
    unittest.main()
