"""MosaicML's attributes describing where a StreamingDataset's shards and
samples lie: per shard (samples_per_shard, sample_offset_per_shard,
stream_per_shard) and per stream (num_streams, shards_per_stream,
shard_offset_per_stream, samples_per_stream, sample_offset_per_stream).

MosaicML holds them as numpy int64 arrays; so does Sluice when numpy is
importable (lists otherwise). They are read from the agent's open reply
(sluice.dataset keeps it as ``_info``): the shards' sample counts, and
each stream's sample count and first shard and sample. An agent of an
earlier release sends only the first; a dataset of one stream needs no
more, and for several the per-stream attributes raise AttributeError
naming the fix (restart the agent with this release's binary).
"""

try:
    import numpy as _np
except ImportError:  # numpy is optional
    _np = None


def _array(values):
    if _np is None:
        return list(values)
    return _np.asarray(list(values), dtype=_np.int64)


class Layout:
    """Mixin for a dataset whose ``_info`` is the agent's open reply."""

    def _streams_layout(self):
        """(first shard, first sample, samples) of each stream."""
        info = self._info
        shard_samples = info["shard_samples"]
        streams = info.get("streams") or ()
        if len(streams) <= 1:
            return [(0, 0, sum(shard_samples))]
        if any("first_shard" not in s for s in streams):
            raise AttributeError(
                "the sluice agent serving this dataset does not report where its %d streams lie (an agent of an "
                "earlier release): restart it with this release's binary" % len(streams))
        return [(s["first_shard"], s["first_sample"], s["samples"]) for s in streams]

    @property
    def samples_per_shard(self):
        """Sample count of each shard (int64 array, as MosaicML's)."""
        return _array(self._info["shard_samples"])

    @property
    def sample_offset_per_shard(self):
        """Global index of each shard's first sample."""
        out, n = [], 0
        for k in self._info["shard_samples"]:
            out.append(n)
            n += k
        return _array(out)

    @property
    def num_streams(self):
        """Number of streams (1 for a dataset of remote/local)."""
        return len(self._streams_layout())

    @property
    def shard_offset_per_stream(self):
        """Global index of each stream's first shard."""
        return _array(s[0] for s in self._streams_layout())

    @property
    def shards_per_stream(self):
        """Number of shards of each stream."""
        firsts = [s[0] for s in self._streams_layout()] + [len(self._info["shard_samples"])]
        return _array(b - a for a, b in zip(firsts, firsts[1:]))

    @property
    def sample_offset_per_stream(self):
        """Global index of each stream's first sample."""
        return _array(s[1] for s in self._streams_layout())

    @property
    def samples_per_stream(self):
        """Underlying (not resampled) sample count of each stream."""
        return _array(s[2] for s in self._streams_layout())

    @property
    def stream_per_shard(self):
        """The stream each shard belongs to."""
        out = []
        for sid, n in enumerate(self.shards_per_stream):
            out += [sid] * int(n)
        return _array(out)
