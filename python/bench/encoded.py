"""Encoded bytes for GPU decoders: copied vs zero-copy, measured in one run.

    /usr/bin/python3 python/bench/encoded.py [--rounds 3] [--small 20000] [--large 8000]

A variable-size bytes column of ~25 KB and of ~100 KB values (an ImageNet
JPEG, a large one) reaches the training loop as what a GPU decoder takes,
a list of 1-D torch.uint8 tensors per batch, through a StreamingDataLoader
with 2 workers as threads (the threaded feed), batch sizes 32 and 256:

- bytes, mapped shards: the column as bytes objects (what SLUICE_SHM=auto
  takes for a bytes column), each turned into a tensor by the loop with
  torch.frombuffer (no further copy), as docs/images.md said to do before;
- bytes, shared-memory feed (SLUICE_SHM=on): the same, each value copied
  out of the batch's shared memory into a bytes object;
- encoded_tensors, mapped shards (SLUICE_SHM=off): the option's copying
  path (worker processes, num_workers=0 and ds[i] copy alike);
- encoded_tensors, shared-memory feed (SLUICE_SHM=auto takes it): views of
  the batch's shared memory, no copy in Python.

Samples/s (wall), CPU microseconds per sample of every process (this one
and the agent) and of the training process alone (where the loop and the
GIL are; the agent's copy is in its own process), each row's epochs
alternated with the others' over the rounds (the machine is shared: the
median and the range are printed).
Every epoch is guarded: the samples counted, the sum of their ids and the
bytes of the column's values must be the epoch's, or the script stops.
"""

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _build  # noqa: E402 (python/bench, the script's directory)
import helpers  # noqa: E402
import mdswrite  # noqa: E402
import sluice  # noqa: E402

ROWS = (("bytes, mapped shards", False, "off"),
        ("bytes, shared-memory feed", False, "on"),
        ("encoded_tensors, mapped shards (copy)", True, "off"),
        ("encoded_tensors, shared-memory feed (zero copy)", True, "auto"))

GUARD = "guard: samples / id sum / MB"


def cpu_now():
    return helpers.cpu_with_agent(os.environ["SLUICE_AGENT_DIR"])


def cpu_self():
    s = resource.getrusage(resource.RUSAGE_SELF)
    return s.ru_utime + s.ru_stime


def sizes(n, base):
    """n value sizes around base (within ±10%), deterministic."""
    span = max(base // 5, 1)
    return [base - span // 2 + (i * 7919) % span for i in range(n)]


def write(directory, n, base):
    pool = os.urandom(2 * base)
    sz = sizes(n, base)
    mdswrite.write(directory, {"id": "int", "data": "bytes"},
                   ({"id": i, "data": i.to_bytes(8, "little") + pool[: sz[i] - 8]} for i in range(n)),
                   size_limit=1 << 26)
    return sum(sz)


def epoch(directory, bs, encoded, shm, n, total):
    """One epoch through the threaded feed with 2 workers: (samples/s, CPU
    seconds per sample of all processes and of this one, guard). The loop makes each batch's column a list
    of uint8 tensors (torch.frombuffer on bytes values)."""
    import torch

    old = {k: os.environ.get(k) for k in ("SLUICE_FEED", "SLUICE_SHM")}
    os.environ.update(SLUICE_FEED="threads", SLUICE_SHM=shm)
    try:
        ds = sluice.StreamingDataset(local=directory, batch_size=bs, shuffle=True,
                                     encoded_tensors="data" if encoded else None)
        loader = sluice.StreamingDataLoader(ds, batch_size=bs, num_workers=2)
        got = ids = nbytes = 0
        t0, c0, s0 = time.perf_counter(), cpu_now(), cpu_self()
        for b in loader:
            vals = b["data"]
            if not encoded:
                # frombuffer views the bytes object (read-only: it warns).
                vals = [torch.frombuffer(v, dtype=torch.uint8) for v in vals]
            got += len(vals)
            ids += int(b["id"].sum())
            nbytes += sum(t.numel() for t in vals)
        wall, cpu, own = time.perf_counter() - t0, cpu_now() - c0, cpu_self() - s0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if got != n or ids != n * (n - 1) // 2 or nbytes != total:
        raise SystemExit("guard failed: %d samples (want %d), id sum %d (want %d), %d bytes (want %d)"
                         % (got, n, ids, n * (n - 1) // 2, nbytes, total))
    return got / wall, cpu / got, own / got, "%d / %d / %.1f" % (got, ids, nbytes / 1e6)


def table(work, rounds, shapes, batches):
    print("  %-8s %-5s %-48s %21s %21s %21s  %s" % ("values", "batch", "path", "samples/s med (range)",
                                                      "CPU us/sample, all", "training process", GUARD))
    for label, n, base in shapes:
        d = os.path.join(work, "enc-%d" % base)
        total = write(d, n, base)
        for bs in batches:
            epoch(d, bs, True, "auto", n, total)  # warm the page cache and the agent
            runs = {r[0]: [] for r in ROWS}
            for _ in range(rounds):
                for name, encoded, shm in ROWS:
                    runs[name].append(epoch(d, bs, encoded, shm, n, total))
            for name, _, _ in ROWS:
                cols = [[r[j] * (1 if j == 0 else 1e6) for r in runs[name]] for j in (0, 1, 2)]
                figs = " ".join("%7.*f (%5.*f-%5.*f)" % (p, statistics.median(c), p, min(c), p, max(c))
                                for p, c in zip((0, 1, 1), cols))
                print("  %-8s %-5d %-48s %s  %s" % (label, bs, name, figs, runs[name][-1][3]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="epochs per row, alternated with the other rows")
    ap.add_argument("--small", type=int, default=20000, help="samples of ~25 KB (0: skip)")
    ap.add_argument("--large", type=int, default=8000, help="samples of ~100 KB (0: skip)")
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 32 and 256)")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="sluice-encbench-")
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("SLUICE_AGENT_DIR", os.path.join(work, "agent"))
    _build.sluice_binary(work)  # $SLUICE_BIN, else built from this checkout
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    shapes = [s for s in (("~25 KB", args.small, 25 << 10), ("~100 KB", args.large, 100 << 10)) if s[1] > 0]
    print("Encoded bytes to the loop as lists of uint8 tensors (StreamingDataLoader, 2 workers as threads); "
          "load average %.2f, %d CPUs" % (os.getloadavg()[0], os.cpu_count()))
    try:
        table(work, args.rounds, shapes, args.batch or [32, 256])
    finally:
        helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        print("load average %.2f at the end" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
