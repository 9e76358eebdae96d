"""Large tensors out of DataLoader worker processes through reused memory
files (slots).

torch sends every tensor a worker returns through a fresh shared-memory
file: a tensor not yet in shared memory (what a custom collate_fn builds)
is copied into a new one, its pages faulted in anew each batch, and its
descriptor passed over a socket connection of its own; the main process
maps it again. install() makes this worker copy each large CPU tensor
into one of a few memory files it keeps (memfd_create: no name in
/dev/shm) and send only the slot's number, the file's descriptor the first
time. The main process maps a slot once and views the tensor there; when
the last view of it dies a finalizer marks the slot free in its first
byte, and the worker writes it again only then: a batch the user keeps is
never overwritten. With no free slot (all viewed) a tensor takes torch's
path, as it does once a worker's slots would pass 1 GiB together.
``SLUICE_WORKER_SLOTS`` sets the slots per worker (0 turns it off).

A tensor already in shared memory (torch's default_collate allocates its
output there in a worker) keeps torch's path: copying it into a slot
measured no cheaper. The received tensors are equal in dtype, shape and
values to torch's, and contiguous; views of one storage within a batch
arrive as separate copies (as the small-tensor path of sluice._worker
sends them).

Measured (python/bench/feed.py, 2 worker processes, a custom collate_fn
stacking 48 KB float32 arrays, batch 32, load ~11, alternated in one run):
torch's path 1794-2705 samples/s, 171-194 us CPU per sample (all
processes, the agent's included); slots 3080-3703 samples/s, 87-102 us.
"""

import mmap
import os
import threading
import weakref

DEFAULT_SLOTS = 16
MIN_BYTES = 64 << 10  # smaller tensors go by value (sluice._worker)
HEAD = 64  # the slot's state byte, then alignment padding
MAX_POOL_BYTES = 1 << 30  # a worker's slots together, at most
_MIN_SLOT = 1 << 20

_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool",
           "complex64", "complex128")


def _slots():
    v = os.environ.get("SLUICE_WORKER_SLOTS")
    if v is None or v == "":
        return DEFAULT_SLOTS
    try:
        return max(int(v), 0)
    except ValueError:
        raise ValueError("SLUICE_WORKER_SLOTS=%r is not an integer" % v) from None


class _Slot:
    __slots__ = ("id", "fd", "mem", "size", "sent", "view")

    def __init__(self, sid, size):
        self.id, self.size, self.sent = sid, size, False
        self.fd = os.memfd_create("sluice-batch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.mem = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        import torch

        self.view = torch.frombuffer(self.mem, dtype=torch.uint8, count=size - HEAD, offset=HEAD)


class _Pool:
    """A worker's slots."""

    def __init__(self, most):
        self.most = most
        self.slots = []
        self.bytes = 0
        self.lock = threading.Lock()

    def take(self, nbytes):
        with self.lock:
            for s in self.slots:
                if s.mem[0] == 0 and s.size - HEAD >= nbytes:
                    s.mem[0] = 1
                    return s
            if len(self.slots) >= self.most:
                return None
            size = _MIN_SLOT
            while size - HEAD < nbytes:
                size *= 2
            if self.bytes + size > MAX_POOL_BYTES:
                return None
            s = _Slot(len(self.slots) + 1, size)
            self.bytes += size
            s.mem[0] = 1
            self.slots.append(s)
            return s


_installed = None  # the pid install() ran in


def install(most=None):
    """Registers the slot reducer for large CPU tensors in this (worker)
    process, ahead of the one there (sluice._worker's small-tensor reducer
    or torch's). True when active; idempotent per process; a no-op
    without torch and numpy, memfd_create, or with 0 slots."""
    global _installed
    if _installed == os.getpid():
        return True
    most = _slots() if most is None else most
    if most <= 0 or not hasattr(os, "memfd_create"):
        return False
    try:
        import numpy  # noqa: F401 - the receiving side views slots with numpy
        import torch
        import torch.multiprocessing  # noqa: F401 - registers torch's reducers
        from multiprocessing.reduction import DupFd, ForkingPickler
    except ImportError:
        return False
    base = ForkingPickler._extra_reducers.get(torch.Tensor)
    if base is None:
        return False
    pool = _Pool(most)
    pid = os.getpid()
    strided = torch.strided
    dtypes = {getattr(torch, n) for n in _DTYPES if hasattr(torch, n)}

    def reduce_slot(t):
        # A process forked from this worker inherits the pool but not the
        # slots' mappings on the receiving side: it takes torch's path.
        if os.getpid() != pid:
            return base(t)
        if (type(t) is torch.Tensor and t.layout is strided and t.device.type == "cpu" and not t.requires_grad
                and t.dtype in dtypes and not t.is_quantized and not t.is_nested and not t.has_names()
                and not t.is_shared()):
            nbytes = t.numel() * t.element_size()
            if nbytes >= MIN_BYTES:
                try:
                    s = pool.take(nbytes)
                except OSError:  # no memory file to be had: torch's path
                    s = None
                if s is not None:
                    try:
                        s.view[:nbytes].view(t.dtype).view(t.shape).copy_(t.resolve_conj().resolve_neg())
                    except (RuntimeError, TypeError):
                        s.mem[0] = 0
                        return base(t)
                    fd = None
                    if not s.sent:
                        fd, s.sent = DupFd(s.fd), True
                    return _rebuild, ((pid, s.id), fd, s.size, nbytes, t.dtype, tuple(t.shape))
        return base(t)

    ForkingPickler.register(torch.Tensor, reduce_slot)
    _installed = pid
    return True


# -- the receiving (main) process --------------------------------------------

_maps = {}  # (worker pid, slot id) -> mmap
_maps_lock = threading.Lock()
received = 0  # tensors rebuilt from slots in this process (for tests)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free(mem, pid):
    # Only the process that rebuilt the tensor frees its slot: a child
    # forked from it that drops its copy of the tensor (or exits normally,
    # running the finalizers at exit) must not, while the parent still
    # views the slot.
    if os.getpid() != pid:
        return
    try:
        mem[0] = 0
    except ValueError:  # closed
        pass


def _rebuild(key, fd, size, nbytes, dtype, shape):
    """The tensor a worker wrote into its slot key (fd: the slot's file,
    the first time), viewing the slot until it dies."""
    import numpy as np
    import torch

    global received
    with _maps_lock:
        received += 1
        if fd is not None:
            f = fd.detach()
            try:
                m = mmap.mmap(f, size)
            finally:
                os.close(f)
            # Slots of workers that have exited are dropped (still mapped
            # while a tensor views them).
            for k in [k for k in _maps if k[0] != key[0] and not _alive(k[0])]:
                del _maps[k]
            _maps[key] = m
        else:
            m = _maps.get(key)
        if m is None:
            raise RuntimeError("sluice: a DataLoader worker's batch names memory slot %r, which this process has "
                               "not mapped" % (key,))
    if nbytes > size - HEAD:
        raise RuntimeError("sluice: a tensor of %d bytes in a slot of %d" % (nbytes, size))
    arr = np.frombuffer(m, np.uint8, count=nbytes, offset=HEAD)
    weakref.finalize(arr, _free, m, os.getpid())
    return torch.from_numpy(arr).view(dtype).view(shape)
