"""Kills the agent with SIGKILL while DataLoader workers read under a cache
limit, N times, and checks that every epoch completes with every sample
exactly once.

    /usr/bin/python3 python/tests/agent_kill_trials.py --trials 20

Each trial runs in its own process with a deadline, so a hang is reported
as a failed trial instead of hanging the script. Prints one JSON line per
trial and a summary; exits 1 if any trial failed. The CI test
(test_nohang.AgentKillTest) runs a few trials; run this for N >= 20.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import helpers  # noqa: E402  (sets sys.path for sluice)


def write_dataset(directory, n=400, pad=900, size_limit=16 << 10):
    """n samples of ~pad bytes in shards of ~size_limit bytes."""
    cols = {"id": "int", "pad": "str"}
    samples = ({"id": i, "pad": "p" * (pad + i % 7)} for i in range(n))
    return helpers.mdswrite.write(directory, cols, samples, size_limit=size_limit)


def trial_main(cfg):
    """One trial, in its own process: reads an epoch with workers, kills
    the agent after kill_after batches, prints the ids it got as JSON."""
    import warnings

    import sluice

    warnings.filterwarnings("ignore", message="This DataLoader will create")
    ds = sluice.StreamingDataset(remote=cfg["remote"], local=cfg["local"], batch_size=cfg["batch_size"],
                                 shuffle=True, shuffle_seed=cfg["seed"], cache_limit=cfg["cache_limit"],
                                 stall_timeout=cfg["stall_timeout"], fetch_size=8)
    loader = sluice.StreamingDataLoader(ds, batch_size=cfg["batch_size"], num_workers=cfg["workers"])
    got = []
    for i, b in enumerate(loader):
        got.extend(int(x) for x in b["id"])
        if i + 1 == cfg.get("kill_after"):
            pid = helpers.agent_pid(cfg["agent_dir"])
            if pid:
                os.kill(pid, signal.SIGKILL)
    print(json.dumps({"ids": got}), flush=True)


def run_trials(trials, workers=3, cache_limit="200kb", timeout=120, seed=0, log=print):
    """Runs the trials; returns (failures, results)."""
    tmp = tempfile.mkdtemp(prefix="sluice-killtrials-")
    try:
        remote = os.path.join(tmp, "remote")
        write_dataset(remote)
        n = 400
        agent_dir = os.path.join(tmp, "agent")
        env = dict(os.environ, SLUICE_AGENT_DIR=agent_dir, SLUICE_AGENT_IDLE_TIMEOUT="20s")
        rng = random.Random(seed)
        failures, results = 0, []
        for t in range(trials):
            cfg = {"remote": remote, "local": os.path.join(tmp, "cache-%d" % t), "batch_size": 4,
                   "seed": 1000 + t, "cache_limit": cache_limit, "workers": workers,
                   "kill_after": rng.randint(1, 60), "agent_dir": agent_dir,
                   "stall_timeout": max(timeout / 2, 10)}
            t0 = time.monotonic()
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--trial", json.dumps(cfg)],
                                   env=env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=timeout)
                if p.returncode != 0:
                    res = {"ok": False, "why": "exit %d: %s" % (p.returncode, p.stderr.decode()[-600:])}
                else:
                    ids = json.loads(p.stdout.decode().strip().splitlines()[-1])["ids"]
                    ok = sorted(ids) == list(range(n))
                    res = {"ok": ok, "samples": len(ids), "distinct": len(set(ids))}
                    if not ok:
                        res["why"] = "not every sample exactly once"
            except subprocess.TimeoutExpired:
                res = {"ok": False, "why": "hung: no result within %ds" % timeout}
            res.update(trial=t, kill_after=cfg["kill_after"], seconds=round(time.monotonic() - t0, 1))
            failures += not res["ok"]
            results.append(res)
            log(json.dumps(res))
        helpers.stop_agent(agent_dir, signal.SIGKILL)
        return failures, results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--cache-limit", default="200kb")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per trial before it counts as hung")
    ap.add_argument("--trial", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.trial:
        trial_main(json.loads(a.trial))
        return
    helpers.binary()
    failures, _ = run_trials(a.trials, a.workers, a.cache_limit, a.timeout)
    print(json.dumps({"trials": a.trials, "failed": failures}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
