"""StreamingDataset with MosaicML's arguments (spec §15); Stream is in stream.py."""

import os
import warnings

from . import _agent, _encoded, _iteration, _layout, _live, _worker, _world, errors
from . import images as _images
from .stream import (Stream, _abs_location, _check_download_args, _check_locals, _check_stream_class,  # noqa: F401
                     _check_weights, _derived_local, _plain, _size_str)

try:
    from torch.utils.data import IterableDataset as _Base
except ImportError:  # torch is optional

    class _Base:
        pass


_DEFAULT_FETCH = 1024
_ORDER_ADMISSIONS = "order-admissions"  # the agent's hello feature


def require_batch_size(dataset, num_workers):
    """Raises ValueError (InvalidArgumentError) at iteration when the dataset
    has no batch_size, as MosaicML does since it checks at iteration time:
    the per-device batch size decides which samples each rank and worker
    reads and what a resume state means, so it must equal the DataLoader's."""
    if getattr(dataset, "batch_size", 0) is None:
        where = "a DataLoader with %d workers" % num_workers if num_workers else "this process"
        raise errors.InvalidArgumentError(
            "StreamingDataset(batch_size=None) cannot be iterated (by %s): the per-device batch size "
            "decides which samples each rank and worker reads and what a resume state means; pass "
            "StreamingDataset(batch_size=...) the same value as the DataLoader's batch_size" % where)


