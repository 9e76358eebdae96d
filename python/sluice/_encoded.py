"""Encoded columns as uint8 tensors, for GPU decoders:
``StreamingDataset(..., encoded_tensors=sluice.EncodedTensor("jpg"))``.

An EncodedTensor names a variable-size MDS column (``bytes``, ``jpeg``,
``png``, ...) to deliver as its stored bytes, undecoded, each sample's
value a 1-D ``torch.uint8`` tensor: what ``torchvision.io.decode_jpeg``
(on the GPU: ``device="cuda"``), nvJPEG and DALI take. StreamingDataLoader
with torch's default collate makes the batch's column a list of those
tensors (they differ in length, so they are not stacked).

Through the shared-memory feed (sluice._shm: the threaded feed, default
collate) each tensor is a view of the batch's shared memory, with no copy:
the tensors of a batch are one ``torch.split`` of the column's bytes in
the memory file the agent wrote, and that file (the iteration's slot) is
written again only once every one of them, and every view of them, has
died (sluice._shm.Slots). Everywhere else (DataLoader worker processes,
``num_workers=0``, iterating the dataset, ``ds[i]``, a custom collate) the
values are equal tensors, copied out of the mapped shard.

With ``pin_memory=True`` (and CUDA) a batch's column is pinned as one
buffer and split there (one copy into pinned memory instead of one
allocation per sample).
"""

from collections.abc import Mapping

from . import _decode, errors


class EncodedTensor:
    """Deliver a column encoded, as 1-D ``torch.uint8`` tensors.

    column: the name of a variable-size MDS column (``bytes``, ``jpeg``,
    ``png``, ...). Each sample's value is the column's stored bytes, exactly
    as written (for ``jpeg``/``png``, the image file), as a 1-D
    ``torch.uint8`` tensor; StreamingDataLoader's default collate gives a
    batch's column as a list of them. Through the shared-memory feed the
    tensors view the batch's shared memory (no copy), which stays reserved
    for them while any of them (or a view of one) lives: ``.clone()`` the
    values you keep past a few batches. See docs/images.md, "GPU decoders".
    """

    __slots__ = ("column",)

    def __init__(self, column):
        if not isinstance(column, str) or not column:
            raise ValueError("EncodedTensor column %r: want a column name" % (column,))
        self.column = column

    def __repr__(self):
        return "EncodedTensor(%r)" % self.column


def check(encoded_tensors, decode_images=()):
    """encoded_tensors (an EncodedTensor, a column name, or a list of
    them; None: none) as a tuple of column names. A column named twice, or
    also in decode_images, is a ValueError."""
    if encoded_tensors is None:
        return ()
    if isinstance(encoded_tensors, (EncodedTensor, str)):
        encoded_tensors = [encoded_tensors]
    names = []
    for e in encoded_tensors:
        if isinstance(e, str):
            e = EncodedTensor(e)
        elif not isinstance(e, EncodedTensor):
            raise TypeError("encoded_tensors: want EncodedTensor objects or column names, got %r" % (e,))
        if e.column in names:
            raise ValueError("encoded_tensors names column %r twice" % e.column)
        names.append(e.column)
    for d in decode_images or ():
        if d.column in names:
            raise ValueError("column %r is in both decode_images and encoded_tensors: deliver it decoded or "
                             "encoded, not both" % d.column)
    return tuple(names)


def validate(columns, info):
    """Checks the encoded columns against the dataset's schemas (the
    agent's open reply): every shard is MDS and has each column with a
    variable size. InvalidArgumentError names the column otherwise."""
    if not columns:
        return
    for s in info.get("schemas") or ():
        fmt = s.get("format", "mds")
        if fmt != "mds":
            raise errors.InvalidArgumentError("encoded_tensors needs MDS shards; this dataset has %s shards" % fmt)
        names = list(s.get("column_names") or ())
        encs = list(s.get("column_encodings") or ())
        sizes = list(s.get("column_sizes") or ())
        for c in columns:
            if c not in names:
                raise errors.InvalidArgumentError("encoded_tensors names column %r, which the dataset lacks (its "
                                                  "columns: %s)" % (c, ", ".join(names)))
            i = names.index(c)
            if i < len(sizes) and sizes[i] is not None:
                raise errors.InvalidArgumentError(
                    "encoded_tensors: column %r (%s) has a fixed size of %d bytes; encoded tensors are for "
                    "variable-size encoded columns (bytes, jpeg, png, ...)" % (c, encs[i] if i < len(encs) else "?",
                                                                             sizes[i]))


