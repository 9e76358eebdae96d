"""The shared-memory feed: batches the agent assembles in memory files.

Over a connection of protocol 2, a ``feed`` request asks the agent for an
iteration's next batch of exactly ``batch_size`` samples (fewer only at its
end). The agent reads the records, splits them into columns and writes the
batch into a fresh anonymous memory file (``memfd_create``) whose descriptor
comes with the reply (SCM_RIGHTS): fixed-size columns (numeric scalars,
fixed-shape ndarrays) collated as one ``N × shape`` array, variable-size
ones as offsets and bytes (see agentapi/feed.go for the layout).

The file has no name: nothing appears in /dev/shm, and it lives exactly as
long as the mapping here (the agent closes its descriptor once the reply is
sent). A SIGKILL of the training process or of the agent leaves nothing
behind, and the agent holds no lease for a batch once it is sent.

``Collator`` turns a batch into what torch's default_collate makes of the
same samples, with zero copies for the collated columns (torch tensors
viewing the slot, which they keep from reuse) and for encoded_tensors
columns (a list of 1-D uint8 tensors, one torch.split of the column's
bytes in the slot; sluice._encoded); ``samples`` yields per-sample dicts
equal to what the mapped-shard path decodes.

``SLUICE_SHM`` chooses: ``auto`` (default) lets StreamingDataLoader's
threaded feed take the agent's batches where that measured faster (a
fixed-shape ndarray column, or an in-agent column transform: decode_images
where the agent decodes them, see agent_decodes) or where the batch's
column views them (encoded_tensors); ``on`` uses
them wherever they are equivalent, also per sample in DataLoader worker
processes; ``off`` never.
"""

import mmap
import os
import struct

from . import _decode, _encoded, errors

FEED_VERSION = 2
ALIGN = 64

_DTYPE_SIZE = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float16": 2, "float32": 4, "float64": 8,
}
_U64 = struct.Struct("<Q")


def mode():
    """The SLUICE_SHM setting: 'auto', 'on' or 'off'."""
    v = (os.environ.get("SLUICE_SHM") or "auto").strip().lower()
    if v not in ("auto", "on", "off"):
        raise ValueError("SLUICE_SHM=%r: want auto, on or off" % v)
    return v


# Features an agent announces in its hello (agentapi.Feature*): the
# decoder of its "image" transform.
IMAGE_GO = "image-decoder:go"
IMAGE_LIBJPEG = "image-decoder:libjpeg-turbo"


def image_mode():
    """The SLUICE_IMAGE_DECODE setting: 'auto', 'agent' or 'pil'."""
    v = (os.environ.get("SLUICE_IMAGE_DECODE") or "auto").strip().lower()
    if v not in ("auto", "agent", "pil"):
        raise ValueError("SLUICE_IMAGE_DECODE=%r: want auto, agent or pil" % v)
    return v


def agent_decodes(ds, conn=None):
    """Whether ds's decode_images columns are decoded by the agent (its
    "image" transform, through the feed) rather than with PIL in this
    process. auto takes the faster one measured (python/bench/jpeg.py, 2
    cores, quiet): an agent built with libjpeg-turbo (103% of the decode
    ceiling) over PIL in the threaded feed (88%), PIL over the pure-Go
    agent (34%) and over an agent that does not say which decoder it has
    (an older release). Other feed transforms are always the agent's."""
    if not getattr(ds, "_feed_transforms", None):
        return False
    if not getattr(ds, "_decode_images", None):
        return True
    m = image_mode()
    if m != "auto":
        return m == "agent"
    conn = conn if conn is not None else getattr(ds, "_conn", None)
    return IMAGE_LIBJPEG in getattr(conn, "features", ())


def transforms(ds, conn=None):
    """The feed transforms to send for an iteration on conn: None where
    the images are decoded here (see agent_decodes)."""
    return ds._feed_transforms if agent_decodes(ds, conn) else None


