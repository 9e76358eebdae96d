"""Exceptions raised by the Sluice client.

Every error the agent reports carries a code; each code maps to one class
below, which also derives from the closest built-in exception so that
existing ``except FileNotFoundError`` / ``except PermissionError`` code keeps
working.
"""

import json


class SluiceError(Exception):
    """Base class of every Sluice client error."""

    code = "internal"


class AgentError(SluiceError, ConnectionError):
    """The agent is unreachable, died, or did not answer in time."""

    code = "agent"


class ProtocolError(SluiceError):
    """The agent sent something this client cannot understand."""

    code = "protocol"


class BadRequestError(SluiceError, ValueError):
    """The agent rejected a request as malformed."""

    code = "bad_request"


class VersionError(SluiceError):
    """The client and the agent share no protocol version."""

    code = "version"


class DatasetNotFoundError(SluiceError, FileNotFoundError):
    """The dataset, its index or one of its shards does not exist."""

    code = "not_found"


class PermissionDeniedError(SluiceError, PermissionError):
    """The storage service refused the credentials."""

    code = "permission"


class CorruptDataError(SluiceError, ValueError):
    """A shard or index failed validation."""

    code = "corrupt"


class InvalidArgumentError(SluiceError, ValueError):
    """An argument is invalid (unknown algorithm, bad size string, ...)."""

    code = "invalid"


class CacheLimitError(SluiceError, ValueError):
    """The cache limit cannot hold what is needed (MosaicML: ValueError)."""

    code = "cache_limit"


class AgentTimeoutError(SluiceError, TimeoutError):
    """A wait inside the agent passed its deadline."""

    code = "timeout"


class AgentClosedError(AgentError):
    """The agent is shutting down."""

    code = "closed"


_BY_CODE = {
    cls.code: cls
    for cls in (
        BadRequestError,
        VersionError,
        DatasetNotFoundError,
        PermissionDeniedError,
        CorruptDataError,
        InvalidArgumentError,
        CacheLimitError,
        AgentTimeoutError,
        AgentClosedError,
    )
}


class IndexDecodeError(CorruptDataError, json.JSONDecodeError):
    """A dataset's index.json is empty or not JSON. Also a
    json.JSONDecodeError, which MosaicML raises in this case."""

    def __init__(self, message):
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos, self.lineno, self.colno = message, "", 0, 1, 1

    def __str__(self):
        return self.msg

    def __reduce__(self):
        return (type(self), (self.msg,))


class EmptyIndexError(SluiceError, RuntimeError):
    """A dataset's index.json lists no shards (MosaicML: RuntimeError)."""

    code = "empty_index"


class LocalIndexNotFoundError(DatasetNotFoundError, RuntimeError):
    """The index.json of a stream with no remote is not in its local
    directory. MosaicML raises RuntimeError here ("No `remote` provided,
    but local file ... does not exist either"); this is also a
    FileNotFoundError, as a missing index with a remote is."""


def from_reply(code, message):
    """Returns the exception for an error reply."""
    # The agent has one code for every corrupt input; MosaicML users catch
    # json.JSONDecodeError for a bad index and RuntimeError for an empty one.
    if code == "corrupt" and "index.json" in message and "bad json" in message:
        return IndexDecodeError(message)
    if code in ("internal", "invalid") and "index.json" in message and message.rstrip().endswith("no shards"):
        return EmptyIndexError(message)
    cls = _BY_CODE.get(code, SluiceError)
    return cls(message)
