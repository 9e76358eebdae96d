"""WebDataset(urls, index=False): tar shards in WebDataset's own order.

Without an index the agent streams the tars as WebDataset does
(docs/format/wds.md, "no-index mode"): each epoch the shard list is
shuffled by (shuffle_seed, epoch) when shardshuffle is set, the same on
every rank; shard i goes to rank i mod ranks, and a rank's shards to its
DataLoader workers in turn; each worker reads its shards whole, samples in
archive order. Every sample comes once per epoch across all ranks and
workers, but ranks get whole shards (not equal counts), and a resume state
resumes only on the same ranks x workers.
"""

import os
import uuid

from . import _agent, _wdstar, _world, errors

_FETCH = 64


class TarSequence:
    """The sample source of WebDataset(urls, index=False)."""

    def __init__(self, remote, local=None, cache_limit=None, shuffle=False, shuffle_seed=9176, batch_size=None,
                 agent_dir=None, timeout=30.0, download_retry=None, download_timeout=None, fetch_size=None):
        self.remote = remote
        self.local = None if local is None else os.path.abspath(os.path.expanduser(os.fspath(local)))
        self.cache_limit = None if cache_limit is None else str(cache_limit)
        self.shuffle = bool(shuffle)
        self.shuffle_seed = int(shuffle_seed)
        self.batch_size = batch_size
        self._agent_dir = agent_dir
        self._timeout = float(timeout)
        self._download_retry = download_retry
        self._download_timeout = download_timeout
        self._fetch = int(fetch_size or _FETCH)
        self._job = _world.job_key()
        self._resume = None
        self._token = None
        self._conn = None
        self._ends = []  # iterations abandoned by their generator, to end
        self._opened = self._open()  # fails early on a bad URL

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_conn"] = None
        d["_ends"] = []
        return d

    def _open(self):
        c = self._conn
        if c is not None and c[0] == os.getpid() and c[1].sock is not None:
            return c[2]
        conn = _agent.Connection(self._agent_dir, timeout=self._timeout)
        req = {"op": "tarseq_open", "job": self._job, "remote": self.remote, "shuffle": self.shuffle,
               "shuffle_seed": self.shuffle_seed, "env": _agent.store_env()}
        if self.local:
            req["local"] = self.local
        if self.cache_limit:
            req["cache_limit"] = self.cache_limit
        if self._download_retry is not None:
            req["download_retry"] = int(self._download_retry)
        if self._download_timeout is not None:
            req["download_timeout"] = float(self._download_timeout)
        opened = conn.call(req, "tarseq_open", timeout=max(self._timeout, 120.0))
        self._conn = (os.getpid(), conn, opened)
        self._ends = []
        return opened

    def _flush_ends(self, conn):
        # A generator closed by the garbage collector may run in the middle
        # of another request on this connection: it only notes its
        # iteration, ended here, between requests.
        while self._ends:
            conn.call({"op": "tarseq_end", "iter": self._ends.pop()})

    @property
    def num_samples(self):
        raise TypeError("WebDataset(index=False) does not know its sample count before reading "
                        "(use the default index=True, or .with_length(n))")

    def __getitem__(self, idx):
        raise TypeError("WebDataset(index=False) has no random access (use the default index=True)")

    def metrics(self):
        """No per-rank agent figures in this mode: an empty dict (so
        StreamingDataLoader.metrics() still gives the loop's own)."""
        return {}

    @property
    def num_shards(self):
        """Shards in the dataset."""
        return len(self._opened["shard_urls"])

    def __iter__(self):
        world = _world.detect()
        opened = self._open()
        conn = self._conn[1]
        decoders = [_wdstar.TarRecord(u) for u in opened["shard_urls"]]
        ranks, workers = world["world_size"], world["num_workers"]
        begin = {"op": "tarseq_begin", "handle": opened["handle"], "rank": world["rank"], "ranks": ranks,
                 "worker": world["worker"], "workers": workers}
        if self._resume is not None:
            states = self._resume
            if len(states) != workers or any(s.get("ranks") != ranks for s in states):
                raise errors.InvalidArgumentError(
                    "WebDataset(index=False): the state was taken on %d ranks x %d workers, this loader runs %d x %d; "
                    "a tar sequence state resumes only on the shape it was taken on (use an index for elastic resume)"
                    % (states[0].get("ranks", 0) if states else 0, len(states), ranks, workers))
            begin["resume"] = states[world["worker"]]
            begin["resume_token"] = self._token
        self._flush_ends(conn)
        begun = conn.call(begin, "tarseq_begin", timeout=max(self._timeout, 120.0))
        if world["num_workers"] <= 1:
            self._resume = None  # this process resumed; the next epoch starts afresh
        return self._samples(conn, begun["iter"], decoders)

    def _samples(self, conn, it, decoders):
        pid = os.getpid()
        try:
            while True:
                self._flush_ends(conn)
                reply, body = conn.roundtrip({"op": "tarseq_next", "iter": it, "max": self._fetch}, "tarseq_batch")
                if reply.get("done"):
                    conn.call({"op": "tarseq_end", "iter": it})
                    return
                off = 0
                lengths, shards = reply["lengths"], reply["shards"]
                if len(lengths) != reply["n"] or len(shards) != reply["n"] or sum(lengths) > len(body):
                    raise errors.ProtocolError("tarseq_batch of %d samples does not fit its body" % reply["n"])
                for n, sh in zip(lengths, shards):
                    yield decoders[sh](body, off, n)
                    off += n
        except BaseException:
            if os.getpid() == pid and self._conn is not None and self._conn[1] is conn:
                self._ends.append(it)
            raise

    def state_dict(self, num_samples, from_beginning=False):
        """The resume state after num_samples samples of the current epoch,
        counted over all ranks as sluice.StreamingDataLoader counts them
        (this rank's samples x world size): one state per DataLoader worker
        of this rank, mapped by the agent from the order torch takes the
        workers' batches in. Exact for pipelines that keep one item per raw
        sample in order (decode, to_tuple, map); not through .shuffle(n),
        .select or .batched stages inside the dataset."""
        world = _world.detect()
        opened = self._open()
        per_rank = int(num_samples) // max(world["world_size"], 1)
        self._flush_ends(self._conn[1])
        reply = self._conn[1].call({"op": "tarseq_state", "handle": opened["handle"], "rank": world["rank"],
                                    "ranks": world["world_size"], "batch_size": int(self.batch_size or 1),
                                    "num_samples": per_rank}, "tarseq_state")
        return {"format": "sluice-tar-sequence", "workers": reply["workers"]}

    def load_state_dict(self, obj):
        """Resume from a state of state_dict at the next iteration (on the
        same ranks x workers only)."""
        if not isinstance(obj, dict) or obj.get("format") != "sluice-tar-sequence" or not obj.get("workers"):
            raise errors.InvalidArgumentError(
                "WebDataset(index=False).load_state_dict: not a tar sequence state (format %r)"
                % (obj.get("format") if isinstance(obj, dict) else type(obj).__name__))
        self._resume = [dict(s) for s in obj["workers"]]
        self._token = uuid.uuid4().hex
