"""`sluice simulate` against the Python client: a real torch DataLoader with
worker processes over sluice.StreamingDataset, through the real agent, from
the real S3 server (.ci/with-services.sh) behind a latency and bandwidth
shaping proxy, with a fixed step time; the same run simulated. Bytes and
requests to the store must be equal; the time to first batch and the input
wait within a tolerance (docs/input-bound.md gives the measured error)."""

import http.client
import http.server
import json
import os
import subprocess
import threading
import time
import unittest
import urllib.parse
import uuid
import warnings

import helpers
import mdswrite

import sluice

try:
    import torch
    from torch.utils.data import DataLoader
except ImportError:  # pragma: no cover - torch is a CI dependency
    torch = None


LATENCY = 0.040  # s before a request is forwarded (the model's --latency)
BANDWIDTH = 1_000_000  # bytes/s of the one FIFO link (--bandwidth-per-node)
STEP = 0.030  # s of "training" after every batch (--step-time)
BATCH = 10
WORKERS = 2
# |measured - simulated| <= REL x simulated + ABS. Beyond the Go stream's
# validation (sim.TestValidateAgainstS3), the Python path adds worker process
# start and the agent's socket round trips, which the model leaves out.
REL, ABS = 0.35, 0.25
# The error allowed on the bytes downloaded when the cache evicts under
# several workers (one consumer per node is exact: sim.TestValidateAgainstS3).
EVICT_TOL = 0.15


class ShapingProxy:
    """A reverse proxy on 127.0.0.1 that waits LATENCY before forwarding each
    request, then sends response bodies through one link of BANDWIDTH
    bytes/s carrying one body at a time in the order they are ready (as
    package storagetest's ShapingProxy and the simulator's store model). The
    Host header passes unchanged (it is signed). It counts requests and body
    bytes."""

    CHUNK = 16 << 10

    def __init__(self, target):
        u = urllib.parse.urlsplit(target)
        self.host, self.port = u.hostname, u.port or 80
        self.link = threading.Lock()
        self.mu = threading.Lock()
        self.requests = 0
        self.bytes = 0
        self.log = []  # (method, path, arrived)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                arrived = time.monotonic()
                with proxy.mu:
                    proxy.requests += 1
                    proxy.log.append((self.command, self.path, arrived))
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                time.sleep(LATENCY)
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "HEAD" or not data:
                    return
                with proxy.link:
                    start = time.monotonic()
                    sent = 0
                    for i in range(0, len(data), proxy.CHUNK):
                        part = data[i:i + proxy.CHUNK]
                        self.wfile.write(part)
                        sent += len(part)
                        with proxy.mu:
                            proxy.bytes += len(part)
                        due = start + sent / BANDWIDTH
                        wait = due - time.monotonic()
                        if wait > 0:
                            time.sleep(wait)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def counts(self):
        with self.mu:
            return self.requests, self.bytes

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def write_dataset(directory):
    """240 samples of 4000 bytes in shards of at most 80 KB: 13 shards of
    ~19 samples (~77 KB, ~80 ms each through the link), as the Go
    validation's."""
    cols = {"id": "int", "data": "bytes"}
    samples = ({"id": i, "data": bytes((i + j) % 256 for j in range(4000))} for i in range(240))
    return mdswrite.write(directory, cols, samples, size_limit=80_000)


