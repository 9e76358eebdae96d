"""Stream: one data source of a StreamingDataset, with MosaicML's Stream
arguments, and the checks and defaults a dataset applies to its streams."""

import os


def _abs_location(p):
    """Local paths must be absolute: the agent runs in another directory."""
    if p is None:
        return None
    p = os.fspath(p)
    if "://" in p:
        return p
    return os.path.abspath(os.path.expanduser(p))


def _size_str(v, what):
    """A size for the agent: an int, a float (truncated, as MosaicML's
    bytes_to_int and number_abbrev_to_int do) or a string like '10gb'."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError("%s must be an int or a string like '10gb', got %r" % (what, v))
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("%s must be finite, got %r" % (what, v))
        v = int(v)
    # MosaicML takes '2 k' and ' 10 gb ' (it strips the number it parses).
    return "".join(str(v).split())


def _plain(v):
    """v with numpy integer and float scalars made Python's (JSON cannot
    encode them; MosaicML takes them in its arithmetic)."""
    if isinstance(v, (bool, int, float, str, list, dict)) or v is None:
        return v
    if hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0:
        return v.item()
    return v


def _check_download_args(download_retry, download_timeout):
    """MosaicML's checks (ValueError): download_retry >= 0, download_timeout > 0."""
    if download_retry is not None and download_retry < 0:
        raise ValueError("`download_retry` must be non-negative, got %r" % (download_retry,))
    if download_timeout is not None and download_timeout <= 0:
        raise ValueError("`download_timeout` must be positive, got %r" % (download_timeout,))


class Stream:
    """One data source of a StreamingDataset (MosaicML's Stream arguments)."""

    def __init__(
        self,
        *,
        remote=None,
        local=None,
        split=None,
        proportion=None,
        repeat=None,
        choose=None,
        download_retry=None,
        download_timeout=None,
        validate_hash=None,
        keep_zip=None,
    ):
        if not remote and not local:
            raise ValueError("`remote` and/or `local` path must be provided")
        given = [x is not None for x in (proportion, repeat, choose)]
        if sum(given) > 1:
            raise ValueError("give at most one of proportion, repeat and choose")
        for name, v in (("proportion", proportion), ("repeat", repeat), ("choose", choose)):
            if v is not None and v < 0:
                raise ValueError("%s must be >= 0, got %r" % (name, v))
        _check_download_args(download_retry, download_timeout)
        self.remote = remote
        self.local = local
        # MosaicML's Stream holds split or '' from the start.
        self.split = split or ""
        self.proportion = proportion
        self.repeat = repeat
        self.choose = choose
        # What the user gave: a dataset sets the resolved weights on the
        # attributes above, and a later dataset over this Stream must
        # resolve from the given ones again.
        self._given = (proportion, repeat, choose)
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        # The same for the download settings: a dataset fills the unset
        # ones with its own (MosaicML's Stream.apply_default), a later
        # dataset with its own again.
        self._given_opts = {"split": split, "download_retry": download_retry, "download_timeout": download_timeout,
                            "validate_hash": validate_hash, "keep_zip": keep_zip}

    def _apply_default(self, default):
        """Sets the settings this Stream was not given to the dataset's
        (default: a dict of the _given_opts keys), as MosaicML's
        StreamingDataset does to each of its streams: split '' when none."""
        given = self._opts()
        for k, v in default.items():
            setattr(self, k, given[k] if given[k] is not None else v)
        self.split = self.split or ""

    def _opts(self):
        # Streams pickled by an older client have no _given_opts.
        return getattr(self, "_given_opts", None) or {
            k: getattr(self, k) for k in ("split", "download_retry", "download_timeout", "validate_hash", "keep_zip")}

    def _wire(self):
        proportion, repeat, choose = getattr(self, "_given", (self.proportion, self.repeat, self.choose))
        opts = self._opts()
        timeout = opts["download_timeout"]
        out = {
            "remote": _abs_location(self.remote),
            "local": _abs_location(self.local),
            "split": opts["split"] or None,
            "proportion": None if proportion is None else float(proportion),
            "repeat": None if repeat is None else float(repeat),
            "choose": None if choose is None else int(choose),
            "download_retry": opts["download_retry"],
            "download_timeout": None if timeout is None else float(timeout),
            "validate_hash": opts["validate_hash"],
            "keep_zip": opts["keep_zip"],
        }
        return {k: _plain(v) for k, v in out.items() if v is not None}