def seeded(ds, transforms, shuffle_seed):
    """transforms with each DecodeImage column's draws seeded by
    shuffle_seed, the seed the iteration plays (a resumed state's, which
    MosaicML keeps over the constructor's that ds._feed_transforms were
    made with), so that a resumed run draws the interrupted run's crops
    and flips. Other transforms are sent as they are."""
    images = {d.column: d for d in getattr(ds, "_decode_images", None) or ()}
    out = []
    for t in transforms:
        d = images.get(t.get("column"))
        out.append(d.feed_transform(shuffle_seed) if d is not None and t.get("transform") == "image" else t)
    return out


def eligible(ds, cls):
    """Whether ds's iteration can come through the feed with the same
    samples: Sluice's own iteration and __getitem__ (a subclass that
    overrides __getitem__ sees every sample), MDS shards whose schemas
    share columns and encodings (a batch holds one layout), and numpy.
    Under a cache_limit the agent copies each sample's record out of its
    shard as it takes it and drops the shard's lease at once (agent/feed.go
    copyRecords), so a batch that spans more shards than the limit holds
    never pins them all."""
    if mode() == "off" or ds._info is None:
        return False
    from .dataset import routes_items

    t = type(ds)
    if routes_items(ds, cls) or t.__iter__ is not cls.__iter__ or t._batches is not cls._batches:
        return False
    if getattr(ds, "_decode_images", None) and not agent_decodes(ds):
        # Images decoded here: with PIL on the mapped-shard path.
        return False
    schemas = ds._info.get("schemas") or []
    if not schemas:
        return False
    first = schemas[0]
    for s in schemas:
        if s.get("format", "mds") != "mds":
            return False
        if s.get("column_names") != first.get("column_names") or s.get("column_encodings") != first.get("column_encodings"):
            return False
    try:
        import numpy  # noqa: F401 - batches are numpy views of their slot
    except ImportError:
        return False
    if mode() == "auto" and not agent_decodes(ds) and not getattr(ds, "_encoded", ()):
        # Where it measured faster (python/bench/feed.py): a fixed-shape
        # ndarray column, delivered collated with no copy in Python, or
        # encoded_tensors, views of the batch's memory (python/bench/
        # encoded.py). For bytes and strings the values must be copied
        # into Python objects anyway, and the mapped shard is one copy
        # away already.
        sizes = first.get("column_sizes") or []
        encs = first.get("column_encodings") or []
        if not any(e.startswith("ndarray:") and sz is not None for e, sz in zip(encs, sizes)):
            return False
    return True


def recv_reply(conn, want):
    """Reads one reply from conn and the descriptors that came with it:
    (header dict, [fds]). The caller owns the descriptors."""
    fds = []
    try:
        reply, _ = conn.recv(want, fds)
    except BaseException:
        _close_fds(fds)
        raise
    return reply, fds


