"""One iteration of a StreamingDataset through the agent: it begins on a
connection of its own, then asks for batches of samples, maps the shards
they lease and decodes their records, and starts again where it was when
the agent dies (a crash or an upgrade). StreamingDataset's _begin,
_iterate and _batches call these; sluice._feed and sluice._shm use them
through those methods, which a subclass may override."""

import mmap
import os
import time
import warnings

from . import _agent, _worker, errors
from . import images as _images

_PIPELINE_WAIT_MS = 100
_RECOVERIES = 3


def begin(ds, world, extra):
    """Opens a connection of its own for one iteration and begins it.

    The iteration's requests are pipelined on that connection, and
    closing it releases everything the iteration held.
    """
    conn = _agent.Connection(ds._agent_dir, timeout=ds._timeout)
    try:
        opened = conn.call({"op": "open", "dataset": ds._wire, "job": ds._job, "world": world, "env": ds._env}, "open",
                           timeout=ds._open_timeout())
        if opened.get("shard_samples") != ds._info.get("shard_samples"):
            raise errors.ProtocolError("the dataset changed while it was in use (shard sizes differ)")
        begin = {"op": "begin", "handle": opened["handle"], "world": world}
        begin.update(extra)
        begun = conn.call(begin, "begin")
        for w in begun.get("warnings") or ():
            # A resume that is not exactly-once (the agent's plan says
            # why; MosaicML plays the same order silently).
            warnings.warn(w, UserWarning, stacklevel=3)
        return conn, begun
    except BaseException:
        conn.close()
        raise


def iterate(ds, world, conn, begun, private=False):
    yielded = 0
    skip = 0
    recoveries = 0
    maps = {}
    try:
        while True:
            try:
                for sample in ds._batches(conn, begun, maps, private, world):
                    yielded += 1
                    yield sample
                return
            except errors.AgentError:
                # The agent died: start a new one and continue exactly
                # where this worker was, in the same epoch and order.
                recoveries += 1
                if recoveries > _RECOVERIES:
                    raise
                _close_maps(maps)
                conn.close()
                skip += yielded
                yielded = 0
                resume = {
                    "epoch": begun["epoch"],
                    "sample_in_epoch": begun["sample_in_epoch"],
                    "num_canonical_nodes": begun["num_canonical_nodes"],
                    "shuffle_seed": begun["shuffle_seed"],
                    "initial_physical_nodes": begun["initial_physical_nodes"],
                }
                extra = {"resume": resume, "epoch": begun["epoch"], "sample_in_epoch": begun["sample_in_epoch"], "skip": skip}
                conn, nb = ds._begin(world, extra)
                begun = dict(begun, iter=nb["iter"])
    finally:
        _close_maps(maps)
        conn.close()


