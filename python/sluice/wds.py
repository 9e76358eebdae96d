"""WebDataset's API on Sluice: ``WebDataset`` and ``WebLoader``.

``sluice.WebDataset("s3://b/shard-{000000..001399}.tar", shardshuffle=True,
cache_dir=..., cache_size=...)`` streams WebDataset tar shards through the
node's Sluice agent (its bounded cache, single downloads per node,
prefetch) and yields WebDataset's samples: dicts with ``__key__``,
``__url__`` and one bytes value per field, named by extension. The chain
methods (``.shuffle``, ``.decode``, ``.to_tuple``, ``.map``,
``.map_tuple``, ``.map_dict``, ``.select``, ``.rename``, ``.batched``,
``.unbatched``, ``.with_epoch``, ``.with_length``) have WebDataset's
meaning.

Where it differs (see docs/format/wds.md): the samples of an epoch come
in Sluice's global order (MosaicML's partition of the epoch over ranks and
DataLoader workers), so every sample is delivered exactly once per epoch
across all ranks and workers, with no nodesplitter/workersplitter and no
uneven splits; ``shardshuffle`` turns on Sluice's shuffle (shards and
samples, seeded, the same on every rank); and ``state_dict()`` /
``load_state_dict()`` resume exactly, as for MosaicML datasets.
"""

import copy
import itertools
import os
import random

from . import _wdstar
from .dataset import StreamingDataset

try:
    from torch.utils.data import IterableDataset as _Base
except ImportError:  # torch is optional

    class _Base:
        pass


__all__ = ["WebDataset", "WebLoader", "imagehandler", "handle_extension", "default_collation_fn"]

imagehandler = _wdstar.imagehandler
handle_extension = _wdstar.handle_extension


def _spec(urls):
    """One "::"-separated spec with local paths made absolute."""
    if isinstance(urls, (list, tuple)):
        parts = [os.fspath(u) for u in urls]
    else:
        parts = os.fspath(urls).split("::")
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        if "://" not in p:
            p = os.path.abspath(os.path.expanduser(p))
        out.append(p)
    if not out:
        raise ValueError("WebDataset: no shard URLs in %r" % (urls,))
    return "::".join(out)


class _TarSource(StreamingDataset):
    """A StreamingDataset over tar shards whose samples carry __url__."""

    def _connection(self, world):
        c = super()._connection(world)
        info = self._info
        if not info.get("_wds"):
            prefix = info.get("shard_url_prefix") or ""
            urls = [prefix + u for u in info.get("shard_urls") or ()] or [None] * len(info["shard_samples"])
            self._decoders = [_wdstar.TarRecord(u) for u in urls]
            info = dict(info, shard_schema=list(range(len(urls))), _wds=True)
            self._info = info
        return c


# -- pipeline stages (generator functions over an iterator) -----------------


def _shuffle(src, bufsize, initial, rng):
    buf = []
    initial = min(initial, bufsize)
    for s in src:
        buf.append(s)
        if len(buf) < bufsize:
            if len(buf) < initial:
                continue
        k = rng.randrange(len(buf))
        buf[k], buf[-1] = buf[-1], buf[k]
        if len(buf) >= initial:
            yield buf.pop()
    rng.shuffle(buf)
    yield from buf


def _getfirst(sample, keys, missing_is_error=True):
    for k in keys.split(";"):
        if k in sample:
            return sample[k]
    if missing_is_error:
        raise ValueError("sample %r has none of the fields %r (it has %s)" % (
            sample.get("__key__"), keys, ", ".join(sorted(sample))))
    return None


def default_collation_fn(samples, combine_tensors=True, combine_scalars=True):
    """WebDataset's collation: a list of columns; numbers become numpy arrays,
    tensors and arrays are stacked, everything else stays a list. Dict
    samples give a dict of columns."""
    if not samples:
        return samples
    if isinstance(samples[0], dict):
        keys = list(samples[0].keys())
        cols = [_collate_column([s[k] for s in samples], combine_tensors, combine_scalars) for k in keys]
        return dict(zip(keys, cols))
    return [_collate_column(list(col), combine_tensors, combine_scalars) for col in zip(*samples)]


def _collate_column(b, combine_tensors, combine_scalars):
    first = b[0]
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        if combine_scalars:
            import numpy as np

            return np.array(b)
        return b
    try:
        import torch

        if isinstance(first, torch.Tensor):
            return torch.stack(b) if combine_tensors else b
    except ImportError:  # pragma: no cover
        pass
    try:
        import numpy as np

        if isinstance(first, np.ndarray):
            return np.array(b) if combine_tensors else b
    except ImportError:  # pragma: no cover
        pass
    return list(b)


def _batched(src, n, collation_fn, partial):
    batch = []
    for s in src:
        batch.append(s)
        if len(batch) == n:
            yield collation_fn(batch) if collation_fn is not None else batch
            batch = []
    if batch and partial:
        yield collation_fn(batch) if collation_fn is not None else batch


