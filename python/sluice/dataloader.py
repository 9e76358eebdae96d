"""StreamingDataLoader: a torch DataLoader that checkpoints its position."""

from . import _world

try:
    import torch
    from torch.utils.data import DataLoader as _DataLoader
except ImportError:  # pragma: no cover - torch is optional
    torch = None
    _DataLoader = object


def _batch_len(batch):
    if torch is not None and isinstance(batch, torch.Tensor):
        return len(batch)
    if isinstance(batch, (list, tuple)):
        return _batch_len(batch[0]) if batch else 0
    if isinstance(batch, dict):
        for v in batch.values():
            return _batch_len(v)
        return 0
    try:
        return len(batch)
    except TypeError:
        return 1


class StreamingDataLoader(_DataLoader):
    """A torch DataLoader whose state_dict() is MosaicML's.

    It counts the samples this rank has yielded in the current epoch; the
    state dict scales that to all ranks, as MosaicML's does.
    """

    def __init__(self, *args, **kwargs):
        if torch is None:
            raise ImportError("StreamingDataLoader needs torch")
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0

    def __iter__(self):
        self.num_samples_yielded = 0
        for batch in super().__iter__():
            self.num_samples_yielded += _batch_len(batch)
            yield batch

    def state_dict(self):
        """The dataset's state dict at the samples yielded so far."""
        ds = self.dataset
        if not hasattr(ds, "state_dict"):
            return None
        world = _world.detect()
        num = self.num_samples_yielded * world["world_size"]
        if getattr(ds, "replication", None):
            num //= ds.replication
        return ds.state_dict(num, False)

    def load_state_dict(self, obj):
        """Resume from a state dict at the next iteration."""
        ds = self.dataset
        if hasattr(ds, "load_state_dict"):
            ds.load_state_dict(obj)