def batches(ds, conn, begun, maps, private, world):
    """Yields the decoded samples of iteration it, batch by batch.

    The request for the next batch goes out before the current one is
    decoded, so the agent prepares it meanwhile; the batch before the
    current one is released with that request. With private (in a
    DataLoader worker), shards are mapped copy-on-write so ndarray values
    view them (see _map).
    """
    decoders = ds._decoders
    shard_schema = ds._info["shard_schema"]
    flag = _agent.INLINE_FLAG
    from .dataset import StreamingDataset, routes_items

    hook = routes_items(ds, StreamingDataset)
    # Under a cache limit the records the agent copies ahead come in its
    # memory file of mapped copies (see _take_mems) instead of inline.
    req = {"op": "next", "iter": begun["iter"], "max": ds._fetch, "inline_max": ds._inline_max, "map_copies": True}
    # A DataLoader worker watches its parent: when the main process
    # dies the worker stops instead of waiting on as an orphan.
    parent = _worker.parent_pid() if private else None
    # Taking turns (order_admissions), a worker's shard change waits in
    # its turn for the locations of the shard it leaves: each reply is
    # released as soon as its samples are out, with the request for
    # the next, not pipelined behind it.
    pipelined = not ds.order_admissions
    conn.send(req)
    prev = None
    last = time.monotonic()
    while True:
        fds = []
        try:
            reply, body = conn.recv("batch", fds)
            _take_mems(reply, fds, maps)
        finally:
            for fd in fds:
                os.close(fd)
        n = reply["n"]
        if n == 0:
            if reply.get("done"):
                return
            if parent is not None and os.getppid() != parent:
                os._exit(1)  # the main process died (see _worker.watch_parent)
            waited = time.monotonic() - last
            if waited > ds._stall_timeout:
                try:
                    st = conn.call({"op": "stats"}, "stats")
                    held = "; the agent holds %d leases over %d iterations of %d connections" % (
                        st.get("leases", -1), st.get("iterations", -1), st.get("connections", -1))
                except errors.SluiceError:
                    held = ""
                raise errors.AgentTimeoutError(
                    "no sample of epoch %d (rank %d, worker %d of %d) arrived within %.0fs: the agent kept "
                    "answering that none was ready (shards still downloading, or cache_limit=%s full of "
                    "shards other readers hold%s); see stall_timeout"
                    % (begun["epoch"], world["rank"], world["worker"], world["num_workers"], waited,
                       ds.cache_limit, held))
            # Nothing ready yet: the batch before has been consumed, so
            # give its leases back now; the agent may need that space.
            conn.send(dict(req, release=[prev]) if prev else req)
            prev = None
            continue
        # The pipelined request waits only briefly: if the agent cannot
        # make the next batch before this one is released (a tight
        # cache limit), the empty reply makes us release it sooner.
        last = time.monotonic()
        if pipelined:
            nreq = dict(req, wait_ms=_PIPELINE_WAIT_MS)
            if prev:
                nreq["release"] = [prev]
            conn.send(nreq)
        prev = reply.get("id") or None
        entries, inline = _agent.parse_entries(reply, body)
        shards = reply["shards"]
        # Map the shards this batch leases; unmap those whose last batch
        # has been consumed.
        refs = []
        fresh = {}
        for s in shards:
            mem = s.get("mem")
            if mem:
                # Mapped when its descriptor came (_take_mems); kept.
                p = (_MEM, mem)
                m = fresh.get(p)
                if m is None:
                    m = maps.pop(p, None)
                if m is None or len(m) < s["size"]:
                    raise errors.ProtocolError("memory file %r of mapped copies was not received" % mem)
                fresh[p] = m
            else:
                p = s["path"]
                m = maps.pop(p, None)
                fresh[p] = m
            refs.append([p, s["size"], m, decoders[shard_schema[s["shard"]]]])
        for p in [p for p in maps if type(p) is tuple]:
            fresh[p] = maps.pop(p)
        _close_maps(maps)
        maps.update(fresh)
        for sid, ref, ln, off in entries:
            r = refs[ref & ~flag]
            if ref & flag:
                v = r[3](inline, off, ln)
            else:
                m = r[2]
                if m is None:
                    m = r[2] = maps[r[0]] = _map(r[0], r[1], private)
                v = r[3](m, off, ln)
            if hook:
                # MosaicML iterates through ds[i]: a subclass that
                # overrides __getitem__ or get_item sees every sample.
                ds._pending = (sid, v)
                v = ds[sid]
                ds._pending = None
            if ds._decode_images:
                # The seed the iteration plays: a resumed state's, which
                # MosaicML keeps over the constructor's, so a resumed run
                # draws the interrupted run's crops and flips.
                v = _images.apply_all(ds._decode_images, v, begun["shuffle_seed"], begun["epoch"], sid)
            yield v
        if not pipelined:
            conn.send(dict(req, release=[prev]) if prev else req)
            prev = None


# The key in maps of a memory file of mapped copies: (_MEM, its id).
_MEM = "mem"


def _take_mems(reply, fds, maps):
    """Maps the memory file of mapped copies whose descriptor came with
    reply (its "mem_fd"; the descriptors in fds, which the caller closes)
    and unmaps those reply names in "unmap".

    Under a cache limit the agent writes the records it copies ahead into
    a memory file (memfd: no name, nothing left behind by a killed agent
    or client) sent once a connection, and lists it in the replies as a
    shard with its id ("mem"). A block of it is rewritten once the
    batches of its records are released, so no decoded value may view
    it: it is mapped read-only, where every decoder copies its value out
    (bytes, str and numbers are new objects, an ndarray is copied unless
    it views a writable, copy-on-write mapping (_map), which this never
    is), and a record is decoded before its batch is released (the
    release goes with the request after the next)."""
    for mem in reply.get("unmap") or ():
        m = maps.pop((_MEM, mem), None)
        if m is not None:
            _close_maps({0: m})
    mem = reply.get("mem_fd")
    if not mem:
        if fds:
            raise errors.ProtocolError("the agent sent %d descriptors with a batch that names no memory file" % len(fds))
        return
    if len(fds) != 1:
        raise errors.ProtocolError("memory file %r came with %d descriptors, want 1" % (mem, len(fds)))
    size = next((s["size"] for s in reply.get("shards") or () if s.get("mem") == mem), 0)
    if not isinstance(size, int) or size <= 0 or (_MEM, mem) in maps:
        raise errors.ProtocolError("memory file %r is not listed once with a size" % mem)
    if os.fstat(fds[0]).st_size < size:
        raise errors.ProtocolError("memory file %r is smaller than the %d bytes announced" % (mem, size))
    maps[(_MEM, mem)] = mmap.mmap(fds[0], size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)


def _close_maps(maps):
    for m in maps.values():
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass  # a view is still alive (an exception's frame); GC unmaps it
    maps.clear()


def _map(path, size, private=False):
    """Maps a leased shard read-only, or with private=True copy-on-write:
    then ndarray columns decode to writable arrays that view the mapping
    (no copy; writes stay in this process). The mapping outlives the lease
    while such an array lives; the agent never rewrites or truncates a
    shard in place (eviction unlinks it), so the view stays valid."""
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY if private else mmap.ACCESS_READ)
    except FileNotFoundError:
        raise errors.AgentError("leased shard %s vanished from the cache" % path) from None
    except ValueError:
        raise errors.CorruptDataError("shard %s is empty" % path) from None
    if len(m) < size:
        m.close()
        raise errors.CorruptDataError("shard %s has %d bytes, the agent announced %d" % (path, len(m), size))
    return m
