"""StreamingDataLoader: a torch DataLoader that checkpoints its position.

Counting samples. MosaicML's loader counts a batch as the length of its
first value (a dict's first value, a tensor's first dimension, else
``len(batch[0])``). That is right for the default collate of dict samples
but wrong for other shapes a user reaches: a batch left as a list of
samples (``collate_fn=lambda x: x``) counts the columns of its first
sample, and a tuple sample whose first field is a dict counts that dict's
keys. Sluice counts exactly instead: the loader wraps the collate function
(in the worker, where the samples are still a list) so that each batch
carries the number of samples it was made of, and unwraps it in the main
process before the batch is yielded. Where MosaicML's count is right the
two agree; where it is wrong, Sluice's is the one that resumes on the exact
sample. A batch that did not come through the wrapper (a collate function
replaced after construction) is counted MosaicML's way, see
_get_batch_size.
"""

from . import _encoded, _metrics, _world, _worker

try:
    import torch
    from torch.utils.data import DataLoader as _DataLoader
except ImportError:  # pragma: no cover - torch is optional
    torch = None
    _DataLoader = object


class _Counted:
    """A collated batch and the number of samples it holds, on its way from
    a DataLoader worker to the main process."""

    __slots__ = ("n", "batch")

    def __init__(self, n, batch):
        self.n = n
        self.batch = batch

    def __reduce__(self):
        return (_Counted, (self.n, self.batch))

    def pin_memory(self, device=None):
        """Pins the batch inside (torch's pin-memory thread calls this)."""
        from torch.utils.data._utils.pin_memory import pin_memory

        try:
            return _Counted(self.n, pin_memory(self.batch, device))
        except TypeError:  # torch without the device argument
            return _Counted(self.n, pin_memory(self.batch))


class _CountingCollate:
    """Wraps a collate function so that its batches carry their sample
    count. With automatic batching the function gets a list of samples;
    without (batch_size=None) it gets one sample.

    encoded: the dataset's encoded_tensors columns, which torch's default
    collate leaves as lists of tensors here (sluice._encoded), packed into
    one tensor each in a worker process (unpacked by the loader)."""

    def __init__(self, fn, batched, encoded=()):
        self.fn = fn
        self.batched = batched
        self.encoded = encoded

    def __call__(self, data):
        n = len(data) if self.batched else 1
        if self.encoded and self.batched and self.fn is _default_collate():
            return _Counted(n, _encoded.collate(data, self.fn, self.encoded, pack=_worker.in_worker()))
        return _Counted(n, self.fn(data))


def _default_collate():
    from torch.utils.data._utils.collate import default_collate

    return default_collate


def _mosaic_batch_size(batch):
    """MosaicML's count of a batch (StreamingDataLoader._get_batch_size)."""
    if isinstance(batch, dict) or (hasattr(batch, "keys") and hasattr(batch, "values")):
        for v in batch.values():
            return len(v)
        raise ValueError("Batch is empty")
    if torch is not None and isinstance(batch, torch.Tensor):
        return len(batch)
    return len(batch[0])


