"""encoded_tensors (sluice._encoded): a column delivered undecoded, each
value a 1-D torch.uint8 tensor, a batch's column a list of them, for GPU
decoders (torchvision.io.decode_jpeg(list, device="cuda"), nvJPEG, DALI).

Through the shared-memory feed the tensors view the batch's memory file
(zero copy: their data lie inside the slot's mapping and no bytes object
is built), a batch the user holds keeps its slot from reuse while any
tensor or view of it lives, and dropped batches let slots be reused. On
every other path (worker processes, num_workers=0, iterating the dataset,
ds[i]) the values and types are the same. Values equal the bytes written
and the MDS reader's, in the plan's order, each sample once."""

import gc
import io
import os
import tracemalloc
import unittest

import helpers
import mdswrite

try:
    import numpy as np
    import torch
    from PIL import Image
except ImportError:  # pragma: no cover
    torch = np = Image = None

try:
    import torchvision.io as tvio
except ImportError:  # torchvision is optional (Debian: python3-torchvision)
    tvio = None

import sluice
from sluice import _encoded, _shm, errors


class Env:
    """Sets environment variables for a with-block."""

    def __init__(self, **kw):
        self.kw = kw

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in self.kw}
        os.environ.update(self.kw)

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def memfd_ranges():
    """The address ranges of the agent's memory files mapped here."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "/memfd:sluice-feed" in line:
                a, b = line.split()[0].split("-")
                out.append((int(a, 16), int(b, 16)))
    return out


def in_memfd(t, ranges):
    a = t.data_ptr()
    return any(lo <= a and a + t.numel() <= hi for lo, hi in ranges)


class Slots:
    """Counts the feed batches mapped and the descriptors that came with
    them (a fresh memory file) in this process."""

    def __enter__(self):
        self.batches = self.fds = 0
        self.orig = _shm.Slots.batch
        me, orig = self, self.orig

        def batch(slots, hdr, fds):
            b = orig(slots, hdr, fds)
            if b is not None:
                me.batches += 1
                me.fds += len(fds)
            return b

        _shm.Slots.batch = batch
        return self

    def __exit__(self, *exc):
        _shm.Slots.batch = self.orig


# The paths of a StreamingDataLoader: (SLUICE_FEED, SLUICE_SHM) and whether
# the tensors view the shared memory.
PATHS = (("threads", "auto", True), ("threads", "on", True), ("threads", "off", False),
         ("workers", "off", False), ("workers", "on", False))


@unittest.skipIf(torch is None, "torch, numpy or Pillow missing")
class EncodedTest(helpers.AgentCase):
    N = 480

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "data")
        rnd = np.random.default_rng(7)
        cls.truth = {}
        for i in range(cls.N):
            # Noise JPEGs of 10-30 KB, each of its own size.
            a = rnd.integers(0, 256, (120 + i % 41, 150 + i % 53, 3), dtype=np.uint8)
            b = io.BytesIO()
            Image.fromarray(a).save(b, "JPEG", quality=90)
            cls.truth[i] = b.getvalue()
        samples = ({"id": i, "jpg": cls.truth[i], "blob": cls.truth[i], "n": np.int32(i)} for i in range(cls.N))
        mdswrite.write(cls.data, {"id": "int", "jpg": "jpeg", "blob": "bytes", "n": "int32"}, samples,
                       size_limit=1 << 18)
        # One bytes column alone: what the client allocates for it shows.
        cls.plain = os.path.join(cls.tmp, "plain")
        mdswrite.write(cls.plain, {"id": "int", "data": "bytes"}, ({"id": i, "data": cls.truth[i]} for i in range(cls.N)),
                       size_limit=1 << 18)

    def dataset(self, bs=16, encoded=("jpg",), **kw):
        return sluice.StreamingDataset(local=self.data, batch_size=bs, shuffle=True, shuffle_seed=5,
                                       encoded_tensors=[sluice.EncodedTensor(c) for c in encoded], **kw)

    def check_batch(self, b):
        """b's jpg column is a list of 1-D uint8 tensors equal to the bytes
        written; returns its ids."""
        ids = [int(x) for x in b["id"]]
        self.assertIs(type(b["jpg"]), list)
        self.assertEqual(len(b["jpg"]), len(ids))
        for i, t in zip(ids, b["jpg"]):
            self.assertIs(type(t), torch.Tensor)
            self.assertEqual((t.dtype, t.dim()), (torch.uint8, 1))
            self.assertEqual(bytes(t.numpy()), self.truth[i], "sample %d" % i)
        self.assertEqual(b["n"].tolist(), ids)
        return ids

    def test_reader_gives_the_written_bytes(self):
        """The reference: the MDS reader's bytes column (blob) is the bytes
        written, and the jpeg column undecoded equals it."""
        ds = self.dataset(encoded=())
        ds2 = self.dataset()
        for i in (0, 7, self.N - 1):
            self.assertEqual(ds[i]["blob"], self.truth[i])
            self.assertIsInstance(ds[i]["jpg"], Image.Image)  # without the option: decoded
            v = ds2[i]["jpg"]
            self.assertEqual((type(v), v.dtype, v.dim()), (torch.Tensor, torch.uint8, 1))
            self.assertEqual(bytes(v.numpy()), ds[i]["blob"])

    def test_order_values_exactly_once(self):
        """At 0, 2 and 4 workers, on every path: the plan's batches in its
        order, each sample once, every value the bytes written, a list of
        1-D uint8 tensors; the shared-memory paths really ran."""
        for workers in (0, 2, 4):
            shape, work = helpers.plan_work(self.data, 16, workers=max(workers, 1), seed=5)
            want = helpers.rank_batches(shape, work, 0, 16)
            for feed, shm, zero in PATHS:
                with self.subTest(workers=workers, feed=feed, shm=shm), Env(SLUICE_FEED=feed, SLUICE_SHM=shm), \
                        Slots() as sl:
                    got = [self.check_batch(b)
                           for b in sluice.StreamingDataLoader(self.dataset(), batch_size=16, num_workers=workers)]
                    self.assertEqual(got, want)
                    self.assertEqual(sorted(i for b in got for i in b), list(range(self.N)))
                    if zero:
                        self.assertEqual(sl.batches, len(want))
        # Plain iteration and random access: tensors too.
        ds = self.dataset()
        n = 0
        for s in ds:
            self.assertEqual((type(s["jpg"]), s["jpg"].dtype), (torch.Tensor, torch.uint8))
            self.assertEqual(bytes(s["jpg"].numpy()), self.truth[s["id"]])
            n += 1
        self.assertEqual(n, self.N)

    def test_zero_copy(self):
        """Through the shared-memory feed every tensor's data lie inside a
        memory file of the agent mapped here, and the client builds no
        bytes object per sample (tracemalloc: the Python heap's peak stays
        far below one batch's bytes, where the same loop over the bytes
        column, copied into bytes objects, passes it)."""
        bs = 32
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"):
            for b in sluice.StreamingDataLoader(self.dataset(bs), batch_size=bs, num_workers=2):
                ranges = memfd_ranges()
                self.assertTrue(ranges)
                self.check_batch(b)
                for t in b["jpg"]:
                    self.assertTrue(in_memfd(t, ranges), "a tensor outside the feed's memory: copied")
                # All views of one region: the column's bytes back to back.
                for x, y in zip(b["jpg"], b["jpg"][1:]):
                    self.assertEqual(x.data_ptr() + x.numel(), y.data_ptr())
            peaks = {}
            for name, enc in (("tensors", "data"), ("bytes", None)):
                ds = sluice.StreamingDataset(local=self.plain, batch_size=bs, shuffle=True, encoded_tensors=enc)
                loader = sluice.StreamingDataLoader(ds, batch_size=bs, num_workers=2)
                smallest = 1 << 62
                tracemalloc.start()
                try:
                    for b in loader:
                        vals = b["data"]
                        self.assertIsInstance(vals[0], bytes if enc is None else torch.Tensor)
                        smallest = min(smallest, sum(len(v) if enc is None else v.numel() for v in vals))
                        b = vals = None
                    peaks[name] = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                del loader
                gc.collect()
                peaks[name + " batch"] = smallest
        # The copying loop holds at least a batch of bytes objects at once.
        self.assertGreater(peaks["bytes"], peaks["bytes batch"], peaks)
        self.assertLess(peaks["tensors"], peaks["tensors batch"] // 4, peaks)
        # And the copy paths' tensors are their own memory, not the feed's.
        with Env(SLUICE_FEED="threads", SLUICE_SHM="off"):
            for b in sluice.StreamingDataLoader(self.dataset(bs), batch_size=bs, num_workers=2):
                ranges = memfd_ranges()
                self.assertFalse(any(in_memfd(t, ranges) for t in b["jpg"]))
                break

    def test_held_batch_pins_its_slot(self):
        """A batch held (its list, or one slice of one tensor alone) stays
        intact and in shared memory while the loader goes on for far more
        batches than an iteration has slots (8); the loop never waits on
        it (the agent writes into a file used once when every slot is
        held)."""
        bs = 8
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"), Slots() as sl:
            held = sliced = None
            n = 0
            for b in sluice.StreamingDataLoader(self.dataset(bs), batch_size=bs, num_workers=2):
                n += 1
                if n == 1:
                    held = (self.check_batch(b), b["jpg"])
                    self.assertTrue(all(in_memfd(t, memfd_ranges()) for t in held[1]))
                elif n == 2:
                    i, t = int(b["id"][3]), b["jpg"][3]
                    sliced = (i, t[10:-10].view(-1, 2)[:, 0])  # a view of a view of the slot
                    self.assertTrue(in_memfd(sliced[1], memfd_ranges()))
                b = t = None
                gc.collect()
            self.assertEqual(n, self.N // bs)
            self.assertGreater(sl.batches // 2, 8 * 2)
        ids, tensors = held
        for i, t in zip(ids, tensors):
            self.assertEqual(bytes(t.numpy()), self.truth[i], "held sample %d was overwritten" % i)
        i, v = sliced
        self.assertEqual(bytes(v.contiguous().numpy()), self.truth[i][10:-10][::2])

    def test_dropped_batches_free_their_slots(self):
        """Batches dropped as the loop goes: a few memory files serve a long
        epoch (each slot reused), the mappings here stay bounded, and once
        the loader is gone they are all unmapped."""
        bs = 4
        gc.collect()  # earlier tests' batches
        before = len(memfd_ranges())
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"), Slots() as sl:
            most = 0
            for epoch in range(2):
                loader = sluice.StreamingDataLoader(self.dataset(bs), batch_size=bs, num_workers=2)
                for b in loader:
                    self.check_batch(b)
                    most = max(most, len(memfd_ranges()))
                b = None
                del loader
        gc.collect()
        self.assertEqual(sl.batches, 2 * self.N // bs)
        # 2 workers x 8 slots per iteration at most; a leak would send a
        # fresh file with nearly every one of the 240 batches.
        self.assertLessEqual(sl.fds, 2 * 2 * 8)
        self.assertLessEqual(most, before + 2 * 8 + 2)
        self.assertEqual(len(memfd_ranges()), before)

    def test_resume_mid_epoch(self):
        """A checkpoint after 7 batches of the shared-memory path resumes,
        on it and on the copying paths, with exactly the samples not yet
        seen, in the plan's order, values intact."""
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"):
            loader = sluice.StreamingDataLoader(self.dataset(), batch_size=16, num_workers=2)
            first = []
            for b in loader:
                first.append(self.check_batch(b))
                if len(first) == 7:
                    state = loader.state_dict()
                    break
            del loader
        self.assertEqual(state["sample_in_epoch"], 7 * 16)
        shape, work = helpers.plan_work(self.data, 16, workers=2, seed=5, sample_in_epoch=7 * 16)
        want = helpers.rank_batches(shape, work, 0, 16)
        for feed, shm, _ in PATHS[1:]:
            with self.subTest(feed=feed, shm=shm), Env(SLUICE_FEED=feed, SLUICE_SHM=shm):
                ds = self.dataset()
                ds.load_state_dict(state)
                rest = [self.check_batch(b) for b in sluice.StreamingDataLoader(ds, batch_size=16, num_workers=2)]
                self.assertEqual(rest, want)
                self.assertEqual(sorted(i for b in first + rest for i in b), list(range(self.N)))

    def test_decodes_like_pil(self):
        """The list decodes to PIL's pixels: with torchvision.io.decode_jpeg
        on the CPU where torchvision is installed (the call a GPU decoder
        takes with device="cuda"), else with PIL from the tensors' bytes."""
        with Env(SLUICE_FEED="threads", SLUICE_SHM="on"):
            b = next(iter(sluice.StreamingDataLoader(self.dataset(), batch_size=16, num_workers=2)))
        ids = self.check_batch(b)
        if tvio is not None:
            try:
                imgs = tvio.decode_jpeg(b["jpg"])  # a list: torchvision >= 0.19
            except (TypeError, RuntimeError):
                imgs = [tvio.decode_jpeg(t) for t in b["jpg"]]
            imgs = [x.permute(1, 2, 0).numpy() for x in imgs]
        else:
            imgs = [np.asarray(Image.open(io.BytesIO(t.numpy().tobytes())).convert("RGB")) for t in b["jpg"]]
        for i, got in zip(ids, imgs):
            want = np.asarray(Image.open(io.BytesIO(self.truth[i])).convert("RGB"))
            self.assertEqual(got.shape, want.shape)
            self.assertTrue(np.array_equal(got, want), "sample %d decodes differently" % i)

    def test_pin_memory_without_cuda(self):
        """pin_memory=True on a machine without CUDA: every path works and
        nothing asks CUDA for pinned memory (it would raise here)."""
        self.assertFalse(torch.cuda.is_available())
        for feed, shm, _ in PATHS:
            with self.subTest(feed=feed, shm=shm), Env(SLUICE_FEED=feed, SLUICE_SHM=shm):
                n = 0
                for b in sluice.StreamingDataLoader(self.dataset(), batch_size=16, num_workers=2, pin_memory=True):
                    n += len(self.check_batch(b))
                self.assertEqual(n, self.N)

    def test_pinned_as_one_buffer_per_column(self):
        """With CUDA (simulated: pinning is a recorded copy), the threaded
        feed pins a batch's encoded column as one buffer and hands out
        views of it, on the shared-memory path and off it; a worker
        process's packed column pins as one buffer too."""
        pinned = []  # (address, bytes) of the buffers "pinned"

        def is_pinned(t):
            a = t.data_ptr()
            return any(lo <= a and a + t.numel() * t.element_size() <= lo + n for lo, n in pinned)

        def pin_memory(t, device=None):
            if is_pinned(t):
                return t
            c = t.clone()
            pinned.append((c.data_ptr(), c.numel() * c.element_size()))
            return c

        real_empty = torch.empty

        def empty(*a, pin_memory=False, **kw):
            t = real_empty(*a, **kw)
            if pin_memory:
                pinned.append((t.data_ptr(), t.numel() * t.element_size()))
            return t

        saved = (torch.cuda.is_available, torch.Tensor.pin_memory, torch.empty)
        torch.cuda.is_available, torch.Tensor.pin_memory, torch.empty = (lambda: True), pin_memory, empty
        try:
            for shm in ("on", "off"):
                with self.subTest(shm=shm), Env(SLUICE_FEED="threads", SLUICE_SHM=shm):
                    del pinned[:]
                    nb = 0
                    for b in sluice.StreamingDataLoader(self.dataset(), batch_size=16, num_workers=2,
                                                        pin_memory=True):
                        nb += 1
                        self.check_batch(b)
                        self.assertTrue(all(is_pinned(t) for t in b["jpg"]))
                        self.assertTrue(is_pinned(b["n"]))
                        for x, y in zip(b["jpg"], b["jpg"][1:]):
                            self.assertEqual(x.data_ptr() + x.numel(), y.data_ptr())
                    # One buffer for each batch's jpg column, not one per
                    # sample (plus its small tensors: id and n).
                    self.assertLessEqual(len(pinned), 3 * nb)
            p = _encoded.Packed.of([torch.arange(5, dtype=torch.uint8), torch.arange(3, dtype=torch.uint8)])
            del pinned[:]
            ts = p.pin_memory().tensors()
            self.assertEqual(len(pinned), 1)
            self.assertEqual([t.tolist() for t in ts], [[0, 1, 2, 3, 4], [0, 1, 2]])
            self.assertTrue(all(is_pinned(t) for t in ts))
        finally:
            torch.cuda.is_available, torch.Tensor.pin_memory, torch.empty = saved

    def test_arguments(self):
        """Bad arguments fail at construction, naming the column."""
        with self.assertRaisesRegex(errors.InvalidArgumentError, "'nope'.*lacks"):
            self.dataset(encoded=("nope",))
        with self.assertRaisesRegex(errors.InvalidArgumentError, "'n'.*fixed size"):
            self.dataset(encoded=("n",))
        with self.assertRaisesRegex(ValueError, "twice"):
            self.dataset(encoded=("jpg", "jpg"))
        with self.assertRaisesRegex(ValueError, "both"):
            self.dataset(decode_images=sluice.DecodeImage("jpg", 8))
        with self.assertRaises(TypeError):
            sluice.StreamingDataset(local=self.data, batch_size=16, encoded_tensors=[3])
        # A column name alone works as well as an EncodedTensor.
        ds = sluice.StreamingDataset(local=self.data, batch_size=16, encoded_tensors="jpg")
        self.assertEqual(bytes(ds[3]["jpg"].numpy()), self.truth[3])