def _derived_local(remote, split):
    """The cache folder MosaicML derives when no local is given: the
    temporary directory, a folder named by the BLAKE2s (16 bytes) hash of
    remote as given, then the split."""
    import hashlib
    import tempfile
    name = hashlib.blake2s(str(remote).encode("utf-8"), digest_size=16).hexdigest()
    return os.path.join(tempfile.gettempdir(), name, split or "")


def _check_stream_class(st):
    """Refuse a Stream subclass that overrides behaviour: the agent reads
    the stream, so its methods would silently never run."""
    if not isinstance(st, Stream):
        raise TypeError("streams must hold sluice.Stream objects, got %s" % type(st).__name__)
    overridden = sorted({name for klass in type(st).__mro__ if klass not in (Stream, object)
                         for name, v in vars(klass).items()
                         if callable(v) and name != "__init__" and not (name.startswith("__") and name.endswith("__"))})
    if overridden:
        raise NotImplementedError(
            "custom Stream subclasses are not supported: %s overrides %s, which Sluice would never call "
            "(the agent reads the stream); use sluice.Stream and transform samples in a StreamingDataset "
            "subclass's __getitem__" % (type(st).__name__, ", ".join(overridden)))


def _check_weights(streams):
    """MosaicML's rule for stream weights, checked (as MosaicML does)
    before any index is read: stream 0 decides whether the streams are
    weighted relatively (proportion) or absolutely (repeat, choose or no
    weight), and every stream must be weighted the same way. The weights
    checked are those the user gave: a Stream an earlier dataset resolved
    holds all three."""
    given = [getattr(st, "_given", (st.proportion, st.repeat, st.choose)) for st in streams]
    relative = bool(given) and given[0][0] is not None
    for i, (proportion, repeat, choose) in enumerate(given):
        if (proportion is not None) != relative:
            how = ("proportion=%r" % proportion if proportion is not None else "repeat=%r" % repeat
                   if repeat is not None else "choose=%r" % choose if choose is not None else "no weight")
            raise ValueError(
                "stream weights: a proportion (relative) cannot be mixed with repeat, choose or no weight "
                "(absolute), but stream %d has %s where stream 0 is weighted %s; weight every stream by "
                "proportion, or none" % (i, how, "relatively" if relative else "absolutely"))


def _check_locals(streams):
    """Refuses two streams whose samples would share one local directory
    (local joined with split) while coming from different places (remote
    and split): they would share its index.json and shard files, and the
    second stream could be served the first's shards. MosaicML refuses any
    reuse (ValueError); Sluice takes one remote read twice, which is the
    same data. Streams are checked after the dataset's defaults (split)
    were applied; a stream without local is cached where the agent
    chooses."""
    seen = {}
    for i, st in enumerate(streams):
        if not st.local:
            continue
        where = os.path.normpath(os.path.join(_abs_location(st.local), st.split or ""))
        remote = _abs_location(st.remote) if st.remote else None
        if remote and "://" in remote:
            remote = remote.rstrip("/")  # s3://b/x/ is s3://b/x
        source = (remote, st.split or "")
        first = seen.setdefault(where, (i, source))
        if first[1] != source:
            raise ValueError(
                "streams %d and %d use the same local directory %s for different data (remote %s and %s): "
                "their index.json and shards would overwrite each other; give each stream its own local"
                % (first[0], i, where, first[1][0] or "none given", source[0] or "none given"))
