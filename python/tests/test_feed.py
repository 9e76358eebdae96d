"""The in-process feed (sluice._feed): the batches of torch's DataLoader
with 0, 2 and 4 worker processes, sample for sample, from threads of the
training process; exactly once per epoch; resume from a state dict; no
shared-memory residue after SIGKILL of the training process or the agent."""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import helpers

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

import sluice
from sluice import _feed


def ids_of(batch):
    return [int(x) for x in batch["id"]]


def loader_batches(ds, bs, workers, feed, stop=None, drop_last=False):
    """Iterates a StreamingDataLoader, through the feed or through torch's
    worker processes; with stop, checkpoints after that many batches.
    Returns (batches of ids, state)."""
    old = os.environ.get("SLUICE_FEED")
    os.environ["SLUICE_FEED"] = "threads" if feed else "workers"
    try:
        loader = sluice.StreamingDataLoader(ds, batch_size=bs, num_workers=workers, drop_last=drop_last)
        out, state = [], None
        if feed:
            it = _feed.batches(loader)
            n = 0
            for k, b in it:
                n += k
                out.append(ids_of(b))
                if stop is not None and len(out) == stop:
                    loader.num_samples_yielded = n
                    state = loader.state_dict()
                    it.close()
                    break
        else:
            for b in loader:
                out.append(ids_of(b))
                if stop is not None and len(out) == stop:
                    state = loader.state_dict()
                    break
        del loader
        gc.collect()
        return out, state
    finally:
        if old is None:
            os.environ.pop("SLUICE_FEED", None)
        else:
            os.environ["SLUICE_FEED"] = old


