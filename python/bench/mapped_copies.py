"""100 KB samples under a cache_limit through the Python client's
mapped-shard path (SLUICE_SHM=off), with the agent's copies ahead in its
memory file of mapped copies (this checkout) against another checkout's
client (--old, e.g. a git worktree of an earlier commit: before the
client asked for mapped copies, they came inline in the replies),
alternated in one run, the same agent binary for both; with --old-agent,
the old client runs against an agent built from that checkout (its own
agent directory), to compare an agent's change too.

    /usr/bin/python3 python/bench/mapped_copies.py --old /tmp/old/python [--old-agent /tmp/old] [--n 4000] [--rounds 3]

Each figure is a warm epoch (the limit holds the data: no eviction, the
agent still reads ahead by copies) of a plain iteration of the dataset
(0 workers) and of StreamingDataLoader(batch_size=32, num_workers=2),
samples/s and CPU us a sample of this process, its workers and the agent,
and the agent's share (read from /proc in clock ticks: 10 ms, 2.5 us a
sample of 4,000).
Guarded: the samples counted and the sum of their ids must be the
epoch's."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _build  # noqa: E402 (python/bench, the script's directory)
import helpers  # noqa: E402
import mdswrite  # noqa: E402

# The measurement, run in a child process with the client under test first
# on sys.path: prints {"rate": samples/s, "cpu": seconds a sample (the
# agent's included), "agent": the agent's seconds a sample, "guard"}.
CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
import sluice
src, cache, limit, workers, n = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
assert os.path.dirname(sluice.__file__) == os.path.join(sys.argv[1], "sluice"), sluice.__file__

def agent_cpu():
    try:
        pid = int(open(os.path.join(os.environ["SLUICE_AGENT_DIR"], "agent.lock")).read().strip())
        f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0

def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime + agent_cpu()

def epoch():
    ds = sluice.StreamingDataset(remote=src, local=cache, batch_size=32, shuffle=True, cache_limit=limit)
    count = total = 0
    if workers == 0:
        for s in ds:
            count += 1
            total += int(s["id"])
    else:
        for b in sluice.StreamingDataLoader(ds, batch_size=32, num_workers=workers):
            count += len(b["id"])
            total += int(sum(int(i) for i in b["id"]))
    return count, total

epoch()  # warm: every shard local
c0, t0, a0 = cpu(), time.perf_counter(), agent_cpu()
count, total = epoch()
c1, t1, a1 = cpu(), time.perf_counter(), agent_cpu()
ok = count == n and total == n * (n - 1) // 2
print(json.dumps({"rate": count / (t1 - t0), "cpu": (c1 - c0) / count, "agent": (a1 - a0) / count,
                  "guard": "ok" if ok else "BAD %d %d" % (count, total)}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="the python/ directory of the client to compare against")
    ap.add_argument("--n", type=int, default=4000, help="samples of 100 KB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old-agent", default=None, help="a checkout whose ./cmd/sluice serves the old client")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="sluice-mapbench-")
    agent_dir = os.path.join(work, "agent")
    try:
        bins = {"new": _build.sluice_binary(work)}
        bins["old"] = bins["new"]
        if args.old_agent:
            bins["old"] = os.path.join(work, "bin-old", "sluice")
            subprocess.run(["go", "build", "-o", bins["old"], "./cmd/sluice"], cwd=args.old_agent, check=True)
        src = os.path.join(work, "src")
        mdswrite.write(src, {"id": "int", "payload": "bytes"},
                       ({"id": i, "payload": os.urandom(100_000)} for i in range(args.n)), size_limit=4 << 20)
        total = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src))
        limit = 2 * total
        env = dict(os.environ, SLUICE_SHM="off", SLUICE_AGENT_IDLE_TIMEOUT="60s")
        clients = (("old", os.path.abspath(args.old)), ("new", os.path.dirname(HERE)))
        print("100 KB x %d under cache_limit=%d (2x the data), warm, SLUICE_SHM=off; %s" % (args.n, limit, os.getloadavg()))
        print("  %-5s %-8s %-4s %12s %14s %12s  %s" % ("round", "client", "w", "samples/s", "CPU us/sample", "of it agent", "guard"))
        for r in range(args.rounds):
            for workers in (0, 2):
                for name, path in clients:
                    cache = os.path.join(work, "cache-%s" % name)
                    # One agent for each client when they have their own.
                    adir = agent_dir + ("-" + name if args.old_agent else "")
                    out = subprocess.run([sys.executable, "-c", CHILD, path, src, cache, str(limit), str(workers), str(args.n)],
                                         env=dict(env, SLUICE_AGENT_DIR=adir, SLUICE_BIN=bins[name]),
                                         check=True, stdout=subprocess.PIPE, text=True).stdout
                    got = json.loads(out.strip().splitlines()[-1])
                    print("  %-5d %-8s %-4d %12.0f %14.1f %12.1f  %s" % (r + 1, name, workers, got["rate"], got["cpu"] * 1e6,
                                                                      got["agent"] * 1e6, got["guard"]), flush=True)
        print("load after: %s" % (os.getloadavg(),))
    finally:
        for d in (agent_dir, agent_dir + "-old", agent_dir + "-new"):
            if os.path.isdir(d):
                helpers.stop_agent(d)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
