"""Cheaper batches out of torch DataLoader workers.

A DataLoader worker sends each collated batch to the main process through a
pipe, pickled with ``multiprocessing``'s ForkingPickler. torch's reducer moves
every tensor into a fresh shared-memory file and passes its descriptor over
a second socket (the ``file_descriptor`` strategy): two extra round trips,
a thread wake-up in the worker and a mapping per tensor. For the small tensors
a batch of small samples holds (a column of 64 ints is 512 bytes) that costs
far more than the data: measured, it capped a 2-worker DataLoader at ~60k
samples/s of 200-byte samples, all of it spent in the main process.

install_small_tensor_pickling() makes the worker send plain CPU tensors of at
most ``limit`` bytes by value inside the pickle; larger ones keep torch's
shared-memory path. The tensors the main process receives are equal in
dtype, shape and values; they are ordinary (not shared-memory) tensors.
It changes only the worker process it runs in. ``SLUICE_SMALL_TENSOR_BYTES``
sets the limit (0 turns it off).
"""

import os

DEFAULT_LIMIT = 64 << 10


def _limit():
    v = os.environ.get("SLUICE_SMALL_TENSOR_BYTES")
    if v is None or v == "":
        return DEFAULT_LIMIT
    try:
        return max(int(v), 0)
    except ValueError:
        raise ValueError("SLUICE_SMALL_TENSOR_BYTES=%r is not an integer" % v) from None


def _rebuild_small(data, dtype, shape):
    """Rebuilds a tensor sent by _reduce_small (data: a bytearray)."""
    import torch

    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)


def install_small_tensor_pickling(limit=None):
    """Registers the small-tensor reducer in this (worker) process.

    Returns True when it is active. Idempotent; a no-op without torch or
    with a limit of 0.
    """
    if limit is None:
        limit = _limit()
    if limit <= 0:
        return False
    try:
        import torch
        from multiprocessing.reduction import ForkingPickler
    except ImportError:
        return False
    base = ForkingPickler._extra_reducers.get(torch.Tensor)
    if base is None:
        # torch.multiprocessing registers its reducers on import.
        import torch.multiprocessing  # noqa: F401

        base = ForkingPickler._extra_reducers.get(torch.Tensor)
        if base is None:
            return False
    if getattr(base, "_sluice_small", False):
        return True
    strided = torch.strided

    def reduce_small(t):
        if (
            type(t) is torch.Tensor
            and t.layout is strided
            and t.device.type == "cpu"
            and not t.requires_grad
            and not t.is_quantized
            and not t.is_nested
            and not t.has_names()
            and t.numel() * t.element_size() <= limit
        ):
            try:
                c = t.resolve_conj().resolve_neg().contiguous()
                data = bytearray(c.reshape(-1).view(torch.uint8).numpy()) if c.numel() else bytearray()
            except (ImportError, RuntimeError, TypeError):
                return base(t)  # no numpy, or a dtype without a byte view
            return _rebuild_small, (data, t.dtype, tuple(t.shape))
        return base(t)

    reduce_small._sluice_small = True
    ForkingPickler.register(torch.Tensor, reduce_small)
    return True


def in_worker():
    """Whether this process is a torch DataLoader worker."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return False
    return get_worker_info() is not None


def num_workers():
    """The number of workers of the DataLoader this worker process belongs
    to (0 outside a worker)."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return 0
    info = get_worker_info()
    return info.num_workers if info is not None else 0


def round_token():
    """A name for the DataLoader iteration this worker belongs to, the same
    in each of its workers: the iteration's base seed (torch gives worker w
    the seed base + w). Outside a worker, each iteration is its own.

    The agent keeps a rank's workers in one epoch by it: a worker that
    begins with the token of the rank's current round joins that round's
    epoch, any other starts the next.
    """
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        info = None
    else:
        info = get_worker_info()
    if info is None:
        return "iter-" + os.urandom(8).hex()
    return "seed-%d-%d" % (os.getppid(), info.seed - info.id)


_watching = None  # the pid whose parent this process watches


def parent_pid():
    """The pid of the process that started this one.

    A multiprocessing child (every DataLoader worker) knows it from its
    start: the parent records its own pid in the Process object before
    the child exists. os.getppid() read later is wrong when the parent has
    already died (it is then the reaper's pid), and a watch keyed on it
    would never fire; torch's own watchdog has that race while a
    worker_init_fn runs. Falls back to os.getppid() elsewhere.
    """
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid:
        return parent.pid
    return os.getppid()


def watch_parent(interval=1.0):
    """Ends this (DataLoader worker) process when its parent dies.

    torch's own watchdog runs only between fetches, and a worker that
    leaves after its parent died can block for ever at exit flushing its
    result queue into a pipe no one reads (its siblings hold the read end).
    A daemon thread checks the parent every interval seconds and leaves
    with os._exit. Idempotent per process.
    """
    global _watching
    pid = os.getpid()
    if _watching == pid:
        return
    _watching = pid
    parent = parent_pid()

    def run():
        import time

        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(1)

    import threading

    threading.Thread(target=run, name="sluice-parent-watch", daemon=True).start()
