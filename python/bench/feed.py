"""The feed targets of issue 17, measured in one run on this machine.

    /usr/bin/python3 python/bench/feed.py [--large 4000] [--images 1500] [--go]

1. 100 KB samples to the training loop: StreamingDataLoader(batch_size=32)
   through torch's worker processes (0 and 2 workers) and through the
   in-process feed (sluice._feed: the workers as threads), samples/s and CPU
   per sample of every process involved (this one, its workers, the agent).
2. JPEG pipeline: decode + RandomResizedCrop 224 + flip -> batched uint8
   CHW tensors, the transform in the collate function, through 2 worker
   processes and through the feed with 2 and with cores threads, against this
   machine's decode ceiling measured in the same run: single-process PIL
   decode + crop + flip images/s times the cores.
3. A 40k-shard index.json (15 MB): `sluice inspect --no-stat` wall time and
   peak RSS; with --go also the Go benchmarks of the parse, the first batch
   at 20 nodes x 8 ranks x 8 workers, the py1e resume at 90% of 10M samples,
   a node's 64 workers resuming together, and the Go image decoder
   (`go test -bench`, needs the source tree).

0. The three paths side by side (printed first; --paths-only stops there),
   then the same under a cache_limit smaller than the data (--limit-only
   runs just that) and torch worker processes with a custom collate_fn,
   their tensors through torch's shared memory or sluice._wslots' reused
   slots (--slots-only):
   torch's worker processes, the threaded feed over mapped shards, and the
   threaded feed over the agent's shared-memory batches (sluice._shm,
   SLUICE_SHM=on), for 100 KB bytes, ~200 B text + ints and a 48 KB
   fixed-shape float32 ndarray column. Measured 2026-12-01 on the shared
   2-core machine (load average ~11, so ±30%):

     data            path                  samples/s  CPU us/sample
     100 KB bytes    process loader w=2         5913          140.5
                     threaded feed w=2         13173           30.0
                     shared-memory feed w=2    14737           62.2
     ~200 B text     process loader w=2        34258           18.3
                     threaded feed w=2         62409            9.0
                     shared-memory feed w=2    69253            9.4
     48 KB ndarray   process loader w=2         5252          115.4
                     threaded feed w=2         18643           33.7
                     shared-memory feed w=2    36170           27.3

   Hence SLUICE_SHM=auto takes the shared-memory batches only for datasets
   with a fixed-shape ndarray column (collated with no copy in Python);
   bytes and strings must become Python objects anyway.

Every loader figure has a guard: the samples counted and the sum of their
ids must be the epoch's, so nothing wins by skipping. MosaicML Streaming,
LitData and WebDataset are not installable here (no PyPI); their columns
are left out rather than guessed.
"""

import argparse
import io
import math
import os
import random
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
from sluice import _feed  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def cpu_now():
    return helpers.cpu_with_agent(os.environ["SLUICE_AGENT_DIR"])


def epoch(loader, feed, n_expected, id_sum):
    """One epoch: (samples/s, CPU seconds per sample, guard), where the
    guard is the samples counted and the sum of their ids ("n / sum", as
    printed beside the figure); exits when either is not the epoch's."""
    t0, c0 = time.perf_counter(), cpu_now()
    n = s = 0
    it = _feed.batches(loader) if feed else ((None, b) for b in loader)
    for _, b in it:
        ids = b["id"] if isinstance(b, dict) else b[1]
        n += len(ids)
        s += int(ids.sum()) if hasattr(ids, "sum") else sum(ids)
    wall, cpu = time.perf_counter() - t0, cpu_now() - c0
    if n != n_expected or s != id_sum:
        raise SystemExit("guard failed: %d samples (want %d), id sum %d (want %d)" % (n, n_expected, s, id_sum))
    return n / wall, cpu / n, "%d / %d" % (n, s)


GUARD = "guard: samples / id sum"


def best_of(repeat, fn):
    runs = [fn() for _ in range(repeat)]
    return max(runs, key=lambda r: r[0])


def loader(ds, workers, collate=None):
    kw = dict(batch_size=32, num_workers=workers)
    if collate is not None:
        kw["collate_fn"] = collate
    return sluice.StreamingDataLoader(ds, **kw)


