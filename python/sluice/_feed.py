"""The in-process feed: a StreamingDataLoader's batches without worker
processes.

A torch DataLoader with workers moves every collated batch from a worker
process to the training process through a pipe: pickled, and each tensor
through a fresh shared-memory file. For large samples that copy, the
pickling and the process hops cost more CPU than reading the data did: the
data is already in the node's cache, mapped read-only, one memcpy away.

The feed runs the DataLoader's workers as threads of the training process
instead. Virtual worker w of W asks the agent for exactly what DataLoader
worker w would ask (worker w of W of this rank), decodes and collates its
batches (torch, numpy and Pillow release the GIL while they work), and the
training loop takes them round-robin over the workers, an exhausted worker
skipped: the order torch's in-order DataLoader yields, sample for sample.
Each worker keeps ``prefetch_factor`` batches ready (two by default), so the
next batch is prepared while the current one trains. With
``pin_memory=True`` (and CUDA) batches are pinned by the worker thread.

Nothing crosses a process boundary, so nothing is put in shared memory: a
SIGKILL of the training process or of the agent leaves no residue.

``SLUICE_FEED`` chooses: ``threads`` always uses the feed where it can,
``workers`` never (torch's worker processes), unset or ``auto`` uses it
where it is known to be equivalent (see ``eligible``).
"""

import os
import queue
import threading

from . import _encoded, _shm, _world

# How long a worker thread waits on a full queue before it looks whether
# the loop has stopped (seconds); every wait has this bound.
_POLL = 0.2

_END = object()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc):
        self.exc = exc


def mode():
    """The SLUICE_FEED setting: 'auto', 'threads' or 'workers'."""
    v = (os.environ.get("SLUICE_FEED") or "auto").strip().lower()
    if v not in ("auto", "threads", "workers"):
        raise ValueError("SLUICE_FEED=%r: want auto, threads or workers" % v)
    return v


def eligible(loader, dataset_cls):
    """Whether loader's iteration can run on the feed with the same result.

    The feed replaces torch's worker processes only: the dataset must be a
    StreamingDataset whose iteration is Sluice's own (a subclass that
    overrides __iter__, or that expects a worker_init_fn or another
    multiprocessing context, keeps the processes), fed through automatic
    batching. With SLUICE_FEED=auto the loader must also have workers
    (num_workers=0 keeps torch's synchronous loop), torch's default
    collate function (a user's collate may hold the GIL in Python code,
    where processes are faster), and a dataset whose class does not
    override __getitem__ or get_item: that is the user's code for each
    sample (MosaicML's way to add transforms), which torch runs in worker
    processes, where get_worker_info() names the worker and each worker's
    torch and Python RNGs are seeded from the loader's, so augmentation
    repeats under torch.manual_seed; in threads it would see no worker,
    share the training process's RNGs in thread order (different on every
    run) and hold the GIL. SLUICE_FEED=threads takes any.
    """
    m = mode()
    if m == "workers":
        return False
    ds = loader.dataset
    if not isinstance(ds, dataset_cls):
        return False
    t = type(ds)
    if t.__iter__ is not dataset_cls.__iter__ or t._batches is not dataset_cls._batches:
        return False
    if loader.worker_init_fn is not None or loader.multiprocessing_context is not None:
        return False
    if not loader._auto_collation or loader.batch_size is None:
        return False
    if m == "auto":
        # num_workers=0 asks for torch's synchronous in-process loop: keep it.
        if loader.num_workers == 0:
            return False
        from torch.utils.data._utils.collate import default_collate

        fn = getattr(loader.collate_fn, "fn", loader.collate_fn)
        if fn is not default_collate:
            return False
        from .dataset import routes_items

        if routes_items(ds, dataset_cls):
            return False
    return True


