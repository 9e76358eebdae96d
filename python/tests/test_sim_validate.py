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


def timing_errors(name, got, want, starved):
    """The timing comparison: |measured - simulated| <= REL x simulated + ABS,
    plus, for a measurement later than simulated, the time the threads that
    carry the batches to the loop (the loop's, each worker process's main
    thread) waited for a CPU up to that point (Starvation). The model has no
    CPU: on CI's two shared cores a loaded machine delays the pipeline by as
    much as those threads wait. (The agent's and the proxy's threads wait
    too, mostly while the workers wait for them, so they are left out: with
    them the allowance exceeded the delay 2-6 times and a model with twice
    the bandwidth passed.) Nothing excuses a measurement earlier than
    simulated: no load makes the run faster."""
    allowed = REL * want + ABS + (starved if got > want else 0.0)
    if abs(got - want) > allowed:
        return ["%s: measured %.3f s, simulated %.3f s, off by more than %.0f%% + %.0f ms%s" % (
            name, got, want, 100 * REL, 1000 * ABS,
            " + %.3f s of CPU wait" % starved if got > want else "")]
    return []


class Starvation:
    """The time the run's threads were runnable but waiting for a CPU (the
    run-queue wait of /proc/PID/task/TID/schedstat, its second field), summed
    over the threads of the processes sampled: what a loaded machine adds to
    the run and the model, which has no CPU in it, leaves out. Threads of a
    process started during the run count from their start, the others from
    the first sample; a thread that ends between two samples is missed."""

    def __init__(self):
        self.first, self.last = {}, {}

    def sample(self, pids, born=()):
        for pid in pids:
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                continue
            for tid in tids:
                try:
                    with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                        wait = int(f.read().split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                self.first.setdefault((pid, tid), 0 if pid in born else wait)
                self.last[(pid, tid)] = wait

    def seconds(self, pids=None, main=False):
        """The wait summed (of pids' threads only, or their main threads
        alone with main)."""
        return sum(self.last[k] - self.first[k] for k in self.last
                   if (pids is None or k[0] in pids) and (not main or str(k[0]) == k[1])) / 1e9


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
        starved = Starvation()
        agent = helpers.agent_pid(self.agent_dir)
        own = [os.getpid()] + ([agent] if agent else [])
        starved.sample(own)
        start = time.monotonic()
        it = iter(loader)
        workers = [w.pid for w in getattr(it, "_workers", [])]
        # The threads a batch passes through on its way to the loop: each
        # worker process's main thread (it asks the agent, decodes and
        # sends) and the loop's.
        critical = [os.getpid()] + workers
        t0 = start
        starved_first = None
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            # The first wait counts from the start (the workers' too).
            waits.append(time.monotonic() - t0)
            samples += len(batch["id"])
            # Sampled in the step's time, which it does not lengthen.
            due = time.monotonic() + STEP
            starved.sample(own + workers, born=workers)
            if starved_first is None:
                starved_first = starved.seconds(critical, main=True)
            time.sleep(max(due - time.monotonic(), 0))
            t0 = time.monotonic()
        wall = time.monotonic() - start
        starved.sample(own)
        print("\n  waiting for a CPU: the loop %.3f s, the workers' main threads %.3f s (all their threads %.3f s), "
              "this process's other threads (the proxy) %.3f s, the agent %.3f s" % (
                  starved.seconds([os.getpid()], main=True), starved.seconds(workers, main=True),
                  starved.seconds(workers), starved.seconds([os.getpid()]) - starved.seconds([os.getpid()], main=True),
                  starved.seconds(own[1:])))
        return {"waits": waits, "samples": samples, "wall": wall, "start": start,
                "starved_first": starved_first or 0.0, "starved": starved.seconds(critical, main=True)}

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
            for name, got, want, starved in (("time to first batch", first, sim_first, m["starved_first"]),
                                             ("input wait", wait, sim_wait, m["starved"]),
                                             ("wall", m["wall"], rep["wall_s"], m["starved"])):
                errors.extend(timing_errors(name, got, want, starved))
            print("\n  run %d: first batch %.3f vs %.3f s, wait %.3f vs %.3f s, wall %.3f vs %.3f s, "
                  "%d requests %d bytes (simulated %d, %d); CPU wait %.3f s to the first batch, %.3f s in all; load %.1f" % (
                      attempt + 1, first, sim_first, wait, sim_wait, m["wall"], rep["wall_s"], requests, nbytes,
                      rep["store_requests"], rep["store_bytes"], m["starved_first"], m["starved"], os.getloadavg()[0]))
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