def _close_fds(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _int(v, what):
    if type(v) is not int:
        raise errors.ProtocolError("feed batch: %s is %r, not an integer" % (what, v))
    return v


def _inside(size, off, n, what):
    if off < 0 or n < 0 or off > size or n > size - off:
        raise errors.ProtocolError("feed region %s [%d, +%d) outside the batch's %d bytes" % (what, off, n, size))


def check_layout(hdr, mem):
    """Checks a feed batch header against its memory (mirrors Go's
    agentapi.ParseFeed): every region inside mem, fixed columns of N
    values of dtype size × shape bytes, variable offsets ascending from 0
    to the column's size. Returns the list of columns, each a tuple
    (name, encoding, kind, dtype, shape, offset, stride, offsets)."""
    size = len(mem)
    n = _int(hdr.get("n", 0), "n")
    if n < 0 or n > size // 8 + 1:
        raise errors.ProtocolError("feed batch of %d samples" % n)
    if _int(hdr.get("size", 0), "size") != size:
        raise errors.ProtocolError("feed batch announces %r bytes, its memory has %d" % (hdr.get("size"), size))
    _inside(size, _int(hdr.get("samples", 0), "samples"), 8 * n, "sample ids")
    cols = hdr.get("columns") or []
    if not isinstance(cols, list):
        raise errors.ProtocolError("feed batch: columns is not a list")
    out, seen = [], set()
    for c in cols:
        if not isinstance(c, dict):
            raise errors.ProtocolError("feed batch: a column is not an object")
        name, kind = c.get("name"), c.get("kind")
        if not isinstance(name, str) or name in seen:
            raise errors.ProtocolError("feed column name %r repeats or is not a string" % (name,))
        seen.add(name)
        enc = c.get("encoding")
        if not isinstance(enc, str):
            raise errors.ProtocolError("feed column %r: encoding %r" % (name, enc))
        off = _int(c.get("offset", 0), name + " offset")
        csize = _int(c.get("size", 0), name + " size")
        if kind == "fixed":
            dt = c.get("dtype")
            if not isinstance(dt, str) or dt not in _DTYPE_SIZE:
                raise errors.ProtocolError("feed column %r: dtype %r" % (name, dt))
            shape = c.get("shape") or []
            if not isinstance(shape, list):
                raise errors.ProtocolError("feed column %r: shape %r" % (name, shape))
            stride = _DTYPE_SIZE[dt]
            for d in shape:
                if _int(d, name + " shape") < 0:
                    raise errors.ProtocolError("feed column %r: shape %r" % (name, shape))
                stride *= d
            if stride != _int(c.get("stride", 0), name + " stride") or stride * n != csize:
                raise errors.ProtocolError("feed column %r: stride %r and size %d for %d values of %s%r"
                                           % (name, c.get("stride"), csize, n, dt, shape))
            _inside(size, off, csize, name)
            out.append((name, enc, kind, dt, tuple(shape), off, stride, None))
        elif kind == "var":
            index = _int(c.get("index", 0), name + " index")
            _inside(size, index, 8 * (n + 1), name + " offsets")
            _inside(size, off, csize, name)
            offs = list(struct.unpack_from("<%dQ" % (n + 1), mem, index))
            if offs[0] != 0 or offs[-1] != csize or any(offs[j] > offs[j + 1] for j in range(n)):
                raise errors.ProtocolError("feed column %r: offsets out of order" % name)
            out.append((name, enc, kind, None, None, off, 0, offs))
        else:
            raise errors.ProtocolError("feed column %r: kind %r" % (name, kind))
    return out


class Batch:
    """One feed batch over its mapped memory file."""

    __slots__ = ("n", "mem", "columns", "ids_off")

    def __init__(self, hdr, mem):
        self.columns = check_layout(hdr, mem)
        self.n = hdr["n"]
        self.mem = mem
        self.ids_off = hdr.get("samples", 0)

    def ids(self):
        """The batch's global sample IDs."""
        return list(struct.unpack_from("<%dq" % self.n, self.mem, self.ids_off))

    def values(self, k):
        """Column k's encoded values as memoryview slices."""
        name, enc, kind, dt, shape, off, stride, offs = self.columns[k]
        mv = memoryview(self.mem)
        if kind == "fixed":
            return [mv[off + i * stride : off + (i + 1) * stride] for i in range(self.n)]
        return [mv[off + offs[i] : off + offs[i + 1]] for i in range(self.n)]


class Slots:
    """The memory files (slots) of one iteration's connection, mapped.

    A batch's memory is a numpy view of its slot; when the last view of it
    dies (the batch and every tensor made from it), a finalizer puts the
    slot on the free list, and the next request gives it back to the agent
    for reuse. A slot the user still views is never written again.
    """

    def __init__(self):
        self.maps = {}
        self.freed = []  # appended by finalizers (any thread)

    def take_freed(self):
        out = []
        while self.freed:
            out.append(self.freed.pop())
        return out

    def batch(self, hdr, fds):
        """Maps a feed reply's batch (closing the descriptors); None for an
        empty reply."""
        import weakref

        import numpy as np

        try:
            for r in hdr.get("retired") or ():
                self.maps.pop(r, None)  # unmapped once unreferenced
            n = hdr.get("n", 0)
            if not n:
                if fds:
                    raise errors.ProtocolError("an empty feed batch came with %d descriptors" % len(fds))
                return None
            slot = hdr.get("slot", 0)
            if type(slot) is not int or slot < 0:
                raise errors.ProtocolError("feed batch in slot %r" % (slot,))
            size = hdr.get("size")
            if type(size) is not int or size <= 0:
                raise errors.ProtocolError("feed batch of %r bytes" % (size,))
            if fds:
                if len(fds) != 1 or (slot and slot in self.maps):
                    raise errors.ProtocolError("a feed batch in slot %d came with %d descriptors" % (slot, len(fds)))
                fsize = os.fstat(fds[0]).st_size
                if fsize < size:
                    raise errors.ProtocolError("feed memory file has %d bytes, the batch %d" % (fsize, size))
                # Shared and writable: only the agent writes it otherwise,
                # and only once it is freed here. Populated at once.
                m = mmap.mmap(fds[0], fsize, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                              prot=mmap.PROT_READ | mmap.PROT_WRITE)
                if slot:
                    self.maps[slot] = m
            else:
                m = self.maps.get(slot)
                if m is None or not slot:
                    raise errors.ProtocolError("feed batch in slot %d, which this client has not mapped" % slot)
                if len(m) < size:
                    raise errors.ProtocolError("feed batch of %d bytes in a slot of %d" % (size, len(m)))
        finally:
            _close_fds(fds)
        base = np.frombuffer(m, np.uint8, count=size)
        b = Batch(hdr, base)
        if slot:
            weakref.finalize(base, self.freed.append, slot)
        return b


_NP = {"int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8", "uint8": "u1",
       "float16": "f2", "float32": "f4", "float64": "f8"}
_TORCH_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")


class Collator:
    """Builds default_collate's batch from feed batches of one schema.

    encoded: the columns delivered as lists of 1-D uint8 tensors that view
    the batch's memory (sluice._encoded); with pin, those are copied into
    one pinned buffer per column instead (the rest is pinned by the
    caller)."""

    def __init__(self, schema, allow_unsafe, collate, encoded=(), pin=False):
        self.collate = collate
        self.decoders = [_decode.column_decoder(e, allow_unsafe) for e in schema["column_encodings"]]
        self.encodings = list(schema["column_encodings"])
        self.encoded = frozenset(encoded)
        self.pin = pin
        import torch

        self.torch = torch
        self.tdtype = {n: getattr(torch, n) for n in _TORCH_DTYPES}

    def __call__(self, b):
        """The collated batch: a dict, in column order."""
        torch = self.torch
        out = {}
        for k, (name, enc, kind, dt, shape, off, stride, offs) in enumerate(b.columns):
            if name in self.encoded:
                # Views of the slot, no copy: the tensors (and any view of
                # them) keep it from reuse (Slots).
                if offs is None:
                    offs = [i * stride for i in range(b.n + 1)]
                flat = torch.from_numpy(b.mem[off : off + offs[-1]])
                if self.pin:
                    flat = flat.pin_memory()
                out[name] = _encoded.split(flat, offs)
                continue
            if kind == "fixed" and dt in self.tdtype:
                # The agent collates only numeric scalars, "int", fixed
                # ndarrays and transform outputs: default_collate gives
                # these a tensor of this dtype and shape (N, *shape).
                if stride == 0:
                    t = torch.empty((b.n,) + shape, dtype=self.tdtype[dt])
                else:
                    # A view of the slot: the tensor keeps it from reuse.
                    t = torch.from_numpy(b.mem[off : off + b.n * stride].view("<" + _NP[dt]).reshape((b.n,) + shape))
                out[name] = t
                continue
            dec = self.decoders[k] if enc == self.encodings[k] else _decode.column_decoder(enc, False)
            out[name] = self.collate([dec(v) for v in b.values(k)])
        return out


def samples(b, decoders, encodings):
    """The batch's samples as the mapped-shard path decodes them: dicts of
    column values (copies: the slot is reused once the batch is freed)."""
    cols = []
    for k, c in enumerate(b.columns):
        name, enc = c[0], c[1]
        dec = decoders[k] if enc == encodings[k] else _decode.column_decoder(enc, False)
        ranged = getattr(dec, "ranged", None)
        if ranged is not None:
            if c[2] == "fixed":
                vals = [ranged(b.mem, c[5] + i * c[6], c[5] + (i + 1) * c[6]) for i in range(b.n)]
            else:
                vals = [ranged(b.mem, c[5] + c[7][i], c[5] + c[7][i + 1]) for i in range(b.n)]
        else:
            vals = [dec(v) for v in b.values(k)]
        cols.append((name, vals))
    for i in range(b.n):
        yield {name: vals[i] for name, vals in cols}


def feed_batches(ds, conn, begun, batch_size, world, transforms=None):
    """Yields the iteration's feed batches (Batch objects) in order.

    The request for the next batch goes out before the current one is
    handed on, so the agent assembles it meanwhile.
    """
    import time

    req = {"op": "feed", "iter": begun["iter"], "max": int(batch_size)}
    slots = Slots()

    def request():
        r = req
        freed = slots.take_freed()
        if freed:
            r = dict(req, free=freed)
        return r

    first = dict(req, transforms=seeded(ds, transforms, begun["shuffle_seed"])) if transforms else req
    conn.send(first)
    last = time.monotonic()
    while True:
        hdr, fds = recv_reply(conn, "feed")
        b = slots.batch(hdr, fds)
        if b is None:
            if hdr.get("done"):
                return
            waited = time.monotonic() - last
            if waited > ds._stall_timeout:
                raise errors.AgentTimeoutError(
                    "no batch of epoch %d (rank %d, worker %d of %d) arrived within %.0fs: the agent kept "
                    "answering that none was ready (shards still downloading, or cache_limit=%s full); "
                    "see stall_timeout" % (begun["epoch"], world["rank"], world["worker"], world["num_workers"],
                                          waited, ds.cache_limit))
            conn.send(request())
            continue
        last = time.monotonic()
        conn.send(request())
        yield b
        b = None  # let its slot go as soon as the consumer drops it


def supports(conn):
    """Whether the agent on conn speaks the feed."""
    return (conn.version or 0) >= FEED_VERSION


_RECOVERIES = 3


def iterate(ds, world, conn, begun, batch_size, transforms=None):
    """Yields an iteration's feed batches; when the agent dies, starts a
    new one and continues exactly after the last batch delivered (the same
    epoch and order, the delivered samples skipped), as the mapped-shard
    path does. Closes conn (and its successors) at the end."""
    delivered = 0
    recoveries = 0
    try:
        while True:
            try:
                for b in feed_batches(ds, conn, begun, batch_size, world, transforms):
                    delivered += b.n
                    yield b
                return
            except errors.AgentError:
                recoveries += 1
                if recoveries > _RECOVERIES:
                    raise
                conn.close()
                resume = {k: begun[k] for k in ("epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed",
                                               "initial_physical_nodes")}
                extra = {"resume": resume, "epoch": begun["epoch"], "sample_in_epoch": begun["sample_in_epoch"],
                         "skip": delivered}
                conn, nb = ds._begin(world, extra)
                if not supports(conn):
                    raise errors.AgentError("the restarted agent does not speak the feed (protocol %s)" % conn.version)
                begun = dict(begun, iter=nb["iter"])
    finally:
        conn.close()


def per_sample(ds, cls, conn):
    """Whether ds.__iter__ (a DataLoader worker process, or num_workers=0
    with torch's loop) reads its samples from the feed: only with
    SLUICE_SHM=on. Per sample it costs more than the mapped-shard path
    (measured, 2 worker processes, load ~11: 48 KB ndarrays 3030-3610 vs
    4115-6627 samples/s; 200 B text 15.7-20.0k vs 34.9-43.7k), so auto
    leaves it off; it exists for the equivalence tests and as the path
    worker processes take with in-agent transforms set explicitly."""
    return mode() == "on" and supports(conn) and eligible(ds, cls)


def iter_samples(ds, world, conn, begun):
    """The iteration's samples from feed batches, as dicts equal to what the
    mapped-shard path yields."""
    schema = ds._info["schemas"][0]
    encs = list(schema["column_encodings"])
    decs = [_decode.column_decoder(e, ds.allow_unsafe_types) for e in encs]
    for k, name in enumerate(schema["column_names"]):
        if name in getattr(ds, "_encoded", ()):
            decs[k] = _encoded.TENSOR_DECODER  # a copy: the slot is reused
    for b in iterate(ds, world, conn, begun, ds.batch_size or 1, transforms(ds, conn)):
        yield from samples(b, decs, encs)
