"""Samples/s through the Python client vs the Go API on the same data.

    /usr/bin/python3 python/bench/bench.py [--small 200000] [--large 4000]

Writes three MDS datasets (≈200-byte samples; 100 KB samples as a bytes
column, and as a fixed-shape uint8 ndarray column, which a DataLoader
collates into a shared-memory tensor) under
--work, warms the agent's cache, then measures one epoch each of:
the Go API (`sluice stream --json`, raw records and decoded samples),
the Python client in one process without a DataLoader (best of --repeat
epochs, as for the DataLoaders), and a torch
DataLoader with 0 and 2 workers (batch_size=64, persistent workers,
default prefetch_factor, no pin_memory). Prints a table with the machine's
load average and, with --json, the figures as JSON. Every figure is
guarded: the Go API's sample count, and the Python paths' samples counted
and the sum of their ids, must be the epoch's (printed beside the table),
or the script stops.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _build  # noqa: E402 (python/bench, the script's directory)
import helpers  # noqa: E402
import mdswrite  # noqa: E402
import sluice  # noqa: E402


def write_small(d, n):
    text = "x" * 180
    mdswrite.write(d, {"id": "int", "text": "str"}, ({"id": i, "text": text} for i in range(n)), size_limit=1 << 26)


def write_large(d, n):
    blob = os.urandom(100 * 1024)
    mdswrite.write(d, {"id": "int", "data": "bytes"}, ({"id": i, "data": blob} for i in range(n)), size_limit=1 << 26)


def write_large_nd(d, n):
    import numpy as np

    arr = np.frombuffer(os.urandom(100 * 1024), np.uint8)
    mdswrite.write(d, {"id": "int", "data": "ndarray:uint8:102400"}, ({"id": i, "data": arr} for i in range(n)),
                   size_limit=1 << 26)


def go_api(remote, local, decode):
    cmd = [helpers.binary(), "stream", remote, "--local", local, "--json", "--shuffle", "--batch-size", "64"]
    if decode:
        cmd.append("--decode")
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(out)
    except ValueError:
        return None, wall
    for k in ("samples_per_s", "samples_per_second"):
        if k in doc:
            return float(doc[k]), doc.get("samples")
    return None, doc.get("samples")


def guard(what, n, want_n, ids=None, want_ids=None):
    """Stops the script when a path did not deliver the epoch."""
    if n != want_n or ids != want_ids:
        raise SystemExit("guard failed: %s delivered %r samples (want %d), id sum %r (want %r)"
                         % (what, n, want_n, ids, want_ids))


def python_direct(ds, repeat=1):
    """(best samples/s, (samples, id sum) of every epoch)."""
    best, seen = 0.0, set()
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = s = 0
        for x in ds:
            n += 1
            s += int(x["id"])
        best = max(best, n / (time.perf_counter() - t0))
        seen.add((n, s))
    return best, seen


def python_loader(ds, workers, repeat=1):
    from torch.utils.data import DataLoader

    loader = DataLoader(ds, batch_size=64, num_workers=workers, persistent_workers=workers > 0)
    it = iter(loader)
    next(it)  # start-up (worker fork) is not throughput
    for _ in it:
        pass
    best, seen = 0.0, set()
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = s = 0
        for b in loader:
            n += len(b["id"])
            s += int(b["id"].sum())
        best = max(best, n / (time.perf_counter() - t0))
        seen.add((n, s))
    return best, seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=200000, help="samples of ~200 bytes")
    ap.add_argument("--large", type=int, default=4000, help="samples of 100 KB")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temp dir, removed)")
    ap.add_argument("--repeat", type=int, default=3, help="epochs per Python measurement; the best counts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()
    work = args.work or tempfile.mkdtemp(prefix="sluice-bench-")
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("SLUICE_AGENT_DIR", os.path.join(work, "agent"))
    _build.sluice_binary(work)  # $SLUICE_BIN, else built from this checkout
    rows = []
    try:
        sets = (("200B", args.small, write_small, 200), ("100KB", args.large, write_large, 100 * 1024),
                ("100KB-nd", args.large, write_large_nd, 100 * 1024))
        for name, n, writer, size in sets:
            if n <= 0:
                continue
            remote = os.path.join(work, name, "remote")
            local = os.path.join(work, name, "cache")
            if not os.path.exists(os.path.join(remote, "index.json")):
                writer(remote, n)
            ds = sluice.StreamingDataset(remote=remote, local=local, batch_size=64, shuffle=True)
            python_direct(ds)  # warm the cache
            res = {"dataset": name, "samples": n, "sample_bytes": size, "id_sum": n * (n - 1) // 2}
            for col, decode in (("go_raw", False), ("go_decoded", True)):
                res[col], got = go_api(remote, local, decode)
                guard(name + " " + col, got, n)
            for col, fn in (("python_1proc", lambda: python_direct(ds, args.repeat)),
                            ("loader_0", lambda: python_loader(ds, 0, args.repeat)),
                            ("loader_2", lambda: python_loader(ds, 2, args.repeat))):
                res[col], seen = fn()
                for got_n, got_ids in seen:
                    guard(name + " " + col, got_n, n, got_ids, res["id_sum"])
            rows.append(res)
    finally:
        helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    load = {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps({"load": load, "rows": rows}, indent=1))
        return
    print("load average %.2f before, %.2f after, %d CPUs" % (load["before"][0], load["after"][0], load["cpus"]))
    cols = ["go_raw", "go_decoded", "python_1proc", "loader_0", "loader_2"]
    print("%-7s %8s " % ("data", "samples") + " ".join("%14s" % c for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cells.append("%14s" % ("n/a" if v is None else "%.0f/s" % v))
        print("%-7s %8d " % (r["dataset"], r["samples"]) + " ".join(cells))
    for r in rows:
        for c in cols:
            if r[c] is not None:
                print("  %s %s: %.1f MB/s" % (r["dataset"], c, r[c] * r["sample_bytes"] / 1e6))
    for r in rows:
        print("guard %s: every path delivered %d samples (Python: id sum %d) in every epoch"
              % (r["dataset"], r["samples"], r["id_sum"]))


if __name__ == "__main__":
    main()