class StreamingDataLoader(_DataLoader):
    """A torch DataLoader whose state_dict() is MosaicML's.

    It counts the samples this rank has yielded in the current epoch
    (exactly, whatever the collate function returns; see the module
    docstring); the state dict scales that to all ranks, as MosaicML's does.

    Where it is equivalent, its workers run as threads of this process
    (sluice._feed; SLUICE_FEED=auto|threads|workers): the same batches in
    the same order, nothing pickled through worker pipes.
    """

    def __init__(self, *args, **kwargs):
        if torch is None:
            raise ImportError("StreamingDataLoader needs torch")
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0
        self._input = _metrics.InputTimer()
        fn = self.collate_fn
        self._encoded = tuple(getattr(self.dataset, "_encoded", None) or ())
        if not isinstance(fn, _CountingCollate):
            self.collate_fn = _CountingCollate(fn, self._auto_collation, self._encoded)

    def _get_batch_size(self, batch):
        """The number of samples in a batch, counted as MosaicML does. Used
        only for batches that do not carry their exact count."""
        return _mosaic_batch_size(batch)

    def __iter__(self):
        self.num_samples_yielded = 0
        timer = self._input
        timer.begin()
        src = self._batches()
        try:
            for batch in src:
                if timer.got():
                    self._note_first_batch(timer)
                yield batch
                timer.asked()
        finally:
            # A loop that breaks stops the workers now, not when the
            # generator is collected.
            src.close()

    def _batches(self):
        from . import _feed
        from .dataset import StreamingDataset

        if _feed.eligible(self, StreamingDataset):
            # The feed's workers are threads of this process (a worker
            # process checks for itself in StreamingDataset.__iter__).
            from .dataset import require_batch_size

            require_batch_size(self.dataset, self.num_workers)
            for n, batch in _feed.batches(self):
                self.num_samples_yielded += n
                yield batch
            return
        it = super().__iter__()
        try:
            for batch in it:
                if type(batch) is _Counted:
                    self.num_samples_yielded += batch.n
                    batch = batch.batch
                else:
                    self.num_samples_yielded += self._get_batch_size(batch)
                if self._encoded:
                    batch = _encoded.unpack(batch)
                yield batch
        except BaseException:
            # A worker's exception (or a KeyboardInterrupt), re-raised here, keeps the iterator in
            # a reference cycle (torch's reraise frame holds it): its
            # worker processes would live on until the garbage collector
            # ran, possibly in a later DataLoader's forked worker, which
            # then fails asserting in torch's __del__. Stop them now.
            if not self.persistent_workers and hasattr(it, "_shutdown_workers"):
                it._shutdown_workers()
            raise
        finally:
            del it

    def _note_first_batch(self, timer):
        """Hands the iteration's time to first batch to the dataset, whose
        metrics() reports it."""
        if timer.time_to_first_batch is not None:
            try:
                self.dataset._first_batch_seconds = timer.time_to_first_batch
            except AttributeError:  # a dataset that takes no attributes
                pass

    # -- input figures ----------------------------------------------------

    @property
    def input_wait(self):
        """Seconds the training loop waited for the latest batch: from
        asking for it (the for loop's next) to getting it."""
        return self._input.last_wait

    @property
    def input_wait_total(self):
        """Seconds the loop waited for batches, over every iteration."""
        return self._input.wait_total

    @property
    def input_wait_fraction(self):
        """The running input-wait fraction: waits over waits plus the time
        the loop spent between batches (its steps' compute)."""
        return self._input.fraction()

    @property
    def time_to_first_batch(self):
        """Seconds from the start of the latest iteration to its first
        batch (None before one)."""
        return self._input.time_to_first_batch

    def metrics(self, dataset=True):
        """Flat keys for wandb.log: this loop's input wait (latest step,
        total, mean, running fraction), steps and time to first batch,
        plus, with dataset and a dataset that has metrics(), the agent's
        figures for this rank (one request to the agent)."""
        out = {}
        if dataset and hasattr(self.dataset, "metrics"):
            out.update(self.dataset.metrics())
        out.update(self._input.figures())
        return out

    def state_dict(self):
        """The dataset's state dict at the samples yielded so far."""
        ds = self.dataset
        if not hasattr(ds, "state_dict"):
            return None
        world = _world.detect()
        num = self.num_samples_yielded * world["world_size"]
        if getattr(ds, "replication", None):
            # Ranks of one replica group share their samples.
            num //= ds.replication
        return ds.state_dict(num, False)

    def load_state_dict(self, obj):
        """Resume from a state dict at the next iteration."""
        ds = self.dataset
        if hasattr(ds, "load_state_dict"):
            ds.load_state_dict(obj)

    def __del__(self):
        """Stops the workers of an unfinished iteration (as MosaicML does)."""
        it = getattr(self, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            try:
                it._shutdown_workers()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass
