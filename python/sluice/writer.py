"""Dataset writers with MosaicML Streaming's API, run by the sluice binary.

``MDSWriter``, ``JSONWriter``, ``CSVWriter``, ``TSVWriter`` and
``XSVWriter`` take MosaicML's arguments and write byte-identical datasets
(compressed shards: identical after decompression)::

    from sluice import MDSWriter

    with MDSWriter(out="s3://bucket/train", columns={"uuid": "str", "img": "jpeg"},
                   compression="zstd") as out:
        for sample in samples:
            out.write(sample)

Python renders each value (str, bytes, numbers, numpy arrays, PIL images,
JSON values) and hands samples to a ``sluice write`` process in large
columnar batches through a pipe; that process lays out the records, cuts,
hashes, compresses, writes and uploads the shards on all cores while Python
keeps producing.

Differences from MosaicML, all deliberate:

- ``write()`` queues the sample; a value its column cannot store raises
  from a later ``write()`` (or ``finish()``), naming the sample's number.
  The samples before it are written, the bad one is not, and the writer
  stays usable, as in MosaicML.
- A ``pkl`` column needs ``allow_unsafe_types=True`` (pickle runs code
  when read back).
- A writer that is never finished (the process killed) writes no
  index.json: the shards already written stay, and no index ever names a
  missing or partial shard.
"""

import json
import os
import queue
import select
import shutil
import struct
import subprocess
import tempfile
import threading
import urllib.parse
import warnings

from . import _agent, _writeenc
from ._version import __version__
from .errors import SluiceError

__all__ = ["MDSWriter", "JSONWriter", "CSVWriter", "TSVWriter", "XSVWriter", "merge_index", "WriterError"]

_HEADER = struct.Struct("<4sIQ")
_END = _HEADER.pack(b"SLE1", 0, 0)
_TARGET_BATCH_BYTES = 8 << 20
_MAX_BATCH = 1 << 16
_KWARGS = ("progress_bar", "max_workers", "retry", "exist_ok", "allow_unsafe_types", "timeout")


class WriterError(SluiceError):
    """The sluice write process failed (a store error, a full disk, ...)."""


def bytes_to_int(value):
    """MosaicML's size parser: an int, or a string like ``"64mb"`` (powers of
    1024), ``"100b"`` or ``"4096"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str):
        raise TypeError("size_limit must be an int or a string like '64mb', got %r" % (value,))
    text = value.lower().strip()
    units = ["kb", "mb", "gb", "tb", "pb", "eb", "zb", "yb"]
    supported = ["b"] + units
    for k, unit in enumerate(units):
        if text.endswith(unit):
            try:
                return int(float(text[: -len(unit)]) * 1024 ** (k + 1))
            except ValueError:
                break
    else:
        if text.endswith("b") and text[:-1].isdigit():
            return int(text[:-1])
        if text.isdigit():
            return int(text)
    raise ValueError("Unsupported value/suffix %s. Supported suffix are %s." % (text, supported))


def _split_out(out):
    """(local, remote, made_temp) from MosaicML's ``out`` argument."""
    if isinstance(out, str):
        if urllib.parse.urlparse(out).scheme not in ("", "file"):
            return tempfile.mkdtemp(prefix="sluice-write-"), out, True
        if out.startswith("file://"):
            out = urllib.parse.urlparse(out).path
        return os.path.expanduser(out), None, False
    if isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise ValueError(
                "Invalid `out` argument. It is either a string of local/remote directory or a "
                "list of two strings with [local, remote]."
            )
        return os.path.expanduser(out[0]), out[1], False
    raise TypeError("out must be a path, a URL or a (local, remote) pair, got %r" % (out,))


def _read_events(stdout, events):
    """Queues each JSON event line of the writer process, then "exit"."""
    for line in stdout:
        try:
            events.put(json.loads(line))
        except ValueError:
            events.put({"event": "error", "error": "unreadable output: %r" % line[:200]})
    events.put({"event": "exit"})


def _read_stderr(stderr, keep, echo):
    """Keeps the last lines of the process's stderr (for error messages);
    echoes progress lines when asked to."""
    import sys

    for line in stderr:
        text = line.decode("utf-8", "replace")
        keep.append(text)
        del keep[:-50]
        if echo and not text.startswith("sluice: "):
            sys.stderr.write(text)