def _unbatched(src):
    for b in src:
        if isinstance(b, dict):
            keys = list(b.keys())
            for i in range(len(b[keys[0]]) if keys else 0):
                yield {k: b[k][i] for k in keys}
            continue
        for i in range(len(b[0]) if len(b) else 0):
            yield tuple(col[i] for col in b)


class _Pipeline:
    """WebDataset's fluid interface: each method returns a new pipeline with
    one more stage."""

    _stages = ()
    _length = None
    _epoch = None

    def _compose(self, stage):
        p = copy.copy(self)
        p._stages = tuple(self._stages) + (stage,)
        return p

    def _source(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def _rng_seed(self):
        return 0

    def __iter__(self):
        if self._epoch is not None:
            return self._epoch_iter()
        return self._run(self._source())

    def _run(self, it):
        for stage in self._stages:
            it = stage(self, it)
        return it

    def _epoch_iter(self):
        # with_epoch(n): every iteration yields n items, continuing the
        # stream (across Sluice epochs) where the previous one stopped.
        cont = self.__dict__.get("_cont")
        if cont is None or cont[0] != os.getpid():
            cont = (os.getpid(), self._run(self._endless()))
            self.__dict__["_cont"] = cont
        return itertools.islice(cont[1], self._epoch)

    def _endless(self):
        while True:
            n = 0
            for s in self._source():
                n += 1
                yield s
            if n == 0:
                return

    def __len__(self):
        if self._length is None:
            raise TypeError("%s has no length; give one with .with_length(n)" % type(self).__name__)
        return self._length

    # -- stages ---------------------------------------------------------

    def shuffle(self, size, initial=100, rng=None, seed=None):
        """Shuffle within a buffer of size items (WebDataset's .shuffle)."""
        if size < 1:
            return self

        def stage(p, it):
            r = rng
            if r is None:
                r = random.Random(p._rng_seed() if seed is None else seed)
            return _shuffle(it, size, initial, r)

        return self._compose(stage)

    def decode(self, *handlers, only=None, partial=False, handler=None):
        """Decode fields: image specs ("pil", "rgb", "rgb8", "torchrgb",
        "l", ...) and handlers f(key, data) -> value or None."""
        dec = _wdstar.Decoder(handlers, only=only, partial=partial)
        return self._compose(lambda p, it: (dec(s) for s in it))

    def to_tuple(self, *keys, missing_is_error=True, handler=None):
        """Tuples of fields; "jpg;png" takes the first field present."""
        if len(keys) == 1 and " " in keys[0]:
            keys = tuple(keys[0].split())

        def stage(p, it):
            for s in it:
                yield tuple(_getfirst(s, k, missing_is_error) for k in keys)

        return self._compose(stage)

    def map(self, f, handler=None):
        """Apply f to every item."""
        return self._compose(lambda p, it: (f(s) for s in it))

    def map_tuple(self, *fs, handler=None):
        """Apply fs[i] to element i of every tuple (None: unchanged)."""

        def stage(p, it):
            for s in it:
                s = list(s)
                for i, f in enumerate(fs[: len(s)]):
                    if f is not None:
                        s[i] = f(s[i])
                yield tuple(s)

        return self._compose(stage)

    def map_dict(self, handler=None, **kw):
        """Apply kw[name] to the field name of every sample."""

        def stage(p, it):
            for s in it:
                s = dict(s)
                for k, f in kw.items():
                    if k in s:
                        s[k] = f(s[k])
                yield s

        return self._compose(stage)

    def select(self, predicate, **kw):
        """Keep the items for which predicate is true."""
        return self._compose(lambda p, it: (s for s in it if predicate(s)))

    def rename(self, keep=True, handler=None, **kw):
        """Rename fields: new="old" or new="old1;old2" (first present)."""

        def stage(p, it):
            for s in it:
                new = {k: _getfirst(s, v) for k, v in kw.items()}
                if keep:
                    used = {o for v in kw.values() for o in v.split(";")}
                    out = {k: v for k, v in s.items() if k not in used}
                else:
                    out = {k: v for k, v in s.items() if k.startswith("__")}
                out.update(new)
                yield out

        return self._compose(stage)

    def batched(self, batchsize, collation_fn=default_collation_fn, partial=True):
        """Group items into batches of batchsize (the last one short when
        partial)."""
        return self._compose(lambda p, it: _batched(it, batchsize, collation_fn, partial))

    def unbatched(self):
        """Split batches back into items."""
        return self._compose(lambda p, it: _unbatched(it))

    def with_epoch(self, nsamples=-1, nbatches=-1):
        """Make every iteration yield exactly n items, continuing the stream
        (endlessly, epoch after epoch) from where the last one stopped."""
        n = nsamples if nsamples is not None and nsamples >= 0 else nbatches
        p = copy.copy(self)
        p._epoch = None if n is None or n < 0 else int(n)
        p.__dict__.pop("_cont", None)
        return p

    def with_length(self, n, silent=False):
        """Give the pipeline a __len__ of n."""
        p = copy.copy(self)
        p._length = int(n)
        return p


class WebDataset(_Pipeline, _Base):
    """WebDataset(urls, ...) over the Sluice agent: see the module doc.

    urls is a brace pattern, a "::"-separated list, a list of URLs, or a
    directory (a store prefix) holding .tar shards. shardshuffle turns on
    Sluice's global seeded shuffle (any true value; its number is not a
    buffer size), shuffle_seed seeds it, cache_dir and cache_size are the
    node cache's directory and byte limit ("10gb" or a number), resampled
    makes iteration endless (epoch after epoch), batch_size is the training
    batch size the epoch's partition is made for (MosaicML's batch_size).
    Other keyword arguments go to sluice.StreamingDataset (for example
    agent_dir, predownload, num_canonical_nodes, shuffle_algo).

    index=False streams the tars without an index, in WebDataset's own
    sequential way (docs/format/wds.md, "no-index mode"): shards split by
    rank then by DataLoader worker, read whole, samples in archive order,
    the shard list shuffled per epoch by (shuffle_seed, epoch) with
    shardshuffle. Every sample comes once per epoch, but ranks get whole
    shards (unequal counts), there is no dataset[i] nor num_samples, and
    state_dict() resumes exactly only on the same ranks x workers
    (another shape raises InvalidArgumentError). Keyword arguments then:
    agent_dir, timeout, download_retry, download_timeout, fetch_size.
    """

    def __init__(self, urls, shardshuffle=None, shuffle_seed=None, cache_dir=None, cache_size=None,
                 resampled=False, batch_size=None, handler=None, nodesplitter=None, workersplitter=None,
                 empty_check=True, detshuffle=False, seed=None, index=True, **kw):
        if not index:
            self._init_sequence(urls, shardshuffle, shuffle_seed if shuffle_seed is not None else seed,
                                cache_dir, cache_size, resampled, batch_size, kw)
            return
        kw.setdefault("shuffle_seed", 9176 if shuffle_seed is None else int(shuffle_seed))
        if seed is not None and shuffle_seed is None:
            kw["shuffle_seed"] = int(seed)
        self.urls = urls
        self.resampled = bool(resampled)
        self._src = _TarSource(remote=_spec(urls), local=cache_dir, cache_limit=cache_size,
                               shuffle=bool(shardshuffle), batch_size=batch_size or 1, **kw)
        if empty_check and self._src.num_samples == 0:
            raise ValueError("WebDataset: %r holds no samples" % (urls,))

    def _init_sequence(self, urls, shardshuffle, seed, cache_dir, cache_size, resampled, batch_size, kw):
        from ._wdsseq import TarSequence

        allowed = {"agent_dir", "timeout", "download_retry", "download_timeout", "fetch_size"}
        bad = sorted(set(kw) - allowed)
        if bad:
            raise TypeError("WebDataset(index=False) does not take %s (it takes %s)" % (", ".join(bad), ", ".join(sorted(allowed))))
        self.urls = urls
        self.resampled = bool(resampled)
        self._src = TarSequence(_spec(urls), local=cache_dir, cache_limit=cache_size, shuffle=bool(shardshuffle),
                                shuffle_seed=9176 if seed is None else int(seed), batch_size=batch_size, **kw)

    def _source(self):
        if self.resampled:
            return self._resampled()
        return iter(self._src)

    def _resampled(self):
        while True:
            n = 0
            for s in self._src:
                n += 1
                yield s
            if n == 0:
                return

    def _rng_seed(self):
        try:
            from torch.utils.data import get_worker_info

            wi = get_worker_info()
            w = wi.id if wi is not None else 0
        except ImportError:  # pragma: no cover
            w = 0
        return hash((self._src.shuffle_seed, int(os.environ.get("RANK", "0")), w)) & 0xFFFFFFFF

    @property
    def num_samples(self):
        """Distinct samples in the dataset."""
        return self._src.num_samples

    def __getitem__(self, idx):
        """The raw sample idx of the whole dataset (before the pipeline)."""
        return self._src[idx]

    def metrics(self):
        """This rank's live input figures from the agent, in flat keys for
        wandb.log; see sluice.StreamingDataset.metrics."""
        return self._src.metrics()

    def state_dict(self, num_samples, from_beginning=False):
        """MosaicML's state dict after num_samples raw samples (all ranks),
        for load_state_dict; see sluice.StreamingDataset.state_dict."""
        return self._src.state_dict(num_samples, from_beginning)

    def load_state_dict(self, obj):
        """Resume exactly at the state's position on the next iteration."""
        self._src.load_state_dict(obj)


class WebLoader(_Pipeline):
    """WebDataset's WebLoader: a torch DataLoader whose output takes the same
    chain methods (.unbatched().shuffle(n).batched(n), .with_epoch(n))."""

    def __init__(self, *args, **kw):
        from torch.utils.data import DataLoader

        self.loader = DataLoader(*args, **kw)

    def _source(self):
        return iter(self.loader)

    def __len__(self):
        if self._length is not None:
            return self._length
        return len(self.loader)