BENCH = os.path.join(helpers.ROOT, "python", "bench", "encoded.py")


@unittest.skipIf(torch is None or not os.path.exists(BENCH), "needs torch, numpy and the source tree")
class EncodedBenchTest(unittest.TestCase):
    def test_bench_runs_and_guards_every_row(self):
        """python/bench/encoded.py on tiny epochs: every row (4 paths x 2
        batch sizes x 2 value sizes) printed beside its guard (samples, id
        sum, MB), which the script checked."""
        import re
        import shutil
        import subprocess
        import sys
        import tempfile

        tmp = tempfile.mkdtemp(prefix="sluice-encbench-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = dict(os.environ, SLUICE_BIN=helpers.binary(), SLUICE_AGENT_DIR=os.path.join(tmp, "agent"), TMPDIR=tmp)
        n, m = 96, 40
        r = subprocess.run([sys.executable, BENCH, "--rounds", "1", "--small", str(n), "--large", str(m), "--batch",
                            "8", "--batch", "32", "--work", os.path.join(tmp, "work")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:])
        rows = re.findall(r"^  ~(25|100) KB\s+(\d+)\s+.*?\s(\d+) / (\d+) / [\d.]+$", r.stdout, re.M)
        self.assertEqual(len(rows), 2 * 2 * 4, r.stdout)
        for kb, _, cnt, ids in rows:
            k = n if kb == "25" else m
            self.assertEqual((int(cnt), int(ids)), (k, k * (k - 1) // 2), r.stdout)


if __name__ == "__main__":
    unittest.main()
