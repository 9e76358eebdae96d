"""Ranks as separate processes with torchrun-style environment variables,
DataLoader workers, resumption on another world, several jobs on one agent,
and killed workers, ranks and agents."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

import helpers

try:
    import torch  # noqa: F401
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover
    torch = None

import sluice
from test_dataset import stats, wait_idle

N = 240
B = 4
RANK_MAIN = os.path.join(helpers.HERE, "rank_main.py")


def flat(batches):
    return [x for b in batches for x in b]


@unittest.skipIf(torch is None, "torch missing")
class DistributedTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.shm_before = helpers.shm_names()
        cls.remote = os.path.join(cls.tmp, "remote")
        cls.local = os.path.join(cls.tmp, "cache")
        helpers.write_ids(cls.remote, N, size_limit=1 << 10)
        cls.port = 29500

    def start_ranks(self, ranks, lws, cfg, job, **popen):
        DistributedTest.port += 1
        procs = []
        for r in range(ranks):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_WORLD_SIZE=str(lws),
                       LOCAL_RANK=str(r % lws), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port))
            out = os.path.join(self.tmp, "%s-rank%d.json" % (job, r))
            c = dict({"remote": self.remote, "local": self.local, "batch_size": B, "epochs": 1},
                     **cfg, job=job, out=out)
            p = subprocess.Popen([sys.executable, RANK_MAIN, json.dumps(c)], env=env, cwd=helpers.HERE, **popen)
            procs.append((p, out))
        return procs

    def finish(self, procs, timeout=240):
        results = []
        for p, out in procs:
            self.assertEqual(p.wait(timeout=timeout), 0, "rank process failed")
            with open(out) as f:
                results.append(json.load(f))
        return results

    def test_grid_ranks_workers_epochs(self):
        # 1, 2 and 4 ranks (4 = 2 nodes of 2), each running DataLoaders with
        # 0, 2 and 4 workers for two epochs: every epoch yields each sample
        # once, each rank exactly the batches of `sluice plan`.
        shapes = [(1, 1), (2, 2), (4, 2)]
        running = [(ranks, lws, self.start_ranks(ranks, lws, {"workers": [0, 2, 4], "epochs": 2}, "grid%d" % ranks))
                   for ranks, lws in shapes]
        for ranks, lws, procs in running:
            results = self.finish(procs)
            for w in (0, 2, 4):
                for epoch in range(2):
                    shape, work = helpers.plan_work(self.remote, B, nodes=ranks // lws, ranks_per_node=lws,
                                                    workers=max(w, 1), epoch=epoch)
                    seen = []
                    for r in range(ranks):
                        got = results[r][str(w)]["epochs"][epoch]
                        want = helpers.rank_batches(shape, work, r, B)
                        self.assertEqual(got, want, "ranks=%d workers=%d epoch=%d rank=%d" % (ranks, w, epoch, r))
                        seen += flat(got)
                        self.assertEqual(results[r][str(w)]["len"], N // ranks)
                    self.assertEqual(sorted(seen), list(range(N)), "ranks=%d workers=%d epoch=%d" % (ranks, w, epoch))

    def test_resume_on_other_world(self):
        # Two ranks with two workers stop after 5 batches and checkpoint;
        # four ranks on two nodes with one worker each finish the epoch.
        first = self.finish(self.start_ranks(2, 2, {"workers": [2], "stop_after": 5}, "resume-a"))
        state = first[0]["2"]["state"]
        self.assertEqual(state, first[1]["2"]["state"])
        self.assertEqual(state["epoch"], 0)
        self.assertEqual(state["sample_in_epoch"], 5 * B * 2)
        self.assertEqual(set(state), {"epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"})
        second = self.finish(self.start_ranks(4, 2, {"workers": [1], "resume": state}, "resume-b"))
        shape, work = helpers.plan_work(self.remote, B, nodes=2, ranks_per_node=2, workers=1, epoch=0,
                                        sample_in_epoch=state["sample_in_epoch"],
                                        initial_physical_nodes=state["initial_physical_nodes"],
                                        ncn=state["num_canonical_nodes"])
        seen = flat(first[0]["2"]["epochs"][0]) + flat(first[1]["2"]["epochs"][0])
        for r in range(4):
            got = second[r]["1"]["epochs"][0]
            self.assertEqual(got, helpers.rank_batches(shape, work, r, B), "rank %d" % r)
            seen += flat(got)
        self.assertEqual(sorted(seen), list(range(N)))

    def test_two_jobs_share_agent_and_cache(self):
        # Two jobs at once on a fresh cache directory: one agent serves
        # both, and each shard is downloaded once.
        pid = helpers.agent_pid(self.agent_dir)
        local = os.path.join(self.tmp, "shared-cache")
        before = stats(start=True)["downloads"]
        a = self.start_ranks(1, 1, {"workers": [2], "local": local}, "job-a")
        b = self.start_ranks(1, 1, {"workers": [2], "local": local}, "job-b")
        ra, rb = self.finish(a), self.finish(b)
        shards = len([f for f in os.listdir(self.remote) if f.endswith(".mds")])
        self.assertEqual(stats()["downloads"] - before, shards)
        shape, work = helpers.plan_work(self.remote, B, workers=2)
        want = helpers.rank_batches(shape, work, 0, B)
        self.assertEqual(ra[0]["2"]["epochs"][0], want)
        self.assertEqual(rb[0]["2"]["epochs"][0], want)
        if pid is not None:
            self.assertEqual(helpers.agent_pid(self.agent_dir), pid)
        s = stats()
        self.assertEqual(s["pid"], helpers.agent_pid(self.agent_dir))

    def test_killed_worker_is_a_clear_error(self):
        # Run in a child process: torch's SIGCHLD handler raises wherever the
        # main thread happens to be, which must not be inside this runner.
        code = r"""