def with_mode(mode, fn, shm="off"):
    """Runs fn with SLUICE_FEED=mode and SLUICE_SHM=shm (the shared-memory
    feed is measured on its own rows)."""
    old = {k: os.environ.get(k) for k in ("SLUICE_FEED", "SLUICE_SHM")}
    os.environ["SLUICE_FEED"] = mode
    os.environ["SLUICE_SHM"] = shm
    try:
        return fn()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- the three paths side by side -------------------------------------------------

PATHS = (("process loader workers=2", "workers", "off", 2),
         ("threaded feed workers=2", "threads", "off", 2),
         ("shared-memory feed workers=2", "threads", "on", 2))


def paths_table(work, repeat, large, small, arrays):
    """Each data shape through the three paths: torch's worker processes,
    the threaded feed over mapped shards, the threaded feed over the agent's
    shared-memory batches. Guarded by count and id sum."""
    import numpy as np

    shapes = []
    if large:
        blob = os.urandom(100 * 1024)
        shapes.append(("100 KB bytes", large, {"id": "int", "data": "bytes"}, lambda i: {"id": i, "data": blob}))
    if small:
        text = "y" * 150
        shapes.append(("~200 B text+int", small, {"id": "int", "text": "str", "label": "int32"},
                       lambda i: {"id": i, "text": "%s %d" % (text, i), "label": np.int32(i % 1000)}))
    if arrays:
        arr = np.arange(3 * 64 * 64, dtype=np.float32).reshape(3, 64, 64)
        shapes.append(("48 KB ndarray float32 3x64x64", arrays, {"id": "int", "x": "ndarray:float32:3,64,64"},
                       lambda i: {"id": i, "x": arr}))
    print("\nThe three paths side by side (StreamingDataLoader batch_size=32, shuffle; CPU of every process incl. the agent)")
    print("  %-30s %-30s %12s %14s  %s" % ("data", "path", "samples/s", "CPU us/sample", GUARD))
    for name, n, cols, make in shapes:
        d = os.path.join(work, "paths-%d" % len(os.listdir(work)))
        mdswrite.write(d, cols, (make(i) for i in range(n)), size_limit=1 << 26)
        want = n * (n - 1) // 2

        def ds():
            return sluice.StreamingDataset(local=d, batch_size=32, shuffle=True)

        with_mode("threads", lambda: epoch(loader(ds(), 2), False, n, want))  # warm the cache
        for label, mode, shm, workers in PATHS:
            rate, cpu, guard = best_of(repeat, lambda: with_mode(mode, lambda: epoch(loader(ds(), workers), False, n, want), shm))
            print("  %-30s %-30s %12.0f %14.1f  %s" % (name, label, rate, cpu * 1e6, guard))