def to_tensor(b):
    """The bytes-like b copied into a new 1-D torch.uint8 tensor."""
    import numpy as np
    import torch

    return torch.from_numpy(np.frombuffer(b, np.uint8).copy())


class _Ranged:
    """A column decoder giving a tensor copy of the value, with the ranged
    form sluice._shm.samples reads in place (one copy)."""

    def __call__(self, b):
        return to_tensor(b)

    @staticmethod
    def ranged(mem, start, end):
        import torch

        return torch.from_numpy(mem[start:end].copy())


TENSOR_DECODER = _Ranged()


class TensorRecord:
    """A record decoder whose encoded columns come out as tensors: the
    schema's decoder with those columns read as bytes, then copied into
    tensors (the mapped-shard path and ``ds[i]``)."""

    __slots__ = ("dec", "columns")

    def __init__(self, dec, columns):
        self.dec, self.columns = dec, columns

    def __call__(self, buf, off=0, length=None):
        v = self.dec(buf, off, length)
        for c in self.columns:
            x = v.get(c)
            if x is not None:
                v[c] = to_tensor(x)
        return v


def record_decoders(schemas, allow_unsafe, columns):
    """The record decoder of each schema, the encoded columns as tensors."""
    out = []
    for s in schemas:
        if columns and s.get("format", "mds") == "mds":
            names = s.get("column_names") or ()
            encs = ["bytes" if n in columns else e for n, e in zip(names, s.get("column_encodings") or ())]
            out.append(TensorRecord(_decode.record_decoder(dict(s, column_encodings=encs), allow_unsafe), columns))
        else:
            out.append(_decode.record_decoder(s, allow_unsafe))
    return out


def split(flat, offsets):
    """flat (a 1-D uint8 tensor) cut at offsets (n+1 ascending, from 0)
    into a list of n views of it."""
    import torch

    sizes = [offsets[i + 1] - offsets[i] for i in range(len(offsets) - 1)]
    return list(torch.split(flat, sizes))


class Packed:
    """A batch's encoded column on its way out of a DataLoader worker
    process: the samples' tensors concatenated, so that one tensor crosses
    the pipe (and the pin-memory thread pins one buffer) instead of one per
    sample. StreamingDataLoader unpacks it in the training process into
    the list of views (unpack)."""

    __slots__ = ("flat", "offsets")

    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets

    @classmethod
    def of(cls, tensors):
        import torch

        offs = [0]
        for t in tensors:
            offs.append(offs[-1] + t.numel())
        flat = torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0, dtype=torch.uint8)
        return cls(flat, offs)

    def __reduce__(self):
        return (Packed, (self.flat, self.offsets))

    def pin_memory(self, device=None):
        """Pins the column as one buffer (torch's pin-memory thread calls
        this)."""
        return Packed(self.flat.pin_memory(), self.offsets)

    def tensors(self):
        return split(self.flat, self.offsets)


def pinned(tensors):
    """The tensors copied into one pinned buffer, as views of it."""
    import torch

    offs = [0]
    for t in tensors:
        offs.append(offs[-1] + t.numel())
    flat = torch.empty(offs[-1], dtype=torch.uint8, pin_memory=True)
    for t, a, b in zip(tensors, offs, offs[1:]):
        flat[a:b].copy_(t.reshape(-1))
    return split(flat, offs)


def collate(batch, fn, columns, pack=False, pin=False):
    """fn's batch of the samples (dicts), the encoded columns left as lists
    of their tensors (fn, torch's default collate, would try to stack
    them). pack: the lists as Packed (in a DataLoader worker process); pin:
    copied into one pinned buffer each (the threaded feed with
    pin_memory)."""
    if not batch or not isinstance(batch[0], Mapping):
        return fn(batch)
    first = batch[0]
    cols = [c for c in columns if c in first]
    if not cols:
        return fn(batch)
    rest = fn([{k: v for k, v in s.items() if k not in cols} for s in batch])
    out = {}
    for k in first:
        if k not in cols:
            out[k] = rest[k]
            continue
        vals = [s[k] for s in batch]
        if pack:
            vals = Packed.of(vals)
        elif pin:
            vals = pinned(vals)
        out[k] = vals
    return out


def unpack(batch):
    """A batch from a worker process with its Packed columns as lists of
    tensors (views of the one received)."""
    if isinstance(batch, dict):
        for k, v in batch.items():
            if type(v) is Packed:
                batch[k] = v.tensors()
    return batch