def batches(loader):
    """Yields (n, batch) as loader's DataLoader iteration would yield its
    batches (n: the samples in it), from threads of this process."""
    ds = loader.dataset
    nw = max(loader.num_workers, 1)
    bs = loader.batch_size
    collate = getattr(loader.collate_fn, "fn", loader.collate_fn)
    depth = max(loader.prefetch_factor or 2, 1) if loader.num_workers > 0 else 2
    pin = bool(loader.pin_memory)
    if pin:
        import torch

        pin = torch.cuda.is_available()
    base = _world.detect()
    worlds = [dict(base, worker=w, num_workers=nw) for w in range(nw)]
    if ds._info is None:
        ds._connection(worlds[0])
    extra = {"resume": ds._resume} if ds._resume is not None else {}
    # One name for this iteration's virtual workers (the agent's epoch
    # round, as a worker process's base seed names its DataLoader's).
    extra["round"] = "feed-" + os.urandom(8).hex()
    shm = _use_shm(ds, collate)
    collate = _encoded_collate(ds, collate, pin)
    stop = threading.Event()
    queues = [queue.Queue(maxsize=depth) for _ in range(nw)]
    threads = []
    try:
        # Begin every worker's iteration before any is read: the agent
        # learns at once what the whole rank will need.
        begun = []
        try:
            for w in range(nw):
                begun.append(ds._begin(worlds[w], extra))
        except BaseException:
            for conn, _ in begun:
                conn.close()
            raise
        for w in range(nw):
            conn, b = begun[w]
            t = threading.Thread(target=_work, name="sluice-feed-%d" % w, daemon=True,
                                 args=(ds, worlds[w], conn, b, bs, loader.drop_last, collate, pin, queues[w], stop,
                                       shm and _shm.supports(conn)))
            threads.append(t)
            t.start()
        active = list(range(nw))
        while active:
            nxt = []
            for w in active:
                item = _take(queues[w], threads[w])
                if item is _END:
                    continue
                if isinstance(item, _Failure):
                    raise item.exc
                nxt.append(w)
                yield item
            active = nxt
    finally:
        stop.set()
        for q in queues:
            _drain(q)
        for t in threads:
            t.join(timeout=30)


def _take(q, t):
    """The next item of a worker's queue; a thread that died without a
    word (it cannot: _work reports everything) counts as exhausted."""
    while True:
        try:
            return q.get(timeout=_POLL)
        except queue.Empty:
            if not t.is_alive():
                try:
                    return q.get_nowait()
                except queue.Empty:
                    return _END


def _drain(q):
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


def _put(q, item, stop):
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL)
            return True
        except queue.Full:
            continue
    return False


def _use_shm(ds, collate):
    """Whether the workers take their batches from the agent's
    shared-memory feed (sluice._shm): torch's default collate (the feed
    collates as it does) over a dataset the feed serves equivalently."""
    from torch.utils.data._utils.collate import default_collate

    from .dataset import StreamingDataset

    return collate is default_collate and _shm.eligible(ds, StreamingDataset)


def _encoded_collate(ds, collate, pin):
    """collate for the workers that read samples (not the shared-memory
    feed): torch's default collate keeps encoded_tensors columns as lists
    of tensors (sluice._encoded), pinned as one buffer each with pin."""
    from torch.utils.data._utils.collate import default_collate

    cols = getattr(ds, "_encoded", ())
    if not cols or collate is not default_collate:
        return collate

    def fn(samples):
        return _encoded.collate(samples, default_collate, cols, pin=pin)

    return fn


def _work_shm(ds, world, conn, begun, bs, drop_last, pin, q, stop):
    """One virtual worker on the shared-memory feed: the agent's batches
    of (rank, worker), collated as default_collate would."""
    from torch.utils.data._utils.collate import default_collate

    schema = ds._info["schemas"][0]
    collator = _shm.Collator(schema, ds.allow_unsafe_types, default_collate, getattr(ds, "_encoded", ()), pin)
    it = _shm.iterate(ds, world, conn, begun, bs, _shm.transforms(ds, conn))
    try:
        for b in it:
            if b.n < bs and drop_last:
                break
            v = collator(b)
            if pin:
                from torch.utils.data._utils.pin_memory import pin_memory

                v = pin_memory(v)
            if not _put(q, (b.n, v), stop):
                return
            if stop.is_set():
                return
        _put(q, _END, stop)
    except BaseException as e:  # noqa: BLE001 - handed to the training loop
        _put(q, _Failure(e), stop)
    finally:
        it.close()
        conn.close()


def _work(ds, world, conn, begun, bs, drop_last, collate, pin, q, stop, shm=False):
    """One virtual worker: the samples of (rank, worker) in batches."""
    if shm:
        return _work_shm(ds, world, conn, begun, bs, drop_last, pin, q, stop)
    it = ds._iterate(world, conn, begun, False)
    try:
        buf = []
        for sample in it:
            buf.append(sample)
            if len(buf) == bs:
                if not _put(q, _batch(buf, collate, pin), stop):
                    return
                buf = []
            if stop.is_set():
                return
        if buf and not drop_last:
            if not _put(q, _batch(buf, collate, pin), stop):
                return
        _put(q, _END, stop)
    except BaseException as e:  # noqa: BLE001 - handed to the training loop
        _put(q, _Failure(e), stop)
    finally:
        it.close()
        conn.close()  # a generator that never started has not closed it


def _batch(samples, collate, pin):
    b = collate(samples)
    if pin:
        from torch.utils.data._utils.pin_memory import pin_memory

        b = pin_memory(b)
    return (len(samples), b)