def limit_table(work, repeat, n):
    """The 48 KB ndarray shape from a source directory through the agent's
    cache under a cache_limit of 12 of its ~1 MB shards (smaller than the
    data), shuffle blocks of 4 shards, batches of 32 spanning 2 shards: torch's worker processes, the
    threaded feed over mapped shards (what SLUICE_SHM=auto took under a
    limit before the agent copied records out, see agent/feed.go
    copyRecords) and the shared-memory feed (what auto takes now), each
    epoch from a fresh cache, alternated. Guarded by count and id sum."""
    import numpy as np

    src = os.path.join(work, "limit-src")
    arr = np.arange(3 * 64 * 64, dtype=np.float32).reshape(3, 64, 64)
    mdswrite.write(src, {"id": "int", "x": "ndarray:float32:3,64,64"}, ({"id": i, "x": arr} for i in range(n)),
                   size_limit=1 << 20)
    sizes = [os.path.getsize(os.path.join(src, f)) for f in os.listdir(src) if f.endswith(".mds")]
    limit = os.path.getsize(os.path.join(src, "index.json")) + 12 * max(sizes)
    per_shard = -(-n // len(sizes))
    want = n * (n - 1) // 2
    print("\nUnder cache_limit=%d (12 of %d shards of ~1 MB; 48 KB ndarray, batch 32, 2 workers; fresh cache per epoch)"
          % (limit, len(sizes)))
    print("  %-44s %12s %14s  %s" % ("path", "samples/s", "CPU us/sample", GUARD))
    rows = (("process loader workers=2", "workers", "off"), ("threaded feed, mapped shards (old auto)", "threads", "off"),
            ("shared-memory feed (auto now)", "threads", "auto"))
    best = {}
    for r in range(repeat):
        for label, mode, shm in rows:
            cache = os.path.join(work, "limit-cache-%d-%s-%s" % (r, mode, shm))

            def one():
                # A shuffle block of 4 shards: with the default block (the
                # whole dataset here) every batch would need shards the
                # limit evicted, and re-downloads would dominate.
                ds = sluice.StreamingDataset(remote=src, local=cache, batch_size=32, shuffle=True, cache_limit=limit,
                                             shuffle_block_size=4 * per_shard)
                return epoch(loader(ds, 2), False, n, want)

            got = with_mode(mode, one, shm)
            shutil.rmtree(cache, ignore_errors=True)
            best[label] = max(best.get(label, got), got, key=lambda x: x[0])
    for label, _, _ in rows:
        rate, cpu, guard = best[label]
        print("  %-44s %12.0f %14.1f  %s" % (label, rate, cpu * 1e6, guard))


def _stack_collate(samples):
    """A custom collate_fn (the threaded feed does not take it under
    SLUICE_FEED=auto): ids and the stacked arrays as tensors."""
    import torch

    return {"id": torch.tensor([s["id"] for s in samples]), "x": torch.stack([torch.from_numpy(s["x"]) for s in samples])}


def worker_slots_table(work, repeat, n):
    """48 KB ndarrays through 2 torch worker processes with a custom
    collate_fn: the batch tensors through torch's fresh shared-memory file
    per tensor (SLUICE_WORKER_SLOTS=0) and through the workers' reused
    memory files (sluice._wslots, the default), alternated in one run.
    Guarded by count and id sum."""
    import numpy as np

    d = os.path.join(work, "wslots")
    arr = np.arange(3 * 64 * 64, dtype=np.float32).reshape(3, 64, 64)
    mdswrite.write(d, {"id": "int", "x": "ndarray:float32:3,64,64"}, ({"id": i, "x": arr} for i in range(n)),
                   size_limit=1 << 26)
    want = n * (n - 1) // 2
    print("\nWorker processes with a custom collate_fn (48 KB ndarray, batch 32, 2 workers, %d samples)" % n)
    print("  %-44s %12s %14s  %s" % ("path", "samples/s", "CPU us/sample", GUARD))
    rows = (("torch's shared memory (SLUICE_WORKER_SLOTS=0)", "0"), ("reused worker slots (default)", "16"))
    best = {}
    old = os.environ.get("SLUICE_WORKER_SLOTS")
    try:
        for r in range(repeat + 1):
            for label, slots in rows:
                os.environ["SLUICE_WORKER_SLOTS"] = slots
                ds = sluice.StreamingDataset(local=d, batch_size=32, shuffle=True)
                got = with_mode("auto", lambda: epoch(loader(ds, 2, _stack_collate), False, n, want))
                if r:  # the first round warms the cache
                    best[label] = max(best.get(label, got), got, key=lambda x: x[0])
    finally:
        if old is None:
            os.environ.pop("SLUICE_WORKER_SLOTS", None)
        else:
            os.environ["SLUICE_WORKER_SLOTS"] = old
    for label, _ in rows:
        rate, cpu, guard = best[label]
        print("  %-44s %12.0f %14.1f  %s" % (label, rate, cpu * 1e6, guard))


# -- images -----------------------------------------------------------------


def photo_jpegs(n, w=500, h=375, seed=0):
    """n distinct photo-like JPEGs (smooth fields plus noise, quality 90)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    x = np.arange(w)[None, :] / w
    y = np.arange(h)[:, None] / h
    out = []
    base = [None] * 8
    for k in range(8):
        a, b, c = rng.uniform(1, 9, 3)
        base[k] = np.stack([127 + 110 * np.sin(a * x + b * y), 127 + 110 * np.cos(b * x * y + c * x),
                            127 + 110 * np.sin(c * y + a * x * x)], -1)
    for i in range(n):
        img = base[i % 8] + rng.normal(0, 12, (h, w, 3))
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def rrc_box(W, H, rnd, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params (torchvision is not
    installed here)."""
    area = W * H
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        t = area * rnd.uniform(*scale)
        ar = math.exp(rnd.uniform(*lr))
        w, h = int(round(math.sqrt(t * ar))), int(round(math.sqrt(t / ar)))
        if 0 < w <= W and 0 < h <= H:
            i, j = rnd.randint(0, H - h), rnd.randint(0, W - w)
            return (j, i, j + w, i + h)
    return (0, 0, W, H)


def augment(img, rnd):
    """PIL image -> RandomResizedCrop 224 + flip -> uint8 HWC array."""
    import numpy as np
    from PIL import Image

    img = img.convert("RGB")
    img = img.resize((224, 224), Image.BILINEAR, box=rrc_box(img.width, img.height, rnd))
    if rnd.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(img)


def image_collate(samples):
    """The pipeline's collate: augment each decoded image, stack to a
    uint8 N x 3 x 224 x 224 tensor."""
    import numpy as np
    import torch

    rnd = random.Random(int(samples[0]["id"]))
    arr = np.stack([augment(s["img"], rnd) for s in samples])
    ids = torch.tensor([int(s["id"]) for s in samples])
    return {"img": torch.from_numpy(arr).permute(0, 3, 1, 2), "id": ids}


def pil_ceiling(jpegs, seconds=3.0):
    """Single-process PIL decode + crop + flip: (images per wall second,
    images per CPU second). On a shared machine the CPU rate is the one
    core's rate the ceiling means."""
    from PIL import Image

    rnd = random.Random(1)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        augment(Image.open(io.BytesIO(jpegs[n % len(jpegs)])), rnd)
        n += 1
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


# -- index ------------------------------------------------------------------


def big_index(path, n=40_000):
    entry = ('{"column_encodings": ["str", "int", "bytes"], "column_names": ["text", "id", "tokens"], '
             '"column_sizes": [null, 8, null], "compression": "zstd", "format": "mds", "hashes": [], '
             '"raw_data": {"basename": "shard.%05d.mds", "bytes": %d, "hashes": {}}, "samples": %d, '
             '"size_limit": 67108864, "version": 2, "zip_data": {"basename": "shard.%05d.mds.zstd", '
             '"bytes": %d, "hashes": {}}}')
    parts = [entry % (i, 67000000 + i % 1000, 4000 + i % 97, i, 21000000 + i % 777) for i in range(n)]
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "index.json"), "w") as f:
        f.write('{"shards": [' + ", ".join(parts) + '], "version": 2}')
    return os.path.getsize(os.path.join(path, "index.json"))


