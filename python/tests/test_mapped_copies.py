"""Mapped copies under a cache limit through the Python client: the
records the agent copies ahead come in its memory file (memfd, sent once a
connection over the socket), which the client maps read-only. Every
sample once, in the plan's order, at 0 and 2 workers; values kept past
their batch's release (the agent rewrites the file after it) stay
intact; SIGKILL of the agent mid-epoch leaves nothing in /dev/shm and the
client continues exactly where it was."""

import os
import signal
import time
import unittest
import uuid

import helpers
import mdswrite
from test_shm import Env

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = np = None

import sluice

N = 600
SIZE = 40000  # bytes of a sample's vector
BS = 8
SEED = 3
MEMFD = "/memfd:sluice-copies"


def mem_mapped():
    """Whether this process maps a memory file of mapped copies."""
    with open("/proc/self/maps") as f:
        return MEMFD in f.read()


def check_value(test, s):
    i = int(s["id"])
    v = s["vec"]
    test.assertEqual(v.shape, (SIZE,))
    test.assertTrue((v == i % 251).all(), "sample %d holds another's bytes (%s)" % (i, v[:4]))


@unittest.skipIf(np is None, "needs numpy and torch")
@unittest.skipUnless(os.path.exists("/proc/self/maps"), "needs /proc")
class MappedCopiesTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.src = os.path.join(cls.tmp, "src")
        mdswrite.write(cls.src, {"id": "int", "vec": "ndarray:uint8:%d" % SIZE},
                       ({"id": i, "vec": np.full(SIZE, i % 251, np.uint8)} for i in range(N)), size_limit=1 << 20)
        total = sum(os.path.getsize(os.path.join(cls.src, f)) for f in os.listdir(cls.src))
        # A limit that holds the data: the agent still reads ahead by
        # copies (the limited path), with no eviction in the way.
        cls.limit = 2 * total

    def dataset(self):
        return sluice.StreamingDataset(remote=self.src, local=os.path.join(self.tmp, "cache-" + uuid.uuid4().hex),
                                       batch_size=BS, shuffle=True, shuffle_seed=SEED, cache_limit=self.limit,
                                       stall_timeout=60, timeout=60)

    def test_values_outlive_their_batches(self):
        """The samples of a whole epoch kept, read after it: each holds its
        own bytes, in the plan's order, and the memory file was mapped."""
        shape, work = helpers.plan_work(self.src, BS, workers=1, seed=SEED)
        kept, seen = [], False
        with Env(SLUICE_SHM="off"):
            for s in self.dataset():
                kept.append(s)
                seen = seen or mem_mapped()
        self.assertTrue(seen, "no memory file of mapped copies was mapped")
        self.assertEqual([int(s["id"]) for s in kept], helpers.worker_ids(shape, work, 0, 0))
        for s in kept:
            check_value(self, s)
        self.assertFalse(mem_mapped(), "the memory file is still mapped after the epoch")

    def test_workers(self):
        """Two DataLoader workers (copy-on-write shard mappings): the plan's
        batches, each sample once, values intact after the epoch."""
        shape, work = helpers.plan_work(self.src, BS, workers=2, seed=SEED)
        with Env(SLUICE_SHM="off"):
            kept = list(sluice.StreamingDataLoader(self.dataset(), batch_size=BS, num_workers=2))
        self.assertEqual([[int(i) for i in b["id"]] for b in kept], helpers.rank_batches(shape, work, 0, BS))
        for b in kept:
            for i, v in zip(b["id"], b["vec"]):
                check_value(self, {"id": i, "vec": v.numpy()})

    def test_agent_killed(self):
        """SIGKILL of the agent while the client reads mapped copies:
        nothing left in /dev/shm, and the client continues with a new
        agent where it was, each sample once, in the plan's order."""
        shape, work = helpers.plan_work(self.src, BS, workers=1, seed=SEED)
        before = helpers.shm_names()
        kept, killed = [], None
        with Env(SLUICE_SHM="off"):
            for s in self.dataset():
                kept.append(s)
                if killed is None and len(kept) >= 40 and mem_mapped():
                    killed = helpers.agent_pid(self.agent_dir)
                    os.kill(killed, signal.SIGKILL)
                    deadline = time.monotonic() + 20
                    while helpers.agent_pid(self.agent_dir) == killed and time.monotonic() < deadline:
                        time.sleep(0.02)
                    left = [n for n in helpers.shm_names() - before if "sluice" in n or str(killed) in n]
                    self.assertEqual(left, [], "left in /dev/shm by the killed agent")
        self.assertIsNotNone(killed, "no memory file of mapped copies was mapped before the kill")
        self.assertEqual([int(s["id"]) for s in kept], helpers.worker_ids(shape, work, 0, 0))
        for s in kept:
            check_value(self, s)


if __name__ == "__main__":
    unittest.main()