class StreamingDataset(_layout.Layout, _Base):
    """A MosaicML-compatible streaming dataset served by the Sluice agent.

    Takes MosaicML StreamingDataset's keyword arguments with the same
    defaults. Iterating yields dicts of decoded columns, in exactly the order
    MosaicML (and Sluice's Go engine) gives for this rank and DataLoader
    worker. Extra keyword arguments: ``agent_dir`` (the agent directory),
    ``timeout`` (seconds any single wait on the agent may take),
    ``stall_timeout`` (seconds an iteration may go without a sample before
    it fails with AgentTimeoutError; default: timeout plus every download
    attempt's download_timeout),
    ``fetch_size`` (samples per request), ``inline_max`` (records up to
    this many bytes are sent inline instead of mapped) and
    ``decode_images`` (sluice.DecodeImage objects: image columns delivered
    as uint8 arrays, cropped and flipped per sample; docs/images.md),
    ``encoded_tensors`` (sluice.EncodedTensor objects or column names:
    variable-size columns delivered undecoded as 1-D torch.uint8 tensors
    for GPU decoders, views of the shared memory through the feed;
    docs/images.md, "GPU decoders") and
    ``order_admissions`` (under a cache_limit, this rank's DataLoader
    workers take their shard changes in turn, in the order the training
    loop consumes them: what the cache evicts and downloads again is the
    same on every run and ``sluice simulate --order-admissions`` predicts
    it exactly, at some cost in throughput where the workers fetch on
    demand; docs/input-bound.md).
    """

    def __init__(
        self,
        *,
        streams=None,
        remote=None,
        local=None,
        split=None,
        download_retry=2,
        download_timeout=60,
        validate_hash=None,
        keep_zip=False,
        epoch_size=None,
        predownload=None,
        cache_limit=None,
        sampling_method="balanced",
        sampling_granularity=1,
        partition_algo="relaxed",
        num_canonical_nodes=None,
        batch_size=None,
        shuffle=False,
        shuffle_algo="py1e",
        shuffle_seed=9176,
        shuffle_block_size=None,
        batching_method="random",
        allow_unsafe_types=False,
        replication=None,
        stream_name="stream",
        stream_config=None,
        agent_dir=None,
        timeout=30.0,
        stall_timeout=None,
        fetch_size=None,
        inline_max=0,
        decode_images=None,
        order_admissions=False,
        encoded_tensors=None,
    ):
        # MosaicML's rule, by truth value: streams=[] with a remote uses the
        # remote, and remote="" / local="" count as not given.
        if bool(streams) == (bool(remote) or bool(local)):
            raise ValueError("You must provide either `streams` or `remote`/`local`, but not both "
                             "(got streams=%r, remote=%r, local=%r)" % (streams, remote, local))
        if not streams:
            streams = None
        remote, local = remote or None, local or None
        if stream_name != "stream" or stream_config:
            raise ValueError("only the default Stream class is supported (stream_name=%r)" % stream_name)
        for st in streams or ():
            _check_stream_class(st)
        if shuffle_seed < 0:
            raise ValueError("shuffle_seed must be >= 0, got %r" % shuffle_seed)
        _check_download_args(download_retry, download_timeout)
        if sampling_granularity <= 0:
            raise ValueError("sampling_granularity must be > 0")
        # MosaicML checks these two before reading any index.
        if sampling_method not in ("balanced", "fixed"):
            raise ValueError("sampling_method must be 'balanced' or 'fixed', got %r" % (sampling_method,))
        if batching_method not in ("random", "stratified", "per_stream", "device_per_stream"):
            raise ValueError("batching_method must be 'random', 'stratified', 'per_stream' or 'device_per_stream', "
                             "got %r" % (batching_method,))
        if replication is not None and replication < 1:
            raise ValueError("replication must be >= 1")
        if batch_size is not None:
            # MosaicML needs an int too (it raises ValueError at iteration).
            if isinstance(batch_size, (bool, float, str)) or not hasattr(batch_size, "__index__"):
                raise ValueError("batch_size must be an int (the DataLoader's batch_size), got %r" % (batch_size,))
            batch_size = int(batch_size)
            if batch_size < 1:
                raise ValueError("batch_size must be >= 1")
        if shuffle_algo == "py1b":
            warnings.warn("The 'py1b' shuffle algorithm will soon be deprecated (MosaicML): use 'py1br', "
                          "which gives the same kind of shuffle faster", DeprecationWarning, stacklevel=2)
        self.streams = list(streams) if streams is not None else None
        if streams is None and remote is not None and local is None:
            local = _derived_local(remote, split)
        self.remote, self.local, self.split = remote, local, split
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        self.predownload = predownload
        self.cache_limit = cache_limit
        self.sampling_method = sampling_method
        self.sampling_granularity = sampling_granularity
        self.partition_algo = partition_algo
        self.num_canonical_nodes = num_canonical_nodes
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.shuffle_algo = shuffle_algo
        self.shuffle_seed = shuffle_seed
        self.shuffle_block_size = shuffle_block_size
        self.batching_method = batching_method
        self.allow_unsafe_types = allow_unsafe_types
        self.replication = replication
        self.order_admissions = bool(order_admissions)
        self.initial_physical_nodes = None

        wire = {
            "remote": _abs_location(remote),
            "local": _abs_location(local),
            "split": split,
            "streams": [s._wire() for s in self.streams] if self.streams else None,
            "download_retry": download_retry,
            "download_timeout": None if download_timeout is None else float(download_timeout),
            "validate_hash": validate_hash,
            "keep_zip": keep_zip or None,
            "epoch_size": _size_str(epoch_size, "epoch_size"),
            "predownload": predownload,
            "cache_limit": _size_str(cache_limit, "cache_limit"),
            "sampling_method": sampling_method,
            "sampling_granularity": sampling_granularity,
            "partition_algo": partition_algo,
            "num_canonical_nodes": num_canonical_nodes,
            "batch_size": batch_size,
            "shuffle": shuffle or None,
            "shuffle_algo": shuffle_algo,
            "shuffle_seed": shuffle_seed,
            "shuffle_block_size": shuffle_block_size,
            "batching_method": batching_method,
            "allow_unsafe_types": allow_unsafe_types or None,
            "replication": replication,
            "order_admissions": self.order_admissions or None,
        }
        # numpy integers (a config's values) travel as ints, as MosaicML
        # takes them in its arithmetic.
        self._wire = {k: _plain(v) for k, v in wire.items() if v is not None}
        # As MosaicML: remote/local make one Stream, and every Stream holds
        # the dataset's download settings where it was given none.
        if self.streams is None:
            self.streams = [Stream(remote=remote, local=local, split=split, keep_zip=keep_zip)]
        for st in self.streams:
            st._apply_default({"split": split, "download_retry": download_retry, "download_timeout": download_timeout,
                               "validate_hash": validate_hash, "keep_zip": keep_zip})
        _check_weights(self.streams)
        _check_locals(self.streams)
        self._agent_dir = agent_dir
        self._timeout = float(timeout)
        if stall_timeout is None:
            stall_timeout = self._timeout + max(download_retry or 1, 1) * float(download_timeout or 60)
        if stall_timeout <= 0:
            raise ValueError("stall_timeout must be > 0, got %r" % stall_timeout)
        self._stall_timeout = float(stall_timeout)
        self._fetch = int(fetch_size or _DEFAULT_FETCH)
        self._inline_max = int(inline_max)
        self._job = _world.job_key()
        self._env = _agent.store_env()
        self._resume = None
        self._conn = None
        self._handle = None
        self._info = None
        self._decoders = None
        self._held = None  # batch leased by __getitem__
        self._pending = None  # (sample id, sample) being routed through a subclass's __getitem__
        # Image columns delivered decoded (sluice.images, docs/images.md):
        # by the agent through the shared-memory feed, else with PIL here.
        self._decode_images = _images.check(decode_images)
        self._feed_transforms = [d.feed_transform(shuffle_seed) for d in self._decode_images] or None
        # Columns delivered encoded as uint8 tensors (sluice._encoded).
        self._encoded = _encoded.check(encoded_tensors, self._decode_images)
        # Connect now, so a missing dataset or bad argument fails here.
        self._connection(_world.detect())
        _encoded.validate(self._encoded, self._info)
        self._mosaic_warnings()

    @classmethod
    def from_config(cls, location=None, **overrides):
        """A dataset from the ``dataset:`` section of a job file (the YAML
        `sluice run` executes; a path or a store URL, default
        $SLUICE_CONFIG), with overrides applied. Unknown arguments and wrong
        types raise sluice.config.ConfigError naming the file and line."""
        from . import config

        return cls(**config.dataset_arguments(location, overrides))

    # -- connection -------------------------------------------------------

    def __getstate__(self):
        st = self.__dict__.copy()
        st["_conn"] = None
        st["_handle"] = None
        st["_held"] = None
        st["_pending"] = None
        _live.forget(st)
        if not (self._info or {}).get("_wds"):
            # MDS record decoders are closures, which pickle cannot send to
            # a DataLoader worker started by spawn or forkserver: they are
            # rebuilt from the schemas there (__setstate__).
            st["_decoders"] = None
        return st

    def __setstate__(self, st):
        self.__dict__.update(st)
        if self._decoders is None and self._info is not None:
            self._decoders = self._record_decoders(self._info["schemas"])

    def _record_decoders(self, schemas):
        """The record decoder of each schema (encoded_tensors columns as
        tensors: sluice._encoded)."""
        return _encoded.record_decoders(schemas, self.allow_unsafe_types, getattr(self, "_encoded", ()))

    def _connection(self, world):
        c = self._conn
        if c is None or c.sock is None or c.pid != os.getpid():
            self._conn = self._handle = self._held = None
            c = _agent.Connection(self._agent_dir, timeout=self._timeout)
            self._conn = c
            if self.order_admissions and _ORDER_ADMISSIONS not in c.features:
                warnings.warn("order_admissions=True has no effect: the sluice agent on %s is of a release that "
                              "does not take it (restart it with this release's binary)" % c.path,
                              UserWarning, stacklevel=3)
        if self._handle is None:
            try:
                opened = c.call({"op": "open", "dataset": self._wire, "job": self._job, "world": world, "env": self._env},
                                "open", timeout=self._open_timeout())
            except errors.DatasetNotFoundError as e:
                raise _local_index_error(self.streams, e) from None
            self._handle = opened["handle"]
            if self._info is None:
                for w in opened.get("warnings") or ():
                    warnings.warn(w, UserWarning, stacklevel=3)
                # MosaicML leaves each Stream holding its resolved weights.
                for st, sw in zip(self.streams or (), opened.get("streams") or ()):
                    st.proportion, st.repeat, st.choose = sw["proportion"], sw["repeat"], sw["choose"]
            if self._info is None and not self.allow_unsafe_types:
                for sc in opened["schemas"]:
                    if "pkl" in (sc.get("column_encodings") or ()):
                        raise errors.InvalidArgumentError(
                            "Column of type pkl is not allowed by default: pickle can run arbitrary code when "
                            "loaded. Pass allow_unsafe_types=True if you trust the data (columns %s)"
                            % ", ".join(sc.get("column_names") or ()))
            if self._info is None or self._info.get("shard_samples") != opened.get("shard_samples"):
                self._decoders = self._record_decoders(opened["schemas"])
            self._info = opened
        return c

    def _open_timeout(self):
        # Opening may download every stream's index.json: allow the
        # download attempts their full time.
        attempts = max(self.download_retry or 1, 1)
        return self._timeout + attempts * float(self.download_timeout or 60) * max(len(self.streams or ()), 1)

    # -- sizes ------------------------------------------------------------

    @property
    def num_samples(self):
        """Distinct samples of the dataset (MosaicML num_samples)."""
        return self._info["num_samples"]

    @property
    def size(self):
        """Same as num_samples: the range of valid sample indices."""
        return self._info["num_samples"]

    @property
    def epoch_size(self):
        """Samples per epoch over all ranks."""
        return self._info["epoch_size"]

    @property
    def length(self):
        """Samples per rank per epoch."""
        return self._info["length"]

    def __len__(self):
        return self._info["length"]

    @property
    def next_epoch(self):
        """The epoch this rank's next iteration begins (MosaicML's
        next_epoch; 0 before the first)."""
        world = _world.detect()
        c = self._connection(world)
        return c.call({"op": "epoch", "handle": self._handle, "rank": world["rank"]}, "epoch")["next_epoch"]

    # -- random access ----------------------------------------------------

    @property
    def num_shards(self):
        """Number of shards over all streams (MosaicML num_shards)."""
        return len(self._info["shard_samples"])

    def __getitem__(self, idx):
        return getitem(self, idx)

    def get_item(self, idx, retry=7):
        """Sample idx of the whole dataset (MosaicML's get_item; ds[idx]
        calls it). retry is accepted for MosaicML's signature: the agent
        downloads with the dataset's download_retry."""
        idx = _sample_index(idx)
        p = self._pending
        if p is not None and p[0] == idx:
            # Iteration routes each sample through a subclass's
            # __getitem__ or get_item; the super() call in it gets the
            # decoded one.
            self._pending = None
            return p[1]
        at = idx
        if idx < 0:
            idx += self.num_samples
        if not 0 <= idx < self.num_samples:
            raise IndexError("sample index %d out of range [0, %d)" % (at, self.num_samples))
        world = _world.detect()
        c = self._connection(world)
        req = {"op": "get", "handle": self._handle, "index": idx}
        if self._held:
            req["release"] = [self._held]
            self._held = None
        reply, body = c.roundtrip(req, "batch")
        self._held = reply.get("id") or None
        entries, inline = _agent.parse_entries(reply, body)
        if len(entries) != 1:
            raise errors.ProtocolError("get returned %d samples" % len(entries))
        _, ref, ln, off = entries[0]
        shard = reply["shards"][ref & ~_agent.INLINE_FLAG]
        if ref & _agent.INLINE_FLAG:
            rec = bytes(inline[off : off + ln])
        else:
            with open(shard["path"], "rb") as f:
                rec = os.pread(f.fileno(), ln, off)
            if len(rec) != ln:
                raise errors.CorruptDataError("shard %s is shorter than the index says" % shard["path"])
        return self._decoders[self._info["shard_schema"][shard["shard"]]](rec)

    def _mosaic_warnings(self):
        """The UserWarnings MosaicML gives for these arguments."""
        if self.predownload is not None and self.batch_size is not None and self.predownload < self.batch_size:
            warnings.warn("predownload (%d) is smaller than batch_size (%d): batches may wait for downloads; "
                          "set predownload to at least batch_size" % (self.predownload, self.batch_size),
                          UserWarning, stacklevel=3)
        if (self.shuffle and self.shuffle_algo == "py1e" and self.shuffle_block_size is not None
                and self._info["shard_samples"] and self.shuffle_block_size < max(self._info["shard_samples"])):
            warnings.warn("shuffle_block_size (%d) is smaller than a shard (%d samples): py1e shuffles less "
                          "well; raise shuffle_block_size or make shards smaller"
                          % (self.shuffle_block_size, max(self._info["shard_samples"])), UserWarning, stacklevel=3)

    def prepare_shard(self, shard_id, blocking=True):
        """Not supported: the node's agent owns the cache and fetches
        shards in plan order itself."""
        raise NotImplementedError("sluice: prepare_shard is not supported; the agent downloads shards in the "
                                  "order the plan needs them (see docs/migrating-from-mosaicml.md)")

    def evict_shard(self, shard_id):
        """Not supported: the agent evicts (Belady order under cache_limit)."""
        raise NotImplementedError("sluice: evict_shard is not supported; the agent evicts under cache_limit "
                                  "(see docs/migrating-from-mosaicml.md)")

    def evict_coldest_shard(self):
        """Not supported (see evict_shard)."""
        raise NotImplementedError("sluice: evict_coldest_shard is not supported; the agent evicts under cache_limit")

    # -- iteration --------------------------------------------------------

    def __iter__(self):
        world = _world.detect()
        worker = _worker.in_worker()
        if worker:
            # Batches of small samples leave the worker by value, not one
            # shared-memory file per tensor (see _worker).
            _worker.install_small_tensor_pickling()
            # Large ones through memory files the worker reuses (_wslots).
            from . import _wslots

            _wslots.install()
            _worker.watch_parent()
        require_batch_size(self, _worker.num_workers())
        if self._info is None:
            self._connection(world)
        # As MosaicML: a new epoch ends this dataset's earlier open iterator.
        _live.end_open(self)
        extra = {"resume": self._resume} if self._resume is not None else {}
        extra["round"] = _worker.round_token()
        conn, begun = self._begin(world, extra)
        from . import _shm

        if _shm.per_sample(self, StreamingDataset, conn):
            return _live.track(self, _shm.iter_samples(self, world, conn, begun))
        return _live.track(self, self._iterate(world, conn, begun, worker))

    def _begin(self, world, extra):
        """Opens a connection of its own for one iteration and begins it
        (sluice._iteration.begin)."""
        return _iteration.begin(self, world, extra)

    def _iterate(self, world, conn, begun, private=False):
        """Yields the iteration's samples, recovering from an agent crash
        (sluice._iteration.iterate)."""
        return _iteration.iterate(self, world, conn, begun, private)

    def _batches(self, conn, begun, maps, private, world):
        """Yields the decoded samples of the iteration, batch by batch
        (sluice._iteration.batches)."""
        return _iteration.batches(self, conn, begun, maps, private, world)

    # -- metrics ----------------------------------------------------------

    def metrics(self):
        """This rank's live input figures, in flat keys for wandb.log or a
        TensorBoard writer (see sluice._metrics): from the agent, the
        samples and bytes handed to this rank's workers, the time the
        agent's iterations for them waited for shards, cache hits, misses
        and the shards prefetched ahead, time to first sample, the
        dataset's downloads, evictions and cache bytes/limit, and the node
        agent's store retries (also per operation and cause); and, once a
        StreamingDataLoader has iterated this dataset, its time to first
        batch. One request to the agent; counters are cumulative."""
        from . import _metrics

        world = _world.detect()
        c = self._connection(world)
        reply = c.call({"op": "metrics", "handle": self._handle, "rank": world["rank"]}, "metrics")
        out = _metrics.flatten_agent(reply)
        ttfb = getattr(self, "_first_batch_seconds", None)
        if ttfb is not None:
            out[_metrics.PREFIX + "time_to_first_batch_seconds"] = ttfb
        return out

    # -- state ------------------------------------------------------------

    def _default_ncn(self, world):
        if self.num_canonical_nodes is not None:
            return self.num_canonical_nodes
        nodes = _world_nodes(world, self.replication)
        return 64 * nodes if self.shuffle_algo in ("py1s", "py2s") else nodes

    def state_dict(self, num_samples, from_beginning):
        """MosaicML's state dict after num_samples samples (all ranks).

        As MosaicML's: the epoch is the one last begun on this rank (or the
        resume state's, while that is not stale), sample_in_epoch adds the
        resume offset unless from_beginning, and initial_physical_nodes is
        the node count unless a resume state gave one.
        """
        world = _world.detect()
        c = self._connection(world)
        info = c.call({"op": "epoch", "handle": self._handle, "rank": world["rank"]}, "epoch")
        epoch = info["next_epoch"] - 1
        offset = 0
        ncn = info["num_canonical_nodes"] if info["next_epoch"] > 0 else None
        seed = info["shuffle_seed"] if info["next_epoch"] > 0 else self.shuffle_seed
        r = self._resume
        if r is not None and r["epoch"] >= epoch:
            epoch, offset = r["epoch"], r["sample_in_epoch"]
            ncn, seed = r["num_canonical_nodes"], r["shuffle_seed"]
            # MosaicML keeps the resumed value from then on.
            self.initial_physical_nodes = r.get("initial_physical_nodes")
        if ncn is None:
            ncn = self._default_ncn(world)
        ipn = self.initial_physical_nodes
        if ipn is None:
            ipn = _world_nodes(world, self.replication)
        sample_in_epoch = num_samples if from_beginning else offset + num_samples
        return {
            "epoch": epoch,
            "sample_in_epoch": sample_in_epoch,
            "num_canonical_nodes": ncn,
            "shuffle_seed": seed,
            "initial_physical_nodes": ipn,
        }

    def load_state_dict(self, obj):
        """Resume from a MosaicML state dict at the next iteration."""
        need = ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed")
        missing = [k for k in need if k not in obj]
        if missing:
            raise ValueError("state dict lacks %s" % ", ".join(missing))
        st = {k: int(obj[k]) for k in need}
        if obj.get("initial_physical_nodes") is not None:
            st["initial_physical_nodes"] = int(obj["initial_physical_nodes"])
        self._resume = st


