"""Live input-pipeline figures in flat keys (Weights & Biases, TensorBoard).

Two sources, one namespace ("sluice/..."):

* the agent's figures for this rank on a dataset (StreamingDataset.metrics):
  what its DataLoader workers were handed, how long the agent's iterations
  for them waited for shards, cache hits and misses, the shards prefetched
  ahead of them, the dataset's downloads and cache use, its store requests
  and their latency, the store retries of the node's agent; one request to the agent, counters cumulative since
  the job's first iteration on the dataset;
* the training loop's own wait (StreamingDataLoader): for every batch, the
  time from the loop asking for it to the loader handing it over, whatever
  runs the workers (torch's processes, the threaded feed, or none). Its
  running input-wait fraction is the waits over the waits plus the time
  the loop spent between batches (the step's compute).

    for step, batch in enumerate(loader):
        loss = train_step(batch)
        wandb.log(loader.metrics(), step=step)  # or {"input_wait": loader.input_wait}
"""

import time

PREFIX = "sluice/"

# The agent's reply fields and the keys they are reported under.
_AGENT_KEYS = (
    ("samples", "samples"),
    ("bytes", "bytes"),
    ("wait_seconds", "wait_seconds"),
    ("first_sample_seconds", "time_to_first_sample_seconds"),
    ("cache_hits", "cache_hits"),
    ("cache_misses", "cache_misses"),
    ("prefetched_shards", "prefetched_shards"),
    ("downloads", "downloads"),
    ("bytes_fetched", "bytes_fetched"),
    ("evictions", "evictions"),
    ("cache_bytes", "cache_bytes"),
    ("cache_limit", "cache_limit_bytes"),
    ("store_retries", "store_retries"),
    ("workers", "workers"),
)


def flatten_agent(reply):
    """The agent's metrics reply as flat keys; store retries also per
    operation and cause ("sluice/store_retries/get/throttled"), and the
    requests to the dataset's stores per operation: how many, how many
    failed, their latency (time to the first byte or answer) summed and
    its mean ("sluice/store_requests/get", "sluice/store_errors/get",
    "sluice/store_request_seconds/get", "sluice/store_request_mean_seconds/get")."""
    out = {}
    for field, key in _AGENT_KEYS:
        v = reply.get(field, 0)
        out[PREFIX + key] = float(v) if isinstance(v, float) else int(v or 0)
    for rc in reply.get("retries_by") or ():
        out["%sstore_retries/%s/%s" % (PREFIX, rc["op"], rc["cause"])] = int(rc["n"])
    for so in reply.get("store") or ():
        op, n, secs = so["op"], int(so.get("requests", 0)), float(so.get("seconds", 0.0))
        out["%sstore_requests/%s" % (PREFIX, op)] = n
        out["%sstore_errors/%s" % (PREFIX, op)] = int(so.get("errors", 0))
        out["%sstore_request_seconds/%s" % (PREFIX, op)] = secs
        out["%sstore_request_mean_seconds/%s" % (PREFIX, op)] = secs / n if n else 0.0
    return out


class InputTimer:
    """Times a training loop's waits for its batches.

    begin() at the start of an iteration, got() when a batch is handed to
    the loop, asked() when the loop comes back for the next one. Figures
    accumulate over the loader's iterations, except time_to_first_batch,
    which is the latest iteration's."""

    __slots__ = ("steps", "wait_total", "compute_total", "last_wait", "time_to_first_batch",
                 "_start", "_asked", "_handed", "_first")

    def __init__(self):
        self.steps = 0
        self.wait_total = 0.0
        self.compute_total = 0.0
        self.last_wait = 0.0
        self.time_to_first_batch = None
        self._start = None
        self._asked = None
        self._handed = None
        self._first = False

    def begin(self):
        now = time.monotonic()
        self._start = self._asked = now
        self._handed = None
        self._first = True

    def got(self):
        """Returns whether the batch is the iteration's first."""
        now = time.monotonic()
        w = now - self._asked
        self.last_wait = w
        self.wait_total += w
        self.steps += 1
        self._handed = now
        if self._first:
            self.time_to_first_batch = now - self._start
            self._first = False
            return True
        return False

    def asked(self):
        now = time.monotonic()
        if self._handed is not None:
            self.compute_total += now - self._handed
            self._handed = None
        self._asked = now

    def fraction(self):
        """Waits over waits plus the loop's time between batches (0 before
        any batch)."""
        total = self.wait_total + self.compute_total
        return self.wait_total / total if total > 0 else 0.0

    def figures(self):
        """The loop's figures in flat keys."""
        out = {
            PREFIX + "steps": self.steps,
            PREFIX + "input_wait_seconds": self.last_wait,
            PREFIX + "input_wait_seconds_total": self.wait_total,
            PREFIX + "input_wait_fraction": self.fraction(),
        }
        if self.steps:
            out[PREFIX + "input_wait_seconds_mean"] = self.wait_total / self.steps
        if self.time_to_first_batch is not None:
            out[PREFIX + "time_to_first_batch_seconds"] = self.time_to_first_batch
        return out