@unittest.skipIf(torch is None, "torch missing")
class FeedTest(helpers.AgentCase):
    N = 3000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "data")
        helpers.write_ids(cls.data, cls.N)

    def dataset(self, name, **kw):
        kw.setdefault("shuffle", True)
        kw.setdefault("shuffle_seed", 17)
        kw.setdefault("batch_size", 32)
        return sluice.StreamingDataset(local=self.data, **kw)

    def test_order_matches_workers(self):
        """Exactly the batches torch's workers yield, and each sample once."""
        for workers in (0, 2, 4):
            with self.subTest(workers=workers):
                want, _ = loader_batches(self.dataset("w"), 32, workers, feed=False)
                got, _ = loader_batches(self.dataset("f"), 32, workers, feed=True)
                self.assertEqual(got, want)
                flat = [i for b in got for i in b]
                self.assertEqual(sorted(flat), list(range(self.N)))
                # and the plan's order (sluice plan), batch for batch
                shape, work = helpers.plan_work(self.data, 32, workers=max(workers, 1), seed=17)
                self.assertEqual(got, helpers.rank_batches(shape, work, 0, 32))

    def test_loader_picks_the_feed(self):
        """StreamingDataLoader(num_workers=2) with the default collate runs
        on the feed by itself (no worker processes), yields torch's order
        and checkpoints where it stopped."""
        want, _ = loader_batches(self.dataset("w"), 32, 2, feed=False)
        os.environ.pop("SLUICE_FEED", None)
        loader = sluice.StreamingDataLoader(self.dataset("p"), batch_size=32, num_workers=2)
        got = []
        for b in loader:
            got.append(ids_of(b))
            if len(got) == 10:
                state = loader.state_dict()
        self.assertIsNone(loader._iterator)  # torch's multiprocessing iterator never started
        self.assertEqual(got, want)
        self.assertEqual(state["sample_in_epoch"], 320)
        ds = self.dataset("q")
        ds.load_state_dict(state)
        rest = [i for b in sluice.StreamingDataLoader(ds, batch_size=32, num_workers=2) for i in ids_of(b)]
        self.assertEqual(sorted(rest + [i for b in got[:10] for i in b]), list(range(self.N)))

    def test_drop_last(self):
        want, _ = loader_batches(self.dataset("w", batch_size=50), 50, 2, feed=False, drop_last=True)
        got, _ = loader_batches(self.dataset("f", batch_size=50), 50, 2, feed=True, drop_last=True)
        self.assertEqual(got, want)

    def test_resume(self):
        """A checkpoint taken on the feed resumes on the feed (and on torch's
        workers) with exactly the samples not yet seen."""
        full, _ = loader_batches(self.dataset("a"), 32, 2, feed=True)
        first, state = loader_batches(self.dataset("b"), 32, 2, feed=True, stop=20)
        self.assertEqual(first, full[:20])
        seen = [i for b in first for i in b]
        for feed in (True, False):
            ds = self.dataset("c")
            ds.load_state_dict(state)
            rest, _ = loader_batches(ds, 32, 2, feed=feed)
            flat = [i for b in rest for i in b]
            self.assertEqual(sorted(seen + flat), list(range(self.N)), "feed=%s" % feed)

    def test_peek_then_workers_is_exactly_once(self):
        """A sample peeked at in the training process (next(iter(ds)),
        MosaicML's first epoch) and then epochs of 2 and 4 workers on the
        same dataset: each epoch delivers every sample once, as MosaicML's
        shared next_epoch does. The agent counted each worker's epochs
        apart, so worker 0 ran one epoch ahead of worker 1: a quarter of
        each epoch came twice and another quarter never."""
        for feed in ("threads", "workers"):
            with self.subTest(feed=feed):
                os.environ["SLUICE_FEED"] = feed
                try:
                    ds = self.dataset("peek-" + feed)
                    it = iter(ds)
                    next(it)
                    it.close()
                    for workers in (2, 2, 4):
                        loader = sluice.StreamingDataLoader(ds, batch_size=32, num_workers=workers)
                        flat = [i for b in loader for i in ids_of(b)]
                        self.assertEqual(sorted(flat), list(range(self.N)), "%d workers" % workers)
                        del loader
                finally:
                    os.environ.pop("SLUICE_FEED", None)

    def test_worker_error_stops_the_workers(self):
        """An exception in a DataLoader worker process reaches the loop and
        the workers are gone when it does: they lived on in a reference
        cycle until the garbage collector ran (possibly inside a later
        loader's forked worker, which then printed torch's "can only test
        a child process" assertion)."""
        import multiprocessing

        def bad(samples):
            raise RuntimeError("collate failed")

        os.environ["SLUICE_FEED"] = "workers"
        gc.collect()
        gc.disable()
        try:
            loader = sluice.StreamingDataLoader(self.dataset("x"), batch_size=32, num_workers=2, collate_fn=bad)
            # A plain except, as a training loop has (assertRaises clears
            # the traceback's frames, which breaks the cycle by itself).
            caught = None
            try:
                for _ in loader:
                    pass
            except RuntimeError as e:
                caught = str(e)
            self.assertIn("collate failed", caught or "")
            self.assertEqual(multiprocessing.active_children(), [])
        finally:
            gc.enable()
            os.environ.pop("SLUICE_FEED", None)

    def test_spawned_workers(self):
        """DataLoader workers started by spawn or forkserver (common with
        CUDA) get the dataset pickled: the same batches as forked workers.
        Its record decoders are closures, which failed to pickle ("Can't
        pickle local object 'mds_decoder.<locals>.decode'")."""
        want, _ = loader_batches(self.dataset("fork"), 32, 2, feed=False)
        os.environ["SLUICE_FEED"] = "auto"
        try:
            loader = sluice.StreamingDataLoader(self.dataset("spawn"), batch_size=32, num_workers=2,
                                                multiprocessing_context="spawn")
            got = [ids_of(b) for b in loader]
        finally:
            os.environ.pop("SLUICE_FEED", None)
        self.assertEqual(got, want)

    def test_relative_agent_dir(self):
        """SLUICE_AGENT_DIR relative to the working directory (sluice bench
        --out DIR passes DIR/agent): the agent the client starts serves it.
        The detached agent ran in / and put its socket in /DIR, so the
        client waited 30 s for a socket that never came and failed."""
        cwd = os.path.join(self.tmp, "cwd")
        os.makedirs(cwd, exist_ok=True)
        env = dict(os.environ, SLUICE_AGENT_DIR="rel-agent")
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, sys.argv[2])
            import sluice
            ds = sluice.StreamingDataset(local=sys.argv[1], batch_size=32)
            print(sum(1 for _ in ds))
        """)
        try:
            r = subprocess.run([sys.executable, "-c", code, self.data, os.path.dirname(sluice.__path__[0])], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertEqual(r.stdout.strip(), str(self.N))
            self.assertTrue(os.path.exists(os.path.join(cwd, "rel-agent", "agent.sock")))
        finally:
            helpers.stop_agent(os.path.join(cwd, "rel-agent"))

    def test_error_reaches_the_loop(self):
        def bad(samples):
            raise RuntimeError("collate failed")

        os.environ["SLUICE_FEED"] = "threads"
        try:
            loader = sluice.StreamingDataLoader(self.dataset("e"), batch_size=32, num_workers=2, collate_fn=bad)
            with self.assertRaisesRegex(RuntimeError, "collate failed"):
                for _ in _feed.batches(loader):
                    pass
        finally:
            os.environ.pop("SLUICE_FEED", None)

    def test_eligible(self):
        loader = sluice.StreamingDataLoader(self.dataset("g"), batch_size=32, num_workers=2)
        os.environ["SLUICE_FEED"] = "auto"
        try:
            self.assertTrue(_feed.eligible(loader, sluice.StreamingDataset))
            custom = sluice.StreamingDataLoader(self.dataset("h"), batch_size=32, num_workers=2, collate_fn=lambda x: x)
            self.assertFalse(_feed.eligible(custom, sluice.StreamingDataset))
            init = sluice.StreamingDataLoader(self.dataset("i"), batch_size=32, num_workers=2,
                                              worker_init_fn=lambda w: None)
            self.assertFalse(_feed.eligible(init, sluice.StreamingDataset))

            class Sub(sluice.StreamingDataset):
                def __iter__(self):
                    return super().__iter__()

            sub = sluice.StreamingDataLoader(Sub(local=self.data, batch_size=32), batch_size=32, num_workers=2)
            self.assertFalse(_feed.eligible(sub, sluice.StreamingDataset))
            os.environ["SLUICE_FEED"] = "threads"
            self.assertTrue(_feed.eligible(custom, sluice.StreamingDataset))
            os.environ["SLUICE_FEED"] = "auto"
            sync = sluice.StreamingDataLoader(self.dataset("j"), batch_size=32, num_workers=0)
            self.assertFalse(_feed.eligible(sync, sluice.StreamingDataset))
            os.environ["SLUICE_FEED"] = "threads"
            self.assertTrue(_feed.eligible(sync, sluice.StreamingDataset))
            os.environ["SLUICE_FEED"] = "workers"
            self.assertFalse(_feed.eligible(loader, sluice.StreamingDataset))
        finally:
            os.environ.pop("SLUICE_FEED", None)

    def _kill_trial(self, kill_agent):
        """Runs a training process on the feed, SIGKILLs it (or the agent)
        mid-epoch, and returns the shared-memory names that appeared."""
        before = helpers.shm_names()
        script = textwrap.dedent("""
            import os, sys
            sys.path.insert(0, %r)
            import sluice
            from sluice import _feed
            os.environ["SLUICE_FEED"] = "threads"
            ds = sluice.StreamingDataset(local=%r, batch_size=8, shuffle=True)
            loader = sluice.StreamingDataLoader(ds, batch_size=8, num_workers=4, pin_memory=True)
            n = 0
            while True:
                for _ in _feed.batches(loader):
                    n += 1
                    if n == 5:
                        print("ready", flush=True)
        """) % (os.path.dirname(sluice.__path__[0]), self.data)
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = helpers.readline(p.stdout)
            self.assertEqual(line.strip(), b"ready", p.stderr.read(2000) if not line else line)
            if kill_agent:
                pid = helpers.agent_pid(self.agent_dir)
                self.assertIsNotNone(pid)
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.5)
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()
        return helpers.shm_names() - before

    def test_no_shm_residue_after_sigkill(self):
        self.assertEqual(self._kill_trial(kill_agent=False), set())
        self.assertEqual(self._kill_trial(kill_agent=True), set())


if __name__ == "__main__":
    unittest.main()