def getitem(ds, idx):
    """ds[idx] as MosaicML's Array.__getitem__: an integer through
    ds.get_item (negative from the end), so that a subclass overriding
    either sees every sample; a slice (Python's rules), a list or an array
    (nested too) as lists of samples."""
    if isinstance(idx, slice):
        return [ds[i] for i in range(*idx.indices(ds.num_samples))]
    if isinstance(idx, (list, tuple)) or (hasattr(idx, "ndim") and getattr(idx, "ndim", 0) >= 1):
        return [ds[i] for i in idx]
    idx = _sample_index(idx)
    if -ds.num_samples <= idx < 0:
        idx += ds.num_samples
    return ds.get_item(idx)


def routes_items(ds, cls):
    """Whether ds's class overrides __getitem__ or get_item (cls is
    StreamingDataset): MosaicML's iteration yields ds[i] for every sample,
    which calls get_item, so iteration must go through them."""
    t = type(ds)
    return t.__getitem__ is not cls.__getitem__ or t.get_item is not cls.get_item


def _local_index_error(streams, err):
    """err, or LocalIndexNotFoundError (also a RuntimeError, as MosaicML
    raises) when the index.json missing is that of a stream with no
    remote."""
    msg = str(err)
    for st in streams or ():
        if not st.remote and st.local and "index.json" in msg and _abs_location(st.local) in msg:
            return errors.LocalIndexNotFoundError(msg)
    return err


def _sample_index(idx):
    """An integer sample index (int, numpy or torch integer scalar): anything
    else (a float, a string, None) raises ValueError, as MosaicML's
    Array.__getitem__ does, rather than being truncated to an int."""
    import operator

    if isinstance(idx, (str, bytes, float)) or idx is None:
        raise ValueError("Unsupported argument type passed to __getitem__: %s (give an int, a slice, "
                         "a list of ints or an integer array)" % type(idx).__name__)
    try:
        return operator.index(idx)
    except TypeError:
        raise ValueError("Unsupported argument type passed to __getitem__: %s (give an int, a slice, "
                         "a list of ints or an integer array)" % type(idx).__name__) from None


def _world_nodes(world, replication=None):
    """MosaicML's World.num_nodes of the world its state dicts and defaults
    use: ranks over ranks per node; with replication, of the replicated
    world (World.replicate: ranks // replication over the ranks per node
    when they divide, else 1 node)."""
    lws = max(world["local_world_size"], 1)
    if replication and replication > 1:
        ranks = world["world_size"] // replication
        return ranks // lws if ranks and ranks % lws == 0 else 1
    return max(world["world_size"] // lws, 1)