def inspect_index(path):
    """`sluice inspect --no-stat` in a child of its own: (seconds, peak RSS MB)."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, helpers.binary(), "inspect", "--no-stat", path],
                         check=True, stdout=subprocess.PIPE).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def go_benchmarks():
    if shutil.which("go") is None or not os.path.exists(os.path.join(ROOT, "go.mod")):
        print("go benchmarks: skipped (no go toolchain or source tree)")
        return
    runs = [("./format", "CompactIndex40k|ParseIndex40k"), ("./plan", "FirstBatchAtScale/py1e|ResumeFirst/py1e/n=10000000/at=90|ResumeNode"),
            ("./vision", "Decode")]
    for pkg, pat in runs:
        out = subprocess.run(["go", "test", "-run", "^$", "-bench", pat, "-count", "1", pkg], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Benchmark"):
                print("  " + " ".join(line.split()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", type=int, default=4000, help="samples of 100 KB")
    ap.add_argument("--images", type=int, default=1500, help="JPEG samples (500x375)")
    ap.add_argument("--repeat", type=int, default=2, help="epochs per loader figure; the best counts")
    ap.add_argument("--work", default=None)
    ap.add_argument("--go", action="store_true", help="also run the Go benchmarks (source tree)")
    ap.add_argument("--paths-only", action="store_true", help="only the three-paths table")
    ap.add_argument("--small", type=int, default=200000, help="~200 B samples in the three-paths table")
    ap.add_argument("--arrays", type=int, default=8000, help="48 KB ndarray samples in the three-paths table")
    ap.add_argument("--limit-arrays", type=int, default=4000, help="48 KB ndarray samples under a cache_limit (0: skip)")
    ap.add_argument("--limit-only", action="store_true", help="only the cache_limit table")
    ap.add_argument("--slots-arrays", type=int, default=6000,
                    help="48 KB ndarray samples through worker processes with a custom collate (0: skip)")
    ap.add_argument("--slots-only", action="store_true", help="only the worker-slots table")
    args = ap.parse_args()
    cores = os.cpu_count()
    work = args.work or tempfile.mkdtemp(prefix="sluice-feedbench-")
    os.makedirs(work, exist_ok=True)
    os.environ.setdefault("SLUICE_AGENT_DIR", os.path.join(work, "agent"))
    _build.sluice_binary(work)  # $SLUICE_BIN, else built from this checkout
    print("load average %.2f, %d CPUs; MosaicML Streaming, LitData, WebDataset: not installable here"
          % (os.getloadavg()[0], cores))
    try:
        if not (args.limit_only or args.slots_only):
            paths_table(work, args.repeat, args.large, args.small, args.arrays)
        if args.limit_arrays and not args.slots_only:
            limit_table(work, args.repeat, args.limit_arrays)
        if args.slots_arrays and not args.limit_only:
            worker_slots_table(work, args.repeat, args.slots_arrays)
        if args.paths_only or args.limit_only or args.slots_only:
            return
        # 3. index first: no agent child yet to inflate the peak RSS.
        size = big_index(os.path.join(work, "idx"))
        secs, rss = inspect_index(os.path.join(work, "idx"))
        print("\n40k-shard index.json (%.1f MB): sluice inspect --no-stat %.0f ms, peak RSS %.0f MB (process total)"
              % (size / 1e6, secs * 1e3, rss))

        # 1. 100 KB samples.
        n = args.large
        if n > 0:
            d = os.path.join(work, "large")
            blob = os.urandom(100 * 1024)
            mdswrite.write(d, {"id": "int", "data": "bytes"}, ({"id": i, "data": blob} for i in range(n)),
                           size_limit=1 << 26)
            want = n * (n - 1) // 2

            def ds():
                return sluice.StreamingDataset(local=d, batch_size=32, shuffle=True)

            with_mode("workers", lambda: epoch(loader(ds(), 0), False, n, want))  # warm
            print("\n100 KB samples to the loop (batch_size=32, %d samples)" % n)
            print("  %-34s %12s %14s  %s" % ("path", "samples/s", "CPU us/sample", GUARD))
            for name, mode, workers, feed in (("DataLoader workers=0", "workers", 0, False),
                                              ("DataLoader workers=2 (processes)", "workers", 2, False),
                                              ("feed workers=2 (threads)", "threads", 2, True),
                                              ("feed workers=8 (threads)", "threads", 8, True)):
                rate, cpu, guard = best_of(args.repeat, lambda: with_mode(mode, lambda: epoch(loader(ds(), workers), feed, n, want)))
                print("  %-34s %12.0f %14.1f  %s" % (name, rate, cpu * 1e6, guard))

        # 2. JPEG pipeline.
        m = args.images
        if m > 0:
            jpegs = photo_jpegs(min(m, 64))
            di = os.path.join(work, "jpeg")
            mdswrite.write(di, {"id": "int", "img": "jpeg"}, ({"id": i, "img": jpegs[i % len(jpegs)]} for i in range(m)),
                           size_limit=1 << 26)
            want = m * (m - 1) // 2

            def dsi():
                return sluice.StreamingDataset(local=di, batch_size=32, shuffle=True)

            wall1, one = pil_ceiling(jpegs)
            print("\nJPEG pipeline: decode + RandomResizedCrop 224 + flip -> uint8 tensors (%d images, %.0f KB each)"
                  % (m, sum(map(len, jpegs)) / len(jpegs) / 1e3))
            print("  PIL single process %.0f img/s per CPU second (%.0f per wall second) x %d cores = ceiling %.0f img/s"
                  % (one, wall1, cores, one * cores))
            print("  %-34s %12s %14s %10s %12s  %s" % ("path", "images/s", "CPU us/image", "of ceiling", "PIL CPU/ours", GUARD))
            counts = sorted({2, cores})
            paths = [("DataLoader workers=%d (processes)" % w, "workers", w, False) for w in counts]
            paths += [("feed workers=%d (threads)" % w, "threads", w, True) for w in counts]
            for name, mode, workers, feed in paths:
                rate, cpu, guard = best_of(args.repeat, lambda: with_mode(
                    mode, lambda: epoch(loader(dsi(), workers, image_collate), feed, m, want)))
                print("  %-34s %12.0f %14.1f %9.0f%% %11.0f%%  %s" % (name, rate, cpu * 1e6, 100 * rate / (one * cores),
                                                                     100 / one / cpu, guard))
        if args.go:
            print("\nGo benchmarks:")
            go_benchmarks()
    finally:
        helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