@unittest.skipIf(torch is None, "torch missing")
class SimulateValidateTest(helpers.AgentCase):
    def setUp(self):
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        s3 = helpers.s3_env(self)
        env = s3[1]
        self.src = os.path.join(self.tmp, "src-" + uuid.uuid4().hex)
        write_dataset(self.src)
        self.remote = helpers.upload_s3(self, self.src, "simvalidate-py", s3)
        self.proxy = ShapingProxy(env["S3_ENDPOINT_URL"])
        self.addCleanup(self.proxy.close)
        # The agent reads the store through the proxy (the client hands it
        # its store settings).
        helpers.set_env(self, dict(env, S3_ENDPOINT_URL=self.proxy.url, SLUICE_JOB=uuid.uuid4().hex))

    def simulate(self, cache_limit=None, ordered=False):
        args = [helpers.binary(), "simulate", self.src, "--batch-size", str(BATCH), "--shuffle",
                "--shuffle-algo", "py1s", "--shuffle-seed", "7", "--workers-per-rank", str(WORKERS),
                "--prefetch-factor", "2", "--latency", "%dms" % (LATENCY * 1000),
                "--bandwidth-per-node", str(BANDWIDTH), "--step-time", "%dms" % (STEP * 1000), "--json"]
        if cache_limit:
            args += ["--cache-limit", str(cache_limit)]
        if ordered:
            args.append("--order-admissions")
        out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=120).stdout
        return json.loads(out)["report"]

    def measure(self, cache_limit=None, ordered=False):
        """One epoch as a training loop reads it: torch's DataLoader with
        WORKERS worker processes (prefetch_factor 2), STEP after each batch.
        The clock starts when the loop begins (iter: the workers start), the
        dataset opened and its index fetched (as the simulator's; the index
        Stat runs on beside it). Worker process start and the agent
        handshake, ~130-170 ms here before a worker's first request, are
        not modelled: they are in the time to first batch's error."""
        local = os.path.join(self.tmp, "cache-" + uuid.uuid4().hex)
        ds = sluice.StreamingDataset(remote=self.remote, local=local, batch_size=BATCH, shuffle=True,
                                     shuffle_algo="py1s", shuffle_seed=7, cache_limit=cache_limit,
                                     order_admissions=ordered)
        loader = DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, prefetch_factor=2, timeout=60)
        waits, samples = [], 0
        start = time.monotonic()
        it = iter(loader)
        t0 = start
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            # The first wait counts from the start (the workers' too).
            waits.append(time.monotonic() - t0)
            samples += len(batch["id"])
            time.sleep(STEP)
            t0 = time.monotonic()
        return {"waits": waits, "samples": samples, "wall": time.monotonic() - start, "start": start}

    def compare(self, cache_limit=None, exact=True, ordered=False):
        rep = self.simulate(cache_limit, ordered)
        errors = []
        for attempt in range(3):
            r0, b0 = self.proxy.counts()
            m = self.measure(cache_limit, ordered)
            r1, b1 = self.proxy.counts()
            requests, nbytes = r1 - r0, b1 - b0
            self.assertEqual(m["samples"], rep["samples"])
            if exact:
                self.assertEqual((requests, nbytes), (rep["store_requests"], rep["store_bytes"]),
                                 "store requests and bytes, measured vs simulated")
            else:
                # Under evictions with several workers what is downloaded
                # again depends on the order in which the workers'
                # reservations reach the cache, the order their downloads
                # end in: a race (docs/input-bound.md).
                off = abs(nbytes - rep["store_bytes"]) / rep["store_bytes"]
                self.assertLessEqual(off, EVICT_TOL, "store bytes under evictions: measured %d (%d requests), "
                                     "simulated %d (%d)" % (nbytes, requests, rep["store_bytes"], rep["store_requests"]))
            first, wait = m["waits"][0], sum(m["waits"])
            sim_first, sim_wait = rep["time_to_first_batch_s"], rep["time_to_first_batch_s"] + rep["stall_s"]
            errors = []
            for name, got, want in (("time to first batch", first, sim_first), ("input wait", wait, sim_wait),
                                    ("wall", m["wall"], rep["wall_s"])):
                if abs(got - want) > REL * want + ABS:
                    errors.append("%s: measured %.3f s, simulated %.3f s" % (name, got, want))
            print("\n  run %d: first batch %.3f vs %.3f s, wait %.3f vs %.3f s, wall %.3f vs %.3f s, "
                  "%d requests %d bytes (simulated %d, %d)" % (
                      attempt + 1, first, sim_first, wait, sim_wait, m["wall"], rep["wall_s"], requests, nbytes,
                      rep["store_requests"], rep["store_bytes"]))
            if os.environ.get("SLUICE_SIM_DEBUG"):
                for meth, path, at in self.proxy.log[-requests:]:
                    print("    %s %s %+.1f ms" % (meth, path.rsplit("/", 1)[-1], 1000 * (at - m["start"])))
                print("    waits", " ".join("%.0f" % (1000 * w) for w in m["waits"]))
            if not errors:
                break
        self.assertEqual(errors, [])

    def test_workers(self):
        self.compare()

    def test_workers_evicting(self):
        # A cache of ~7 shards (the agent wants room for 3 leased shards
        # per worker, a batch's, and one fetch): the epoch downloads
        # shards again.
        self.compare(cache_limit=600_000, exact=False)

    def test_workers_evicting_ordered(self):
        # The same cache, the workers taking their shard changes in turn
        # (order_admissions, `sluice simulate --order-admissions`): the
        # agent's cursors of the rank's workers take turns as the Go
        # stream's do, and a worker's shard change waits in its turn for
        # the Python worker to give back the locations of the shard it
        # leaves. What is evicted and downloaded again is a function of
        # the plan: exact.
        self.compare(cache_limit=600_000, ordered=True)


if __name__ == "__main__":
    unittest.main()