class _Writer:
    """The machinery every writer shares; subclasses name the format."""

    format = ""

    def __init__(self, *, out, columns, keep_local=False, compression=None, hashes=None,
                 size_limit=1 << 26, **kwargs):
        bad = [k for k in kwargs if k not in _KWARGS]
        if bad:
            raise ValueError("Invalid Writer argument(s): %s " % bad)
        if not isinstance(columns, dict) or not columns:
            raise ValueError("columns must be a non-empty dict of column name to encoding")
        compression = compression or None
        hashes = list(hashes or [])
        if hashes != sorted(hashes) or len(set(hashes)) != len(hashes):
            raise ValueError("Hashes must be unique and in sorted order.")
        limit = None
        if size_limit:
            limit = bytes_to_int(size_limit)
            if limit < 0:
                raise ValueError("`size_limit` must be greater than zero, instead, found as %d." % limit)
        self.columns = dict(columns)
        self.column_names = sorted(columns)
        self.compression, self.hashes, self.size_limit = compression, hashes, limit
        self.keep_local = keep_local
        self._encoders = [self._encoder(n, columns[n], kwargs) for n in self.column_names]
        self.local, self.remote, self._temp = _split_out(out)
        if os.path.isdir(self.local) and os.listdir(self.local):
            if not kwargs.get("exist_ok", False):
                if self._temp:
                    shutil.rmtree(self.local, ignore_errors=True)
                raise FileExistsError("Directory is not empty: %s" % self.local)
            warnings.warn("Directory %s exists and is not empty; writing into it since exist_ok=True" % self.local)
        self._timeout = float(kwargs.get("timeout", 600))
        self._pending = []
        self._batch = 1  # the first sample alone, so a schema error shows at once
        self._written = 0  # samples handed to the process
        self._proc = None
        self._failed = None
        self._finished = False
        self._start(kwargs)

    # -- subclass hooks -------------------------------------------------

    def _encoder(self, name, enc, kwargs):
        return _writeenc.typed_encoder(name, enc)

    def _format_args(self):
        return []

    # -- process --------------------------------------------------------

    def _start(self, kwargs):
        args = [_agent.find_binary(), "write", "--format", self.format,
                "--columns", json.dumps(self.columns, sort_keys=True),
                "--size-limit", str(self.size_limit or 0)]
        if self.compression:
            args += ["--compression", self.compression]
        if self.hashes:
            args += ["--hashes", ",".join(self.hashes)]
        if self.remote:
            args += ["--remote", self.remote]
            if self.keep_local:
                args.append("--keep-local")
        if kwargs.get("exist_ok", False):
            args.append("--exist-ok")
        if kwargs.get("max_workers"):
            args += ["--max-workers", str(int(kwargs["max_workers"]))]
        if kwargs.get("progress_bar"):
            args += ["--progress", "plain"]
        args += self._format_args()
        args += ["--", self.local]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, bufsize=0)
        self._events = queue.Queue()
        self._stderr = []
        self._echo = bool(kwargs.get("progress_bar"))
        # The readers hold no reference to self, so that a writer dropped
        # unfinished can be collected (and abandon its dataset).
        threading.Thread(target=_read_events, args=(self._proc.stdout, self._events), daemon=True).start()
        threading.Thread(target=_read_stderr, args=(self._proc.stderr, self._stderr, self._echo), daemon=True).start()
        try:
            import fcntl

            fcntl.fcntl(self._proc.stdin.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
        except (ImportError, OSError):
            pass
        self._fd = self._proc.stdin.fileno()
        os.set_blocking(self._fd, False)
        ev = self._next_event(self._timeout)
        if ev.get("event") != "ready":
            self._cleanup()
            self._raise_start(ev)
        if ev.get("version") != __version__:
            warnings.warn("the sluice binary %s is version %s, this Python package is %s"
                          % (args[0], ev.get("version"), __version__))

    def _next_event(self, timeout):
        """The next event other than "file", waiting at most timeout seconds
        between events."""
        while True:
            try:
                ev = self._events.get(timeout=timeout)
            except queue.Empty:
                raise WriterError("sluice write sent nothing for %.0f s (files in %s)" % (timeout, self.local)) from None
            if ev.get("event") != "file":
                if ev.get("event") == "exit":
                    try:
                        self._proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                    rc = self._proc.returncode
                    how = "was killed by signal %d" % -rc if rc is not None and rc < 0 else "exited with status %s" % rc
                    msg = "".join(self._stderr).strip() or how
                    return {"event": "error", "error": "sluice write: " + msg}
                return ev

    def _raise_start(self, ev):
        msg, arg = ev.get("error", "sluice write failed"), ev.get("arg")
        if arg == "compression":
            raise ValueError("Invalid compression: %s. (%s)" % (self.compression, msg))
        if arg == "hashes":
            raise ValueError("Invalid hash: %s. (%s)" % (",".join(self.hashes), msg))
        if arg == "columns":
            raise TypeError(msg)
        if arg == "exist_ok":
            raise FileExistsError("Directory is not empty: %s" % self.local)
        if arg in ("size_limit", "max_workers", "progress", "format", "out"):
            raise ValueError(msg)
        raise WriterError(msg)

    def _send(self, data):
        """Writes data to the process, waiting at most the timeout for room."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view[: 1 << 20])
            except BlockingIOError:
                n = 0
            except BrokenPipeError:
                self._fail_from_process()
            if n:
                view = view[n:]
                continue
            _, w, _ = select.select([], [self._fd], [], self._timeout)
            if not w:
                self._failed = WriterError("sluice write took no input for %.0f s" % self._timeout)
                raise self._failed

    def _fail_from_process(self):
        ev = self._next_event(self._timeout)
        self._failed = WriterError(ev.get("error", "sluice write stopped"))
        self._cleanup()
        raise self._failed

    # -- batching -------------------------------------------------------

    def _flush(self):
        batch, self._pending = self._pending, []
        if not batch:
            return
        names = self.column_names
        try:
            cols = [[s[n] for s in batch] for n in names]
        except KeyError:
            for i, s in enumerate(batch):
                missing = [n for n in names if n not in s]
                if missing:
                    self._send_good(batch[:i])
                    self._pending = batch[i + 1:]
                    raise KeyError("sample %d has no column %r" % (self._written, missing[0])) from None
            raise
        except TypeError:
            raise TypeError("a sample is not a dict of column values") from None
        parts = []
        try:
            for enc, vals in zip(self._encoders, cols):
                parts += enc.section(vals)
        except _writeenc.EncodeError as e:
            self._send_good(batch[: e.offset])
            self._pending = batch[e.offset + 1:]
            raise e.exc_type("sample %d: %s" % (self._written, e)) from e
        self._send_frame(len(batch), parts)

    def _send_good(self, samples):
        if samples:
            self._pending, keep = samples, self._pending
            self._flush()
            self._pending = keep

    def _send_frame(self, n, parts):
        body = sum(map(len, parts))
        self._send(_HEADER.pack(b"SLB1", n, body))
        for part in parts:  # no copy of the batch into one buffer
            self._send(part)
        self._written += n
        per = max(1, body // n)
        self._batch = max(1, min(_MAX_BATCH, _TARGET_BATCH_BYTES // per, self._batch * 8))

    # -- MosaicML's API -------------------------------------------------

    def write(self, sample):
        """Queues one sample (a dict with a value for every column); the
        batch is handed to the writer process once it is large enough."""
        pending = self._pending
        pending.append(sample)
        if len(pending) >= self._batch:
            self._flush_checked()

    def _flush_checked(self):
        # A failed or finished writer keeps _batch at 0, so that every
        # write() comes here.
        if self._failed is not None:
            self._pending.clear()
            raise self._failed
        if self._finished:
            self._pending.clear()
            raise WriterError("write() after finish()")
        try:
            self._flush()
        except WriterError as e:
            self._failed = e
            self._batch = 0
            raise

    def finish(self):
        """Writes the queued samples, the last shard and index.json, waits
        for every upload, and removes a temporary local directory."""
        if self._finished:
            return
        if self._failed is not None:
            raise self._failed
        while self._pending:
            self._flush()
        self._finished = True
        self._batch = 0
        self._send(_END)
        self._proc.stdin.close()
        ev = self._next_event(self._timeout)
        try:
            self._proc.wait(timeout=self._timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        if ev.get("event") != "done":
            self._failed = WriterError(ev.get("error", "sluice write failed"))
            self._cleanup()
            raise self._failed
        self.stats = ev
        if self.remote and not self.keep_local and self._temp:
            shutil.rmtree(self.local, ignore_errors=True)

    def _cleanup(self):
        p = self._proc
        if p is None:
            return
        for f in (p.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if self._temp and not self.keep_local:
            shutil.rmtree(self.local, ignore_errors=True)

    def __del__(self):
        # Never finished: closing the pipe abandons the dataset (the shards
        # written stay, no index.json), as a killed writer would.
        p = getattr(self, "_proc", None)
        if p is not None and not self._finished and p.poll() is None:
            try:
                p.stdin.close()
            except (OSError, ValueError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # As MosaicML: the dataset is finished even when the block raised,
        # unless the writer itself has failed.
        if self._failed is not None:
            self._cleanup()
            return
        self.finish()


class MDSWriter(_Writer):
    """Writes an MDS dataset (MosaicML's ``streaming.MDSWriter``).

    Args: ``columns`` (name to MDS encoding), ``out`` (local directory,
    remote URL, or ``(local, remote)``), ``keep_local``, ``compression``
    (``"zstd"``, ``"zstd:7"``, ...), ``hashes`` (sorted list), ``size_limit``
    (bytes, or ``"64mb"``; falsy for one shard), and the keywords
    ``progress_bar``, ``max_workers`` (uploads in flight), ``retry``
    (accepted; the store layer retries with backoff), ``exist_ok``, and
    Sluice's ``allow_unsafe_types`` (needed for ``pkl`` columns) and
    ``timeout`` (seconds to wait for the writer process, default 600).
    """

    format = "mds"

    def __init__(self, *, columns, out, keep_local=False, compression=None, hashes=None,
                 size_limit=1 << 26, **kwargs):
        super().__init__(out=out, columns=columns, keep_local=keep_local, compression=compression,
                         hashes=hashes, size_limit=size_limit, **kwargs)

    def _encoder(self, name, enc, kwargs):
        return _writeenc.mds_encoder(name, enc, bool(kwargs.get("allow_unsafe_types")))


class JSONWriter(_Writer):
    """Writes a JSON-lines dataset (MosaicML's ``JSONWriter``); columns are
    ``str``, ``int`` or ``float``."""

    format = "json"

    def __init__(self, *, columns, out, newline="\n", keep_local=False, compression=None,
                 hashes=None, size_limit=1 << 26, **kwargs):
        self.newline = newline
        super().__init__(out=out, columns=columns, keep_local=keep_local, compression=compression,
                         hashes=hashes, size_limit=size_limit, **kwargs)

    def _format_args(self):
        return ["--newline", self.newline]


class XSVWriter(_Writer):
    """Writes a dataset of separated values (MosaicML's ``XSVWriter``)."""

    format = "xsv"

    def __init__(self, *, columns, separator, out, newline="\n", keep_local=False,
                 compression=None, hashes=None, size_limit=1 << 26, **kwargs):
        self.separator, self.newline = separator, newline
        super().__init__(out=out, columns=columns, keep_local=keep_local, compression=compression,
                         hashes=hashes, size_limit=size_limit, **kwargs)

    def _format_args(self):
        return ["--newline", self.newline] + (["--separator", self.separator] if self.format == "xsv" else [])

    def _encoder(self, name, enc, kwargs):
        return _writeenc.typed_encoder(name, enc, (self.separator, self.newline))


class CSVWriter(XSVWriter):
    """Writes a CSV dataset (MosaicML's ``CSVWriter``)."""

    format = "csv"

    def __init__(self, *, columns, out, newline="\n", keep_local=False, compression=None,
                 hashes=None, size_limit=1 << 26, **kwargs):
        super().__init__(columns=columns, separator=",", out=out, newline=newline,
                         keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)


class TSVWriter(XSVWriter):
    """Writes a TSV dataset (MosaicML's ``TSVWriter``)."""

    format = "tsv"

    def __init__(self, *, columns, out, newline="\n", keep_local=False, compression=None,
                 hashes=None, size_limit=1 << 26, **kwargs):
        super().__init__(columns=columns, separator="\t", out=out, newline=newline,
                         keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)


def merge_index(*args, **kwargs):
    """Merges sub-dataset indexes into one index.json, as MosaicML's
    ``merge_index``: ``merge_index(out)`` merges every sub-directory's
    index.json below ``out`` (a local directory, a URL, or ``(local,
    remote)``, merged at the remote); ``merge_index(index_files, out)``
    merges the listed index files (paths or ``(local, remote)`` pairs whose
    local paths lie under ``out``), in the order given."""
    kwargs.pop("keep_local", None)
    kwargs.pop("download_timeout", None)
    if kwargs:
        raise ValueError("Invalid merge_index argument(s): %s" % sorted(kwargs))
    if len(args) == 1:
        files, out = None, args[0]
    elif len(args) == 2:
        files, out = args
    else:
        raise ValueError("merge_index takes (out) or (index_file_urls, out)")
    if isinstance(out, (tuple, list)):
        out = out[1] if out[1] else out[0]
    cmd = [_agent.find_binary(), "merge"]
    if files is not None:
        root = out
        for f in files:
            if isinstance(f, (tuple, list)):
                f = f[0]
            rel = os.path.relpath(f, root) if urllib.parse.urlparse(f).scheme == "" else f
            cmd += ["--index", rel]
    cmd += ["--", out]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        raise WriterError(p.stderr.decode("utf-8", "replace").strip() or "sluice merge failed")
