"""LocalDataset: MosaicML's map-style dataset over shards already on local
disk (streaming.LocalDataset), served by the node's agent."""

from . import dataset as _dataset

try:
    from torch.utils.data import Dataset as _MapBase
except ImportError:  # torch is optional

    class _MapBase:
        pass


class LocalDataset(_MapBase):
    """A map-style (torch Dataset) view of a dataset whose index.json and
    shards are in ``local`` (under ``split`` when given), as MosaicML's
    LocalDataset: ``len(ds)`` is the sample count, ``ds[i]`` /
    ``ds.get_item(i)`` a sample dict, ``ds[slice | list | array]`` lists of
    them; use it with any torch sampler. Random access goes through the
    agent (its records read from the shard files in place). Keyword-only
    extras: ``agent_dir`` and ``timeout`` as StreamingDataset's."""

    def __init__(self, local, split=None, *, agent_dir=None, timeout=30.0):
        self.local = local
        self.split = split or ""
        self._ds = _dataset.StreamingDataset(local=local, split=split or None, agent_dir=agent_dir, timeout=timeout)

    @property
    def num_samples(self):
        """Samples in the dataset."""
        return self._ds.num_samples

    @property
    def size(self):
        """Same as num_samples (MosaicML's Array.size)."""
        return self._ds.num_samples

    def __len__(self):
        return self._ds.num_samples

    def get_item(self, sample_id):
        """The sample of global index sample_id."""
        return self._ds.get_item(sample_id)

    def __getitem__(self, idx):
        return _dataset.getitem(self, idx)
