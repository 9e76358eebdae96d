"""Throughput of sluice.MDSWriter on ~200-byte and 100 KB samples with zstd.

Run: PYTHONPATH=python SLUICE_BIN=bin/sluice /usr/bin/python3 python/tests/bench_writer.py [N_SMALL] [N_LARGE]
Reports wall-clock samples/s and MB/s, and the CPU seconds of the Python
process and of the sluice write process (on a machine shared by other jobs
the CPU figures are the steadier ones).
"""
import os, sys, time, shutil, tempfile
import sluice
def run(name, n, mk, **kw):
    out = tempfile.mkdtemp(prefix="wb-"); shutil.rmtree(out)
    samples = [mk(i) for i in range(min(n, 1000))]
    import resource
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN); p0 = time.process_time()
    t = time.perf_counter()
    with sluice.MDSWriter(out=out, **kw) as w:
        for i in range(n):
            w.write(samples[i % len(samples)])
    dt = time.perf_counter() - t
    pc = time.process_time() - p0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    gc = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    raw = sum(s["raw_data"]["bytes"] for s in __import__("json").load(open(os.path.join(out,"index.json")))["shards"])
    print("%s: %d samples in %.2fs: %.0f samples/s, %.1f MB/s raw (%.1f MB stored); CPU: python %.2fs (%.0f samples/cpu-s), sluice write %.2fs" % (name, n, dt, n/dt, raw/dt/1e6, size/1e6, pc, n/pc, gc))
    shutil.rmtree(out)
small = lambda i: {"id": i, "text": ("sample %d " % i) * 12, "label": i % 10}
run("200B zstd", int(sys.argv[1]) if len(sys.argv)>1 else 1000000, small, columns={"id": "int", "text": "str", "label": "int"}, compression="zstd")
big_payload = [os.urandom(50_000) + bytes(50_000) for _ in range(8)]
big = lambda i: {"id": i, "data": big_payload[i % 8]}
run("100KB zstd", int(sys.argv[2]) if len(sys.argv)>2 else 20000, big, columns={"id": "int", "data": "bytes"}, compression="zstd")