import os, signal, sys, time, json
import helpers, sluice
from torch.utils.data import DataLoader
ds = sluice.StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=4, shuffle=True)
loader = DataLoader(ds, batch_size=4, num_workers=2)
it = iter(loader)
for _ in range(3):
    next(it)
os.kill(it._workers[0].pid, signal.SIGKILL)
t0 = time.monotonic()
try:
    for _ in it:
        pass
    print(json.dumps({"error": None}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e), "after_s": time.monotonic() - t0}), flush=True)
    os._exit(0)
"""
        p = subprocess.run([sys.executable, "-c", code, self.remote, self.local], cwd=helpers.HERE,
                           stdout=subprocess.PIPE, timeout=120)
        res = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertIsNotNone(res["error"], "a killed worker went unnoticed")
        self.assertLess(res["after_s"], 30)
        s = wait_idle(deadline_s=20)
        self.assertEqual(s["jobs"], 0, s)
        # The next run is normal.
        ds = sluice.StreamingDataset(remote=self.remote, local=self.local, batch_size=B, shuffle=True)
        loader = DataLoader(ds, batch_size=B, num_workers=2)
        self.assertEqual(sorted(int(x) for b in loader for x in b["id"]), list(range(N)))

    def test_killed_rank_releases_everything(self):
        procs = self.start_ranks(1, 1, {"workers": [2], "pause_after": 3}, "killed",
                                 stdout=subprocess.PIPE, start_new_session=True)
        p, _ = procs[0]
        self.assertEqual(helpers.readline(p.stdout).strip(), b"PAUSED")
        self.assertGreater(stats()["leases"], 0)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        p.stdout.close()
        s = wait_idle(deadline_s=20)
        self.assertEqual(s["jobs"], 0, s)
        # Restarting the job gives a complete, plan-ordered epoch 0.
        r = self.finish(self.start_ranks(1, 1, {"workers": [2]}, "killed"))
        shape, work = helpers.plan_work(self.remote, B, workers=2)
        self.assertEqual(r[0]["2"]["epochs"][0], helpers.rank_batches(shape, work, 0, B))

    @classmethod
    def tearDownClass(cls):
        cls.check_leftovers()
        super().tearDownClass()

    @classmethod
    def check_leftovers(cls):
        # Nothing in /dev/shm, and the cache holds the index, complete
        # shards and the cache's own bookkeeping directory only.
        # Other programs on the machine may use /dev/shm meanwhile, and a
        # DataLoader worker killed by SIGKILL can leave torch's own
        # torch_<pid>_* segment behind; neither is Sluice's. Sluice must
        # leave nothing: no sluice names, no MosaicML-style prefixed ones.
        new = helpers.shm_names() - cls.shm_before
        leaked = {n for n in new if "sluice" in n or re.match(r"\d{6}_", n)}
        assert not leaked, "new files in /dev/shm: %s" % leaked
        with open(os.path.join(cls.remote, "index.json")) as f:
            sizes = {s["raw_data"]["basename"]: s["raw_data"]["bytes"] for s in json.load(f)["shards"]}
        for local in (cls.local, os.path.join(cls.tmp, "shared-cache")):
            if not os.path.isdir(local):
                continue
            for name in os.listdir(local):
                if name in (".sluice", "index.json"):
                    continue
                assert name in sizes, "unexpected file in the cache: %s" % name
                got = os.path.getsize(os.path.join(local, name))
                assert got == sizes[name], "incomplete shard %s: %d of %d bytes" % (name, got, sizes[name])
            for root, _, files in os.walk(local):
                for f in files:
                    assert not f.endswith((".part", ".tmp")), "temp file left: %s" % os.path.join(root, f)


if __name__ == "__main__":
    unittest.main()
