"""No hangs: SIGKILL of the agent while DataLoader workers read under a
cache limit, a small cache limit with several workers, the client's stall
deadline, and DataLoader workers that outlive their main process."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

import helpers
import agent_kill_trials

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

TRIAL = os.path.join(helpers.HERE, "agent_kill_trials.py")


def run_trial(cfg, env, timeout):
    """Runs agent_kill_trials' trial_main in a child with a deadline; the
    ids it read, or a failure naming why."""
    try:
        p = subprocess.run([sys.executable, TRIAL, "--trial", json.dumps(cfg)], env=env, cwd=helpers.HERE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("hung: no result within %ds" % timeout) from None
    if p.returncode != 0:
        raise AssertionError("exit %d: %s" % (p.returncode, p.stderr.decode()[-1500:]))
    return json.loads(p.stdout.decode().strip().splitlines()[-1])["ids"]


@unittest.skipIf(torch is None, "torch missing")
class AgentKillTest(helpers.AgentCase):
    def test_kill_agent_under_cache_limit_three_workers(self):
        # 3 trials here; agent_kill_trials.py runs 20 or more.
        failures, results = agent_kill_trials.run_trials(3, workers=3, cache_limit="200kb", timeout=90, seed=7,
                                                         log=lambda s: None)
        self.assertEqual(failures, 0, results)


@unittest.skipIf(torch is None, "torch missing")
class SmallCacheTest(helpers.AgentCase):
    def test_two_workers_one_megabyte_limit(self):
        # ~51 KB shards, cache_limit 1mb, 2 workers: the epoch completes
        # (the agent's read-ahead used to lease ~20 shards per worker).
        remote = os.path.join(self.tmp, "remote51")
        agent_kill_trials.write_dataset(remote, n=600, pad=1000, size_limit=51 << 10)
        cfg = {"remote": remote, "local": os.path.join(self.tmp, "c51"), "batch_size": 8, "seed": 3,
               "cache_limit": "1mb", "workers": 2, "agent_dir": self.agent_dir, "stall_timeout": 30}
        ids = run_trial(cfg, dict(os.environ), timeout=90)
        self.assertEqual(sorted(ids), list(range(600)))


@unittest.skipIf(torch is None, "torch missing")
class TooSmallTest(helpers.AgentCase):
    def test_limit_below_what_workers_hold_is_a_value_error(self):
        # 3 workers may hold 3 shards each, plus one being fetched: 160kb
        # (~9 shards of ~16 KB besides the index) used to be accepted and
        # then stall; now the check states the true minimum.
        import sluice
        from torch.utils.data import DataLoader

        remote = os.path.join(self.tmp, "remote-small")
        agent_kill_trials.write_dataset(remote)
        ds = sluice.StreamingDataset(remote=remote, local=os.path.join(self.tmp, "c-small"), batch_size=4,
                                     cache_limit="160kb")
        with self.assertRaises(ValueError) as cm:
            for _ in DataLoader(ds, batch_size=4, num_workers=3):
                pass
        self.assertIn("3 workers", str(cm.exception))
        self.assertIn("cache limit", str(cm.exception).lower())


@unittest.skipIf(torch is None, "torch missing")
class OrphanTest(helpers.AgentCase):
    def test_workers_exit_when_main_dies(self):
        self._orphan("remote-orphan", init_sleep=0)

    def test_workers_exit_when_main_dies_during_worker_init(self):
        # The main process dies while the workers are still in their
        # worker_init_fn, before the dataset's __iter__ runs: os.getppid()
        # read then is already the reaper's pid (a clean-clone CI run hit
        # this race, and torch's own watchdog has it too).
        self._orphan("remote-orphan-init", init_sleep=1.5)

    def _orphan(self, name, init_sleep):
        remote = os.path.join(self.tmp, name)
        agent_kill_trials.write_dataset(remote, n=400)
        code = (
            "import os, sys, time, helpers, sluice\n"
            "def init(_):\n"
            # One write of under PIPE_BUF bytes: the two workers share
            # this pipe, and print() may write the number and its newline
            # separately (unbuffered stdout), interleaving the two pids.
            "    os.write(1, b'%%d\\n' %% os.getpid())\n"
            "    time.sleep(%r)\n"
            "ds = sluice.StreamingDataset(remote=%r, local=%r, batch_size=4, cache_limit='160kb')\n"
            "loader = sluice.StreamingDataLoader(ds, batch_size=4, num_workers=2, worker_init_fn=init)\n"
            "it = iter(loader); next(it)\n"
            "time.sleep(3600)\n" % (init_sleep, remote, os.path.join(self.tmp, "c-" + name)))
        errpath = os.path.join(self.tmp, name + ".stderr")
        with open(errpath, "wb") as err:
            p = subprocess.Popen([sys.executable, "-c", code], cwd=helpers.HERE, stdout=subprocess.PIPE, stderr=err)
        try:
            pids = _read_pids(p, 2, deadline=time.monotonic() + 120)
        finally:
            p.kill()
            p.wait(timeout=30)
        if len(pids) < 2:
            for q in pids:
                _kill(q)
            with open(errpath, "rb") as f:
                self.fail("the workers did not both start within 120s (pids %s); the main process said: %s"
                          % (pids, f.read().decode(errors="replace")[-2000:]))
        end = time.monotonic() + 30
        alive = pids
        while alive and time.monotonic() < end:
            alive = [q for q in pids if _alive(q)]
            time.sleep(0.1)
        for q in alive:  # do not leave them behind for the next test
            _kill(q)
        self.assertEqual(alive, [], "DataLoader workers outlived their main process")


def _read_pids(p, n, deadline):
    """Up to n pids the child prints on its stdout, read with a deadline
    (orphaned workers hold the pipe open, so EOF may never come)."""
    import select

    pids, buf = [], b""
    fd = p.stdout.fileno()
    while len(pids) < n and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        pids += [int(x) for x in lines if x.strip().isdigit()]
    return pids[:n]


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    unittest.main()
