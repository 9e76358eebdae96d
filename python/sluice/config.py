"""Job files (YAML) for StreamingDataset.from_config.

The file is the one `sluice run` executes (a local path or a store URL such
as s3://bucket/configs/train.yaml); its ``dataset:`` section holds
StreamingDataset's keyword arguments next to the training script's own
``training:`` section. The sluice binary reads and checks the file (strict
YAML: unknown keys, wrong types and duplicates are errors with line
numbers), so no YAML library is needed here; this module checks the
dataset section against StreamingDataset's arguments, also by line.
"""

import inspect
import json
import os
import subprocess

from . import _agent


class ConfigError(ValueError):
    """A job file is missing, malformed or names a wrong argument."""


# Types of the StreamingDataset arguments a YAML value may give (None is
# always allowed: the argument's default).
_INT = ("download_retry", "predownload", "sampling_granularity", "num_canonical_nodes", "batch_size",
        "shuffle_seed", "shuffle_block_size", "replication", "fetch_size", "inline_max")
_FLOAT = ("download_timeout", "timeout")
_BOOL = ("keep_zip", "shuffle", "allow_unsafe_types")
_STR = ("remote", "local", "split", "validate_hash", "sampling_method", "partition_algo", "shuffle_algo",
        "batching_method", "stream_name", "agent_dir")
_INT_OR_STR = ("epoch_size", "cache_limit")
_STREAM_KEYS = ("remote", "local", "split", "proportion", "repeat", "choose", "download_retry",
                "download_timeout", "validate_hash", "keep_zip")


def load(location=None, timeout=120):
    """The checked job file as a dict (sluice run --print): kind, args,
    flags, env, command, dataset, dataset_lines, training, source.

    location defaults to $SLUICE_CONFIG.
    """
    location = location or os.environ.get("SLUICE_CONFIG")
    if not location:
        raise ConfigError("no config: pass its path or URL, or set SLUICE_CONFIG")
    location = os.fspath(location)
    cmd = [_agent.find_binary(), "run", "--print", location]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ConfigError("reading %s took longer than %ds" % (location, timeout)) from None
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "replace").strip()
        if msg.startswith("sluice: "):
            msg = msg[len("sluice: "):]
        raise ConfigError(msg or "sluice run --print %s failed (exit %d)" % (location, p.returncode))
    return json.loads(p.stdout)


def _type_ok(name, v):
    if v is None:
        return True
    if name in _INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if name in _FLOAT:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if name in _BOOL:
        return isinstance(v, bool)
    if name in _STR:
        return isinstance(v, str)
    if name in _INT_OR_STR:
        return isinstance(v, (int, str)) and not isinstance(v, bool)
    return True


def dataset_arguments(location=None, overrides=None):
    """StreamingDataset keyword arguments from a job file's dataset section,
    updated with overrides. Raises ConfigError naming the file and line of a
    wrong argument."""
    from .dataset import Stream, StreamingDataset

    doc = load(location)
    src, lines = doc["source"], doc.get("dataset_lines") or {}
    params = inspect.signature(StreamingDataset.__init__).parameters
    accepted = [n for n, p in params.items() if p.kind == p.KEYWORD_ONLY]
    kwargs = {}
    for name, value in (doc.get("dataset") or {}).items():
        where = "config %s:%d: dataset.%s" % (src, lines.get(name, 0), name)
        if name not in accepted:
            raise ConfigError("%s is not a StreamingDataset argument (they are: %s)" % (where, ", ".join(sorted(accepted))))
        if name == "streams":
            if not isinstance(value, list) or not value:
                raise ConfigError("%s: want a list of streams (mappings of Stream arguments)" % where)
            streams = []
            for i, s in enumerate(value):
                if not isinstance(s, dict):
                    raise ConfigError("%s[%d]: want a mapping of Stream arguments" % (where, i))
                bad = sorted(set(s) - set(_STREAM_KEYS))
                if bad:
                    raise ConfigError("%s[%d]: %s not a Stream argument (they are: %s)"
                                      % (where, i, ", ".join(bad), ", ".join(_STREAM_KEYS)))
                try:
                    streams.append(Stream(**s))
                except (TypeError, ValueError) as e:
                    raise ConfigError("%s[%d]: %s" % (where, i, e)) from None
            value = streams
        elif not _type_ok(name, value):
            raise ConfigError("%s: %r is not a valid value (%s)" % (where, value, type(value).__name__))
        kwargs[name] = value
    kwargs.update(overrides or {})
    return kwargs


def training(location=None):
    """The job file's free-form training section (hyperparameters)."""
    return load(location).get("training")
